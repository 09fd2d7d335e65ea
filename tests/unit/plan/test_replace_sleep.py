"""The "sleep" way of replacing a running model (plan/replace_strategy.py): chosen where the old engine
is vLLM on its socket started with sleep mode, the host's free memory holds its weights and the new
engine fits beside what a sleeping one keeps; asked for with `update: sleep` (which starts the engine
with sleep mode), refused with a reason where it cannot be, never chosen with `update: recreate`."""

from __future__ import annotations

import json

import pytest

from aigo_apply.observe.containers import parse_state
from aigo_apply.plan import gpu_ledger
from aigo_apply.plan.facts import PlanFacts
from aigo_apply.plan.plan_file import check_shape
from aigo_apply.plan.planner import build_plan
from aigo_apply.plan.replace_strategy import choose
from aigo_apply.plan.text import plan_text

from helpers.planner_inputs import IMAGES, desired, running

GIB = 1024**3
HEAD = 'version: 1\nproject: lab\nengines: {vllm: {image: local/engine, image_tag: "1"}}\nmodels:\n'


def model(fraction: float = 0.9, update: str = "sleep", gpus: str = "[0]", extra: str = "", path: str = "/m/a") -> str:
    return (
        f"  a:\n    source: {{path: {path}}}\n    context_length: 4096\n    gpus: {gpus}\n"
        f"    vllm: {{gpu_memory_utilization: {fraction}}}\n" + (f"    update: {update}\n" if update else "") + extra
    )


def rows(weights: int | None = 15 * GIB, total: int = 80 * GIB, free: int = 80 * GIB) -> tuple[dict, ...]:
    """One GPU's ledger row with model a's estimate (its weights, None: unknown)."""
    return (
        {
            "index": 0,
            "memory_total": total,
            "memory_free": free,
            "models": [{"alias": "a", "estimate": {"weights": weights}}],
        },
    )


def pick(tmp_path, old_text: str, new_text: str, ledger=None, host_free: int | None = 60 * GIB):
    old, new = desired(tmp_path, HEAD + old_text), desired(tmp_path, HEAD + new_text)
    ledger = rows() if ledger is None else ledger
    return choose("a", new, old.models["a"].spec, new.models["a"].update, ledger, host_free)


def test_a_sleeping_old_engine_is_chosen_with_its_weights_and_the_hosts_free_memory_in_the_reason(tmp_path):
    asked = pick(tmp_path, model(0.9), model(0.85))
    assert asked.name == "sleep"
    assert asked.why == (
        "models.a.update is sleep: the old engine sleeps (its 15.0 GiB of weights fit in the host's 60.0 GiB free "
        "memory), so a failed start wakes it in seconds"
    )
    # auto: parallel where both fit, else sleep, saying first why parallel does not fit
    assert pick(tmp_path, model(0.4), model(0.45, update="auto")).name == "parallel"
    auto = pick(tmp_path, model(0.9), model(0.85, update="auto"))
    assert auto.name == "sleep"
    assert auto.why.startswith("the new engine needs 0.85 of GPU 0 while the old holds 0.9; the old engine sleeps")
    # asked for, it is used even where both would fit
    assert pick(tmp_path, model(0.4), model(0.45)).name == "sleep"


@pytest.mark.parametrize(
    "old, new, ledger, host_free, why",
    [
        # the host's free memory does not hold the weights (with a tenth to spare), or is unknown
        (model(), model(0.85), None, 16 * GIB,
         "its 15.0 GiB of weights would not fit in host memory while it sleeps (the host has 16.0 GiB free"),
        (model(), model(0.85), None, None, "this host's free memory is unknown"),
        # the weights' size is unknown: no model files were read, or the old engine serves another checkpoint
        (model(), model(0.85), rows(None), 60 * GIB, "the size of its weights is unknown"),
        (model(), model(0.85, path="/m/b"), None, 60 * GIB, "serves another checkpoint"),
        # not started with sleep mode: the new one will be, and the next replace can sleep it
        (model(update="auto"), model(0.85), None, 60 * GIB,
         "the running engine was started without sleep mode (with models.a.update: sleep the new one starts with it"),
        # vLLM's sleep mode needs a GPU
        (model(gpus="none"), model(gpus="none", extra="    env: {X: '1'}\n"), (), 60 * GIB,
         "it uses no GPU, and vLLM's sleep mode needs one"),
        # even asleep, the old engine keeps some of the GPU
        (model(0.5), model(0.99), rows(total=40 * GIB), 60 * GIB, "even beside a sleeping engine the new engine needs 0.99"),
    ],
)  # fmt: skip
def test_sleep_asked_for_but_not_possible_is_a_recreate_that_says_why(tmp_path, old, new, ledger, host_free, why):
    strategy = pick(tmp_path, old, new, ledger, host_free)
    assert strategy.name == "recreate" and strategy.why.startswith("models.a.update is sleep, but "), strategy
    assert why in strategy.why, strategy


def test_auto_without_sleep_says_why_only_where_the_old_engine_could_sleep(tmp_path):
    # the usual recreate: its reason as before, no word of sleep
    plain = pick(tmp_path, model(0.9, update="auto"), model(0.85, update="auto"))
    assert (plain.name, plain.why) == ("recreate", "the new engine needs 0.85 of GPU 0 while the old holds 0.9")
    short = pick(tmp_path, model(0.9), model(0.85, update="auto"), host_free=10 * GIB)
    assert short.name == "recreate" and "while the old holds 0.9, and its 15.0 GiB of weights would not" in short.why


def test_update_recreate_never_sleeps_and_an_engine_on_a_port_cannot(tmp_path):
    assert pick(tmp_path, model(0.9), model(0.85, update="recreate")).name == "recreate"
    on_port = pick(tmp_path, model(0.9, extra="    port: 9001\n"), model(0.85, extra="    port: 9001\n"))
    assert on_port.name == "recreate" and "127.0.0.1:9001" in on_port.why


def test_update_sleep_starts_the_engine_with_sleep_mode_and_changing_to_it_replaces_the_engine(tmp_path):
    sleeps = desired(tmp_path, HEAD + model())
    spec, container = sleeps.models["a"].spec, sleeps.models["a"].container
    assert spec["sleep_mode"] is True
    assert "--enable-sleep-mode" in container.command and dict(container.env).get("VLLM_SERVER_DEV_MODE") == "1"
    for other in (model(update="auto"), model(update="recreate"), model(gpus="none")):
        d = desired(tmp_path, HEAD + other)
        assert "sleep_mode" not in d.models["a"].spec
        assert "--enable-sleep-mode" not in d.models["a"].container.command
    before = desired(tmp_path, HEAD + model(update="auto"))
    plan = build_plan(sleeps, parse_state("lab", running(before), IMAGES, {}, {}))
    (action,) = [a for a in plan.actions if a.model == "a"]
    assert action.kind == "recreate" and [c.path for c in action.changes] == ["sleep_mode"]


def test_the_plan_shows_the_sleep_way_and_moves_the_new_engine_to_the_other_socket(tmp_path):
    d = desired(tmp_path, HEAD + model(0.9))
    after = desired(tmp_path, HEAD + model(0.85))
    seen = parse_state("lab", running(d), IMAGES, {}, {})
    nvml = {"available": True, "gpus": [{"index": 0, "memory_total": 80 * GIB, "memory_used": 0, "processes": []}]}
    ledger = tuple(gpu_ledger.build(after, nvml, {"a": {"weights": 15 * GIB}}, set()))  # as planning builds it
    plan = build_plan(after, seen, PlanFacts(gpu_ledger=ledger, host_memory_free=60 * GIB))
    (action,) = [a for a in plan.actions if a.model == "a"]
    assert (action.strategy.name, action.slot) == ("sleep", "b")
    assert "(how: sleep: models.a.update is sleep: the old engine sleeps (its 15.0 GiB" in plan_text(plan)
    data = json.loads(json.dumps(plan.to_dict()))
    check_shape(data)  # a saved plan with the sleep way reads back
    assert [a["strategy"]["name"] for a in data["actions"] if a.get("model") == "a"] == ["sleep"]
    # the free memory moves by the minute: what a saved plan approves is the way, not the figure in its words
    later = build_plan(after, seen, PlanFacts(gpu_ledger=ledger, host_memory_free=61 * GIB))
    assert later.actions_digest() == plan.actions_digest()
    assert build_plan(after, seen, PlanFacts(gpu_ledger=ledger, host_memory_free=1 * GIB)).actions_digest() != (
        plan.actions_digest()
    )
