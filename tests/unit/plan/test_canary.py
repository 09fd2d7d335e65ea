"""The canary gate's pure part (desired/canary.py, plan/canary.py, plan/canary_verdict.py): the
declared settings over the defaults, the plan saying for each replace whether its gate runs and why not, --require-canary's
blockers, the seeded request set, and the decision from both engines' figures."""

from __future__ import annotations

import json

import pytest

from aigo_apply.desired.canary import CanarySettings, canary_of
from aigo_apply.observe.containers import parse_state
from aigo_apply.plan.canary import gate_for
from aigo_apply.plan.canary_verdict import Measurement, Sample, decide, differences, prompts
from aigo_apply.plan.facts import PlanRequest
from aigo_apply.plan.lockfile import with_canaries
from aigo_apply.plan.planner import build_plan
from aigo_apply.plan.text import plan_text
from aigo_apply.plan.types import Plan

from helpers.planner_inputs import IMAGES, desired, running

HEAD = 'version: 1\nproject: lab\nengines: {vllm: {image: local/engine, image_tag: "1"}}\n'


def model(alias: str, gpus: str = "none", fraction: float = 0.45, extra: str = "") -> str:
    return (
        f"  {alias}:\n    source: {{path: /m/{alias}}}\n    context_length: 4096\n    gpus: {gpus}\n"
        f"    vllm: {{gpu_memory_utilization: {fraction}}}\n" + extra
    )


def test_the_models_gate_goes_over_the_defaults_key_by_key_and_false_turns_it_off():
    assert canary_of({}, {}) is None
    assert canary_of({"canary": {}}, {}) == CanarySettings()
    assert canary_of({}, {"canary": {"requests": 8}}) == CanarySettings(requests=8)
    merged = canary_of({"canary": {"max_slowdown": 0.2}}, {"canary": {"requests": 8, "max_slowdown": 0.05}})
    assert merged == CanarySettings(requests=8, max_slowdown=0.2)
    assert canary_of({"canary": False}, {"canary": {"requests": 8}}) is None
    assert canary_of({"canary": {}}, {"canary": False}) == CanarySettings()


def test_a_gate_recreates_nothing_and_the_plan_says_whether_it_runs_and_why_not(tmp_path):
    before = desired(tmp_path, HEAD + "models:\n" + model("a") + model("b", "[0]", 0.9))
    gated = HEAD + "defaults: {canary: {requests: 8}}\nmodels:\n"
    same = desired(tmp_path, gated + model("a") + model("b", "[0]", 0.9))
    assert [m.spec for m in same.models.values()] == [m.spec for m in before.models.values()]
    observed = parse_state("lab", running(before), IMAGES, {}, {})
    assert {a.kind for a in build_plan(same, observed).actions if a.model} == {"noop"}
    changed = desired(tmp_path, gated + model("a", extra="    env: {X: '1'}\n") + model("b", "[0]", 0.85))
    plan = build_plan(changed, observed)
    by_model = {a.model: a for a in plan.actions if a.model}
    assert by_model["a"].canary.runs and by_model["a"].canary.settings.requests == 8
    assert (
        not by_model["b"].canary.runs
        and "this replace recreates (the new engine needs 0.85" in by_model["b"].canary.why
    )
    text = plan_text(plan)
    assert (
        "(canary: max_slowdown 0.1, 8 requests per engine (4 at a time), 256 prompt and 64 output tokens each)" in text
    )
    assert (
        "(canary does not run: it needs the old engine serving beside the new one, and this replace recreates" in text
    )
    saved = json.loads(json.dumps(plan.to_dict()))
    assert saved["actions"][[a.get("model") for a in saved["actions"]].index("a")]["canary"]["runs"] is True
    assert Plan.from_dict(saved).actions == plan.actions  # a saved plan carries its gates


def test_skip_canary_plans_every_gate_as_skipped_and_require_canary_blocks_an_ungated_replace(tmp_path):
    before = desired(tmp_path, HEAD + "models:\n" + model("a") + model("b", "[0]", 0.9) + model("c"))
    observed = parse_state("lab", running(before), IMAGES, {}, {})
    after = desired(
        tmp_path,
        HEAD
        + "models:\n"
        + model("a", extra="    env: {X: '1'}\n    canary: {}\n")
        + model("b", "[0]", 0.85, extra="    canary: {}\n")
        + model("c", extra="    env: {X: '1'}\n"),
    )
    skipped = build_plan(after, observed, request=PlanRequest(skip_canary=True))
    gates = {a.model: a.canary for a in skipped.actions if a.model}
    assert not gates["a"].runs and gates["a"].why == "apply --skip-canary moves the route without measuring"
    assert gates["c"] is None and not skipped.blockers
    required = build_plan(after, observed, request=PlanRequest(require_canary=True))
    assert {(b.id, b.address) for b in required.blockers} == {
        ("canary.required", "model.b"),
        ("canary.required", "model.c"),
    }
    messages = {b.address: b.message for b in required.blockers}
    assert (
        "model 'c' would be replaced untested (--require-canary): models.c declares no canary gate"
        in messages["model.c"]
    )
    assert "its canary does not run: it needs the old engine serving beside the new one" in messages["model.b"]
    with pytest.raises(ValueError, match="contradict"):
        PlanRequest(skip_canary=True, require_canary=True)
    assert PlanRequest.from_dict(PlanRequest(require_canary=True).to_dict()).require_canary


def test_a_gate_does_not_run_when_the_old_engine_is_not_serving():
    gate = gate_for(CanarySettings(), "parallel", "no GPU", skip=False, serving=False)
    assert gate is not None and not gate.runs and "not running" in gate.why
    assert gate_for(None, "parallel", "", skip=False) is None


def test_the_request_set_is_the_same_for_the_same_seed_and_drawn_from_the_vocabulary():
    vocab = [5, 9, 17, 230, 4000]
    one = prompts(vocab, 6, 12, seed=3)
    assert one == prompts(vocab, 6, 12, seed=3) and one != prompts(vocab, 6, 12, seed=4)
    assert len(one) == 6 and all(len(p) == 12 and set(p) <= set(vocab) for p in one)
    assert len({tuple(p) for p in one}) == 6
    with pytest.raises(ValueError):
        prompts([], 1, 1, 0)


def run(engine: str, tokens: int, seconds: float, errors: int = 0, ttfts=(0.1, 0.2, 0.3)) -> Measurement:
    samples = [Sample(True, 1.0, ttft=t, tokens=tokens) for t in ttfts]
    samples += [Sample(False, 1.0, error="HTTP 500: boom") for _ in range(errors)]
    return Measurement(engine, samples, seconds)


def test_the_route_moves_only_within_max_slowdown_and_without_errors():
    old = run("old", 100, 1.0)  # 300 tokens/s
    assert old.tokens_per_second == 300 and old.ttft(0.5) == 0.2 and old.ttft(0.95) == 0.3
    within = decide(old, run("new", 100, 1.1), 0.10)  # 9% slower
    assert within.passed and "9% slower" in within.reason
    faster = decide(old, run("new", 100, 0.5), 0.10)
    assert faster.passed and "100% faster" in faster.reason and faster.slowdown == pytest.approx(-1.0)
    slower = decide(old, run("new", 100, 1.25), 0.10)  # 20% slower
    assert not slower.passed and "240.0 output tokens/s against the old one's 300.0: 20% slower" in slower.reason
    failing = decide(old, run("new", 100, 0.5, errors=1), 0.10)
    assert not failing.passed and "failed 1 of 4 requests (HTTP 500: boom)" in failing.reason
    nothing = decide(run("old", 0, 1.0), run("new", 100, 1.0), 0.1)
    assert not nothing.passed and "no tokens to compare" in nothing.reason


def test_output_differences_name_the_prompts_that_differ():
    found = differences(["a", "b", "c"], ["a", "x", "c"])
    assert [(d.prompt, d.old, d.new) for d in found] == [(1, "b", "x")]


def test_the_lock_keeps_each_models_last_passed_gate_beside_its_image(tmp_path):
    state = desired(tmp_path, HEAD + "models:\n" + model("a") + model("b"))
    data = {"version": 1, "project": "lab", "images": {"local/engine:1": {"id": "sha256:" + "1" * 64}}, "models": {}}
    result = {
        "model": "a",
        "passed": True,
        "measured_at": "2026-12-02T07:00:00+00:00",
        "settings": {},
        "old": {},
        "new": {"output_tokens_per_second": 9.0},
        "slowdown": 0.01,
    }
    earlier = {"b": {"image": "local/engine:1"}, "gone": {"image": "x"}}
    out = with_canaries(data, state, (result, {**result, "model": "b", "passed": False}), earlier)
    assert set(out["canary"]) == {"a", "b"}  # b's refused run does not replace its last record; gone's goes
    assert out["canary"]["a"]["image"] == "local/engine:1" and out["canary"]["a"]["image_id"] == "sha256:" + "1" * 64
    assert out["canary"]["b"] == {"image": "local/engine:1"}
    stale = with_canaries(data, state, (), {"b": {"image": "local/engine:0"}})  # b runs another image now
    assert "canary" not in stale
    assert with_canaries(data, state, (), {}) == data  # no gate ever ran: no canary section


def test_errors_on_the_old_engine_or_on_both_never_let_the_new_one_in():
    old_failing = decide(run("old", 100, 1.0, errors=2), run("new", 100, 2.0), 0.1)
    assert not old_failing.passed and "the old engine failed 2 of 5 requests" in old_failing.reason
    assert "--skip-canary" in old_failing.reason
    both = decide(run("old", 100, 1.0, errors=1), run("new", 100, 1.0, errors=1), 0.1)
    assert not both.passed and "failed on both engines" in both.reason


def test_a_gate_whose_requests_do_not_fit_the_context_does_not_run(tmp_path):
    gate = gate_for(CanarySettings(prompt_tokens=4000, max_tokens=200), "parallel", "", False, True, 4096)
    assert gate is not None and not gate.runs and "4200 tokens" in gate.why and "context_length 4096" in gate.why
    before = desired(tmp_path, HEAD + "models:\n" + model("a"))
    observed = parse_state("lab", running(before), IMAGES, {}, {})
    stopped = parse_state("lab", running(before, state="exited", status="Exited (1)"), IMAGES, {}, {})
    after = desired(tmp_path, HEAD + "models:\n" + model("a", extra="    env: {X: '1'}\n    canary: {}\n"))
    assert build_plan(after, observed, request=PlanRequest(require_canary=True)).blockers == ()
    crashed = build_plan(after, stopped, request=PlanRequest(require_canary=True))
    assert crashed.blockers == ()  # a stopped engine is repaired: nothing runs to be replaced untested
