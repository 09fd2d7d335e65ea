"""Labels read back from Docker are input. A container with this project's labels
that the tool could not have written is damaged: never ours, named with its bad label in the plan,
never a traceback, and nothing it says is used for a file or a Docker call."""

from __future__ import annotations

import json

import pytest

from aigo_apply.desired import labels as L
from aigo_apply.observe.containers import parse_state, running_engines
from aigo_apply.plan.planner import build_plan, destroy_plan

from helpers.planner_inputs import desired, observed, running

HASH = "sha256:" + "0" * 64


def forged(name="forged", role="engine", **labels):
    """A container with this project's labels, as `docker run --label ...` can make one."""
    base = {
        L.MANAGED_BY: L.MANAGER,
        L.PROJECT: "lab",
        L.ROLE: role,
        L.SPEC: "{}",
        L.SPEC_HASH: HASH,
        L.LABELS_VERSION: "1",
    }
    if role == "engine":
        base.update({L.MODEL: "alpha", L.ENGINE: "vllm"})
    base.update(labels)
    return {
        "Id": f"id-{name}",
        "Names": [f"/{name}"],
        "State": "running",
        "Status": "Up",
        "Image": "aigo-test-idle:1",
        "Labels": {k: v for k, v in base.items() if v is not None},
    }


BAD = {
    "no role": ({L.ROLE: None}, f"label {L.ROLE} is missing"),
    "no version": ({L.LABELS_VERSION: None}, f"label {L.LABELS_VERSION} is missing"),
    "unknown role": ({L.ROLE: "backup"}, "neither 'engine' nor 'router'"),
    "future version": ({L.LABELS_VERSION: "9"}, f"label {L.LABELS_VERSION} is '9'"),
    "huge spec": ({L.SPEC: json.dumps({"x": "a" * 70000})}, f"label {L.SPEC} is longer than 65536"),
    "huge hash": ({L.SPEC_HASH: "x" * 70000}, f"label {L.SPEC_HASH} is longer"),
    "alias newline": ({L.MODEL: "alpha\nbackend x"}, "not a model alias"),
    "alias path": ({L.MODEL: "../../etc"}, "not a model alias"),
    "alias long": ({L.MODEL: "a" * 65}, "not a model alias"),
    "no alias": ({L.MODEL: None}, f"label {L.MODEL} is missing"),
    "engine unknown": ({L.ENGINE: "rm -rf"}, "not one of vllm"),
    "no engine": ({L.ENGINE: None}, "not one of vllm"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_container_with_bad_labels_is_damaged_not_ours(case):
    change, why = BAD[case]
    state = parse_state("lab", [forged(**change)], [])
    assert state.ours == () and [c.name for c in state.others] == ["forged"]
    assert len(state.damaged) == 1 and why in state.damaged[0] and "container forged" in state.damaged[0]
    assert "alpha\nbackend" not in state.damaged[0]  # shown escaped


@pytest.mark.parametrize(
    "spec", ["{oops", "[1]", "null", '{"a":' + "[" * 50 + "]" * 50 + "}", '{"a":' + "[" * 30000 + "]" * 30000 + "}"]
)
def test_a_spec_label_that_is_no_spec_reads_as_none_and_the_container_is_replaced(tmp_path, spec):
    d = desired(tmp_path)
    entries = running(d)
    entries[1]["Labels"][L.SPEC] = spec
    state = observed(d, entries)
    assert state.damaged == () and state.engines[0].spec is None
    alpha = next(a for a in build_plan(d, state).actions if a.address == "model.alpha")
    assert alpha.kind == "recreate" and "no readable spec label" in alpha.reasons[0]


def test_a_router_label_on_another_name_or_with_a_folder_of_its_choice(tmp_path):
    spec = json.dumps({"config_dir": "/", "image": "evil", "port": "x"})
    state = parse_state("lab", [forged("evil", role="router", **{L.SPEC: spec})], [])
    assert state.router is None and "not aigo-lab-router" in state.damaged[0]
    without_dir = parse_state("lab", [forged("aigo-lab-router", role="router")], [])
    assert without_dir.router is not None  # a spec without config_dir is read, and never used for a path
    assert destroy_plan("lab", "f", without_dir).actions[0].container == "aigo-lab-router"


def test_plans_warn_about_damaged_containers_and_never_act_on_them(tmp_path):
    d = desired(tmp_path)
    entries = running(d) + [forged("aigo-lab-gamma", **{L.MODEL: "gamma", L.LABELS_VERSION: "x"})]
    plan = build_plan(d, observed(d, entries))
    assert {a.kind for a in plan.actions} == {"noop"}
    assert any("container aigo-lab-gamma carries project 'lab' labels" in w for w in plan.warnings)
    gone = destroy_plan("lab", "f", observed(d, entries))
    assert "aigo-lab-gamma" not in [a.container for a in gone.actions] and gone.warnings


def test_a_damaged_container_holding_our_names_is_a_conflict(tmp_path):
    d = desired(tmp_path)
    entries = running(d, router=False) + [forged("aigo-lab-router", role="router", **{L.LABELS_VERSION: "0"})]
    plan = build_plan(d, observed(d, entries))
    assert ("conflict.name", "router") in [(b.id, b.address) for b in plan.blockers]


def test_odd_types_from_the_api_never_raise():
    odd = [
        {"Id": 5, "Names": "x", "Labels": ["a"], "Ports": [{"PublicPort": "80"}, None, 3], "State": None},
        {"Id": "y", "Names": [None], "Labels": {L.MANAGED_BY: L.MANAGER, L.PROJECT: "lab", L.ROLE: 1}},
        "not a mapping",
    ]
    state = parse_state("lab", odd, [])  # type: ignore[list-item]
    assert state.ours == () and len(state.others) == 3
    assert running_engines("lab", odd) == {}  # type: ignore[arg-type]


def test_running_engines_count_only_well_labelled_containers(tmp_path):
    d = desired(tmp_path)
    entries = running(d, router=False) + [forged("x", **{L.MODEL: "bad alias"})]
    assert running_engines("lab", entries) == {"alpha": "id-alpha", "beta": "id-beta"}
