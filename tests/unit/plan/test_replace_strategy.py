"""How a running model is replaced (plan/replace_strategy.py): chosen from the memory fractions of the
old and the new engine and of the other models on their GPUs, and the free memory NVML reports; shown
in the plan's text and JSON. `update:` never recreates anything itself."""

from __future__ import annotations

import json

import pytest

from aigo_apply.observe.containers import parse_state
from aigo_apply.plan.facts import PlanFacts
from aigo_apply.plan.planner import build_plan
from aigo_apply.plan.replace_strategy import choose
from aigo_apply.plan.text import plan_text

from helpers.planner_inputs import IMAGES, desired, running

GIB = 1024**3
HEAD = (
    'version: 1\nproject: lab\nengines: {vllm: {image: local/engine, image_tag: "1"}, "llama.cpp": {image_tag: x}}\n'
    "models:\n"
)


def model(alias: str, gpus: str = "[0]", fraction: float = 0.45, extra: str = "", engine: str = "") -> str:
    settings = f"    vllm: {{gpu_memory_utilization: {fraction}}}\n" if not engine else ""
    source = f"/m/{alias}.gguf" if engine == "llama.cpp" else f"/m/{alias}"
    return (
        f"  {alias}:\n    source: {{path: {source}}}\n    context_length: 4096\n    gpus: {gpus}\n"
        + (f"    engine: {engine}\n" if engine else "")
        + settings
        + extra
    )


def ledger(*gpus: tuple[int, int]) -> tuple[dict, ...]:
    """Ledger rows: (total, free) bytes per GPU."""
    return tuple({"index": i, "memory_total": total, "memory_free": free} for i, (total, free) in enumerate(gpus))


def pick(tmp_path, old_text: str, new_text: str, alias: str = "a", rows=(), update: str | None = None):
    old, new = desired(tmp_path, HEAD + old_text), desired(tmp_path, HEAD + new_text)
    model = new.models[alias]
    return choose(alias, new, old.models[alias].spec, update or model.update, rows)


@pytest.mark.parametrize(
    "old, new, rows, expected",
    [
        # no GPU: always side by side
        (model("a", "none"), model("a", "none", extra="    env: {X: '1'}\n"), (), ("parallel", "no GPU: the old")),
        # two halves of one GPU fit
        (model("a"), model("a", fraction=0.44), (), ("parallel", "0.44 + 0.45 of GPU 0 fit")),
        # the whole GPU, twice, does not
        (model("a", fraction=0.9), model("a", fraction=0.85), (), ("recreate", "the new engine needs 0.85 of GPU 0 while the old holds 0.9")),
        # another model on the GPU counts
        (model("a") + model("b", fraction=0.2), model("a", fraction=0.4) + model("b", fraction=0.2), (),
         ("recreate", "needs 0.4 of GPU 0 while the old holds 0.45 and the other models 0.2")),
        (model("a", fraction=0.3) + model("b", fraction=0.2), model("a", fraction=0.35) + model("b", fraction=0.2), (),
         ("parallel", "0.35 + 0.3 + 0.2 of the other models of GPU 0 fit")),
        # moving to another GPU: the old holds nothing there
        (model("a", "[0]", 0.9), model("a", "[1]", 0.9), (), ("parallel", "0.9 + 0 of GPU 1 fit")),
        # fractions fit but NVML says another process holds the memory
        (model("a", fraction=0.4), model("a", fraction=0.41), ledger((80 * GIB, 50 * GIB)),
         ("recreate", "take 64.8 GiB, but 50.0 GiB is free")),
        (model("a", fraction=0.4), model("a", fraction=0.41), ledger((80 * GIB, 79 * GIB)), ("parallel", "fit")),
        # gpus: all, with two GPUs known, and unknown
        (model("a", "all", 0.5), model("a", "all", 0.45), ledger((80 * GIB, 80 * GIB), (80 * GIB, 80 * GIB)),
         ("parallel", "0.45 + 0.5 of GPU 0")),
        (model("a", "all", 0.6), model("a", "all", 0.5), (), ("recreate", "needs 0.5 of the GPUs while the old holds 0.6")),
        # llama.cpp declares no fraction
        (model("a", engine="llama.cpp"), model("a", engine="llama.cpp", extra="    env: {X: '1'}\n"), (),
         ("recreate", "which one container can hold at a time")),
        # an on-demand model keeps its group's rules
        (model("a", extra="    on_demand: true\n"), model("a", fraction=0.4, extra="    on_demand: true\n"), (),
         ("recreate", "keeps its swap group's rules")),
    ],
)  # fmt: skip
def test_auto_is_parallel_exactly_when_both_fit(tmp_path, old, new, rows, expected):
    strategy = pick(tmp_path, old, new, rows=rows)
    assert (strategy.name, expected[1] in strategy.why) == (expected[0], True), strategy


def test_the_file_may_ask_for_either_and_is_told_what_it_risks(tmp_path):
    whole = model("a", fraction=0.9)
    forced = pick(tmp_path, whole, whole, update="parallel")
    assert forced.name == "parallel" and "may fail to start, and the old one keeps serving" in forced.why
    assert pick(tmp_path, model("a", "none"), model("a", "none"), update="recreate").name == "recreate"


def test_update_is_read_from_the_model_or_the_defaults_and_recreates_nothing(tmp_path):
    base = desired(tmp_path, HEAD + model("a"))
    own = desired(tmp_path, HEAD + model("a", extra="    update: recreate\n"))
    inherited = desired(tmp_path, HEAD.replace("models:\n", "defaults: {update: parallel}\nmodels:\n") + model("a"))
    assert (base.models["a"].update, own.models["a"].update, inherited.models["a"].update) == (
        "auto",
        "recreate",
        "parallel",
    )
    assert own.models["a"].spec == base.models["a"].spec  # not part of the spec: changing it replaces nothing
    plan = build_plan(own, parse_state("lab", running(base), IMAGES, {}, {}))
    assert [a.kind for a in plan.actions if a.model == "a"] == ["noop"]


def test_the_plan_says_how_each_recreate_happens(tmp_path):
    before = desired(tmp_path, HEAD + model("a", fraction=0.9) + model("b", "none"))
    after = desired(tmp_path, HEAD + model("a", fraction=0.8) + model("b", "none", extra="    env: {X: '1'}\n"))
    plan = build_plan(after, parse_state("lab", running(before), IMAGES, {}, {}), PlanFacts())
    by_model = {a.model: a for a in plan.actions if a.model}
    assert by_model["a"].strategy.name == "recreate" and by_model["b"].strategy.name == "parallel"
    text = plan_text(plan)
    assert "(how: recreate: the new engine needs 0.8 of GPU 0 while the old holds 0.9)" in text
    assert "(how: parallel: no GPU: the old and the new engine run side by side)" in text
    actions = {a["model"]: a for a in json.loads(json.dumps(plan.to_dict()))["actions"] if a.get("model")}
    assert actions["a"]["strategy"] == {
        "name": "recreate",
        "why": "the new engine needs 0.8 of GPU 0 while the old holds 0.9",
    }
    assert "strategy" not in [a for a in plan.to_dict()["actions"] if a["address"] == "router"][0]
