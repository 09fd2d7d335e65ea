"""A saved plan is an approval, not an instruction: `apply PLANFILE` makes the plan again and acts
only when its actions equal the saved ones (app/apply._approved). Any edit of what a plan would do
is refused with a message; a damaged file is a PlanFileError, never a traceback."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from aigo_apply.app.saved_plan import approved as _approved
from aigo_apply.errors import PlanFileError
from aigo_apply.plan.facts import PlanRequest
from aigo_apply.plan.planner import build_plan
from aigo_apply.plan.types import Plan

from helpers.planner_inputs import desired, observed, running


def _plans(tmp_path):
    d = desired(tmp_path)
    seen = observed(d, running(d)[:1], downloaded=False)  # alpha runs; beta and the router are to be made
    return build_plan(d, seen), (lambda request=None: build_plan(d, seen, None, request))


def test_the_unedited_plan_is_approved_and_the_fresh_one_is_what_runs(tmp_path):
    saved, again = _plans(tmp_path)
    loaded = Plan.from_dict(json.loads(json.dumps(saved.to_dict())))
    fresh = again()
    assert _approved(loaded, fresh) is fresh


EDITS = {
    "a mount of the host's root": lambda d: d["actions"][-2]["spec"].update(model_dir="/"),
    "another container name": lambda d: d["actions"][-2].update(container="victim"),
    "an added remove": lambda d: d["actions"].append(
        {"address": "container.victim", "kind": "remove", "reasons": ["x"], "changes": [], "container": "victim"}
    ),
    "a dropped action": lambda d: d["actions"].pop(),
    "another kind": lambda d: d["actions"][-1].update(kind="noop"),
    "a router line": lambda d: d["actions"][-1].setdefault("spec", {}).update(bind="0.0.0.0\nlisten evil"),
    "a download folder": lambda d: next(a for a in d["actions"] if a["kind"] == "download")["spec"].update(dest="/etc"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edited_action_is_refused_naming_what_differs(tmp_path, edit):
    saved, again = _plans(tmp_path)
    data = json.loads(json.dumps(saved.to_dict()))
    EDITS[edit](data)
    with pytest.raises(PlanFileError, match="the saved plan's actions are not the ones") as caught:
        _approved(Plan.from_dict(data), again())
    assert "differ:" in str(caught.value)


def test_the_options_a_plan_was_made_with_are_recorded_and_must_agree(tmp_path):
    saved, again = _plans(tmp_path)
    request = PlanRequest(target=frozenset({"beta"}))
    targeted = again(request)
    assert targeted.to_dict()["request"]["target"] == ["beta"]
    assert Plan.from_dict(targeted.to_dict()).request == request
    with pytest.raises(PlanFileError):  # approved for beta only: everything else is not approved
        _approved(Plan.from_dict(targeted.to_dict()), again())


def test_a_changed_machine_is_refused_first(tmp_path):
    saved, _ = _plans(tmp_path)
    d = desired(tmp_path)
    other = build_plan(d, observed(d, running(d), downloaded=False))
    with pytest.raises(PlanFileError, match="the machine changed since this plan was made"):
        _approved(saved, other)


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d.update(actions="not a list"),
        lambda d: d["actions"][0].update(spec="a string"),
        lambda d: d["actions"][0].pop("kind"),
        lambda d: d.update(request={"replace": "alpha"}),
        lambda d: d.update(request={"pull": "sometimes"}),
        lambda d: d.update(format_version=2),
        lambda d: d["actions"][0].update(changes=[1]),
    ],
)
def test_a_damaged_plan_file_is_a_clear_error(tmp_path, damage):
    saved, _ = _plans(tmp_path)
    data = json.loads(json.dumps(saved.to_dict()))
    damage(data)
    with pytest.raises(PlanFileError):
        Plan.from_dict(data)


def _leaves(value, path=()):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, path + (i,))
    else:
        yield path


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(pick=57, new=1)  # a `true` made `1`: equal in Python, another value in the file
@given(pick=st.integers(min_value=0), new=st.one_of(st.text(max_size=12), st.integers(), st.none(), st.booleans()))
def test_any_one_changed_value_is_approved_only_when_it_changes_no_action(tmp_path, pick, new):
    saved, again = _plans(tmp_path)
    data = json.loads(json.dumps(saved.to_dict()))
    leaves = list(_leaves(data["actions"]))
    path = leaves[pick % len(leaves)]
    target = data["actions"]
    for part in path[:-1]:
        target = target[part]
    changed = json.dumps(target[path[-1]]) != json.dumps(new)  # as the file says it: `true` is not `1`
    target[path[-1]] = new
    fresh = again()
    try:
        loaded = Plan.from_dict(data)
    except PlanFileError:
        return  # refused as damaged: fine
    try:
        result = _approved(loaded, fresh)
    except PlanFileError:
        assert changed  # only an actual change is refused
        return
    assert result is fresh  # whatever the file said, what runs is the plan made now
