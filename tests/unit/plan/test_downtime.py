"""The downtime a plan predicts for each action that takes a model away, from the model's measured
starts on that image: said in its JSON (`expected_downtime_s`, null when not known), its text and
markdown, kept by a saved plan, and never part of what a saved plan approves."""

from __future__ import annotations

import json

import pytest

from aigo_apply.observe.start_log import StartRecord
from aigo_apply.plan.downtime import NOT_MEASURED, predict
from aigo_apply.plan.facts import PlanFacts, PlanRequest
from aigo_apply.plan.markdown import plan_markdown
from aigo_apply.plan.planner import build_plan
from aigo_apply.plan.text import plan_json, plan_text
from aigo_apply.plan.types import Downtime, Plan

from helpers.planner_inputs import CONFIG, desired, observed, running

IMAGE = "sha256:img"  # what local/engine:1 names in helpers.planner_inputs
SAME, OTHER = "sha256:" + "1" * 64, "sha256:" + "2" * 64  # two container definitions


def start(seconds, cache="cold", compile=None, image=IMAGE, spec=SAME, inspect=None) -> StartRecord:
    phases = {"inspect": inspect} if inspect is not None else {}
    phases |= {"compile": compile} if compile is not None else {}
    other = seconds - sum(phases.values())
    return StartRecord("2026-12-06T10:00:00Z", seconds, {**phases, "other": other}, cache, image, spec_hash=spec)


# -- the prediction -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("records", "seconds", "words"),
    [
        ((), None, NOT_MEASURED),
        ((start(40, image="sha256:old"),), None, "on another image, took 40.0 s"),
        # the same settings on the same image: its compiled graphs are in the cache volume
        ((start(42.9, "warm", 14), start(65.2, "cold", 19.6)), 42.9, "its last warm start took 42.9 s"),
        ((start(65.2, "cold", 19.6), start(42.9, "warm", 14)), 42.9, "its last warm start took 42.9 s"),
        # only a cold one: less its inspection, which the cache serves; its compile counted whole
        (
            (start(65.2, "cold", 19.6, inspect=10.0),),
            55.2,
            "its last start took 65.2 s cold; the cache volume saves the 10.0 s it spent inspecting the model; a "
            "warm start is shorter by what the cache saves of its compile",
        ),
        ((start(65.2, "cold", 19.6),), 65.2, "its last start took 65.2 s cold; a warm start is shorter"),
        # ... and of its compile the cold-minus-warm difference a warm start on this image timed
        (
            (start(65.2, "cold", 19.6, inspect=10.0), start(40.0, "warm", 14.0, spec=OTHER)),
            49.6,
            "saves the 10.0 s it spent inspecting the model and 5.6 s of its compile",
        ),
        # new settings compile anew: the last cold start is the figure, less its inspection
        ((start(42.9, "warm", 14, spec=OTHER), start(65.2, "cold", 19.6, spec=OTHER, inspect=10.0)), 55.2, "anew"),
        ((start(42.9, "warm", 14, spec=OTHER),), 42.9, "at least: its last start took 42.9 s warm"),
        # an engine that compiles nothing: its last start on the image, less its inspection
        ((start(27.4, None, inspect=6.0), start(30.0, None, spec=OTHER)), 21.4, "the 6.0 s it spent inspecting"),
        ((start(21.0, None, inspect=0.0), start(27.4, None, inspect=6.0)), 21.0, "its last start took 21.0 s"),
        ((start(30.0, None, spec=OTHER),), 30.0, "its last start took 30.0 s, with other settings"),
    ],
    ids=lambda v: repr(v)[:40],
)
def test_the_prediction_from_the_models_starts(records, seconds, words):
    got = predict(records, IMAGE, SAME)
    assert got.seconds == seconds and words in got.why, got


def test_an_image_not_on_this_machine_yet_is_not_known():
    assert predict((start(40),), "", SAME).seconds is None


# -- in the plan ----------------------------------------------------------------------------------


def facts(d, *records: StartRecord, alias="alpha") -> PlanFacts:
    spec = d.models[alias].container.definition_hash()
    return PlanFacts(starts={alias: tuple(StartRecord(**{**r.__dict__, "spec_hash": spec}) for r in records)})


def action(plan, address="model.alpha"):
    return next(a for a in plan.actions if a.address == address)


def updated(how: str) -> str:
    return CONFIG.replace("    gpus: none\n  beta", f"    gpus: none\n    update: {how}\n  beta")


def test_a_recreate_that_stops_the_old_engine_first_says_how_long_the_model_is_away(tmp_path):
    d = desired(tmp_path, updated("recreate"))
    plan = build_plan(d, observed(d), facts(d, start(41.3, "warm", 2.0)), PlanRequest(frozenset({"alpha"})))
    alpha = action(plan)
    assert alpha.kind == "recreate" and alpha.downtime == Downtime(41.3, "its last warm start took 41.3 s")
    data = json.loads(plan_json(plan))["actions"]
    (entry,) = [a for a in data if a["address"] == "model.alpha"]
    assert entry["expected_downtime_s"] == 41.3 and entry["downtime"] == "its last warm start took 41.3 s"
    assert "(downtime about 41 s: its last warm start took 41.3 s)" in plan_text(plan)
    assert "downtime about 41 s&#58; its last warm start took 41.3 s" in plan_markdown(plan)


def test_a_parallel_replace_takes_the_model_away_for_none_of_it(tmp_path):
    d = desired(tmp_path, updated("parallel"))
    plan = build_plan(d, observed(d), facts(d, start(41.3, "warm")), PlanRequest(frozenset({"alpha"})))
    alpha = action(plan)
    assert alpha.strategy is not None and alpha.strategy.name == "parallel"
    assert alpha.downtime is not None and alpha.downtime.seconds == 0 and "parallel" in alpha.downtime.why
    assert json.loads(plan_json(plan))["actions"][0]["expected_downtime_s"] == 0


def test_a_start_of_a_stopped_engine_says_when_it_serves_again_and_an_unpause_takes_none(tmp_path):
    d = desired(tmp_path)
    entries = running(d, alpha={"State": "exited"}, beta={"State": "paused"})
    plan = build_plan(d, observed(d, entries), facts(d, start(27.4, None)))
    assert action(plan).kind == "start" and action(plan).downtime == Downtime(27.4, "its last start took 27.4 s")
    beta = action(plan, "model.beta")
    assert beta.kind == "start" and beta.downtime is not None and beta.downtime.seconds == 0


def test_not_measured_is_null_in_the_json_and_said_in_the_text(tmp_path):
    d = desired(tmp_path, updated("recreate"))
    plan = build_plan(d, observed(d), None, PlanRequest(frozenset({"alpha"})))
    entry = next(a for a in json.loads(plan_json(plan))["actions"] if a["address"] == "model.alpha")
    assert "expected_downtime_s" in entry and entry["expected_downtime_s"] is None
    assert f"(downtime {NOT_MEASURED})" in plan_text(plan)


def test_actions_that_take_no_model_away_carry_no_prediction(tmp_path):
    d = desired(tmp_path)
    empty = build_plan(d, observed(d, []), facts(d, start(27.4, None)))  # creates: nothing served before
    same = build_plan(d, observed(d), facts(d, start(27.4, None)))  # no-ops
    for plan in (empty, same):
        for a in plan.actions:
            assert a.downtime is None and "expected_downtime_s" not in a.to_dict(), a


def test_another_image_than_the_measured_starts_is_not_known(tmp_path):
    d = desired(tmp_path, updated("recreate"))
    moved = [{"Id": "sha256:new", "RepoTags": ["local/engine:1"]}, {"Id": IMAGE, "RepoTags": ["haproxy:3.2"]}]
    plan = build_plan(d, observed(d, images=moved), facts(d, start(41.3, "warm")))
    alpha = action(plan)
    assert alpha.kind == "recreate" and alpha.downtime is not None and alpha.downtime.seconds is None


# -- saved plans ----------------------------------------------------------------------------------


def test_a_saved_plan_keeps_the_prediction_and_approves_the_actions_whatever_it_predicted(tmp_path):
    d = desired(tmp_path, updated("recreate"))
    request = PlanRequest(frozenset({"alpha"}))
    measured = build_plan(d, observed(d), facts(d, start(41.3, "warm")), request)
    unknown = build_plan(d, observed(d), None, request)
    again = Plan.from_dict(json.loads(plan_json(measured)))
    assert action(again).downtime == action(measured).downtime
    assert plan_text(again) == plan_text(measured)
    # a prediction is not an instruction: a start measured since changes no approval
    assert measured.actions_digest() == unknown.actions_digest() == again.actions_digest()
    changed = build_plan(desired(tmp_path, updated("recreate").replace("4096", "2048")), observed(d), None, request)
    assert changed.actions_digest() != measured.actions_digest()


@pytest.mark.parametrize(
    "edit",
    [{"expected_downtime_s": -1}, {"expected_downtime_s": "41"}, {"expected_downtime_s": 1e12}, {"downtime": 41}],
    ids=repr,
)
def test_a_saved_plan_with_a_prediction_this_version_never_writes_is_refused(tmp_path, edit):
    from aigo_apply.errors import PlanFileError

    d = desired(tmp_path, updated("recreate"))
    data = json.loads(
        plan_json(build_plan(d, observed(d), facts(d, start(41.3, "warm")), PlanRequest(frozenset({"alpha"}))))
    )
    next(a for a in data["actions"] if a["address"] == "model.alpha").update(edit)
    with pytest.raises(PlanFileError, match="model.alpha|actions"):
        Plan.from_dict(data)
