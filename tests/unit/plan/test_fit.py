"""Where a new model fits (plan/fit.py), on recorded GPU facts: the longest context the model takes
on as few GPUs as it needs, else the longest shorter one that fits; the fraction the GPU has left
beside the file's models (the default share on a GPU without any); a slot in a swap group already on
the GPU; and no placement, with why, when none fits. Every placement is held to the planner's own
ledger: the file with the new model, ledgered on the same facts, has no warning or blocker."""

from __future__ import annotations

from pathlib import Path

import pytest

from aigo_apply.desired.build import build_desired
from aigo_apply.observe.config_file import load_config
from aigo_apply.plan import gpu_ledger
from aigo_apply.plan.fit import MIN_CONTEXT, Fit, context_limit, contexts, fit
from aigo_apply.plan.vram import GIB, estimate

from helpers.configs import host_context, write_config

HEAD = 'version: 1\nproject: lab\nengines: {vllm: {image: local/engine, image_tag: "1"}}\nmodels:\n'
# An 8B model like Qwen3-8B: 36 layers, 8 KV heads of 128: 144 KiB of KV cache per token in bfloat16.
CONFIG = {
    "model_type": "qwen3",
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "hidden_size": 4096,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
}
WEIGHTS = 16 * GIB


def gpu(index: int, total_gib: float, used_gib: float = 0.5, name: str = "NVIDIA RTX 6000 Ada") -> dict:
    return {
        "index": index,
        "name": name,
        "memory_total": int(total_gib * GIB),
        "memory_used": int(used_gib * GIB),
        "processes": [],
    }


def nvml(*gpus: dict) -> dict:
    return {"available": True, "gpus": list(gpus)}


def model(alias: str, gpus: str = "[0]", fraction: float | None = None, extra: str = "") -> str:
    vllm = f"    vllm: {{gpu_memory_utilization: {fraction}}}\n" if fraction is not None else ""
    return f"  {alias}:\n    source: {{path: /m/{alias}}}\n    context_length: 4096\n    gpus: {gpus}\n{extra}{vllm}"


def _desired(tmp_path: Path, body: str, name: str = "aigo.yaml"):
    path = write_config(tmp_path, HEAD + body if body else HEAD.rstrip("\n") + " {}\n", name)
    return build_desired(load_config(str(path)), host_context(Path("/store")))


def _rows(desired, facts: dict) -> list[dict]:
    return gpu_ledger.build(desired, facts, {}, set())


def _entry(placed: Fit) -> str:
    lines = ["  new:\n", "    source: {path: /m/new}\n", f"    context_length: {placed.context_length}\n"]
    if placed.gpus is not None:
        lines.append(f"    gpus: {placed.gpus}\n")
    if placed.swap_group:
        lines.append(f"    swap_group: {placed.swap_group}\n")
    settings = {"gpu_memory_utilization": placed.fraction, "tensor_parallel_size": placed.tensor_parallel_size}
    lines.append("    vllm: {" + ", ".join(f"{k}: {v}" for k, v in settings.items() if v is not None) + "}\n")
    return "".join(lines)


def _proposed(tmp_path: Path, body: str, facts: dict, config=CONFIG, weights=WEIGHTS) -> Fit:
    desired = _desired(tmp_path, body)
    return fit(_rows(desired, facts), desired, config, weights, context_limit(config))


def assert_the_plan_finds_it_ok(tmp_path: Path, body: str, facts: dict, placed: Fit, config=CONFIG, weights=WEIGHTS):
    """The file with the new model, ledgered as `plan` does on the same facts: every verdict "ok"."""
    assert placed.placed, placed.notes
    desired = _desired(tmp_path, body + _entry(placed), "with-new.yaml")
    files = {alias: {"config": CONFIG, "weights": 2 * GIB} for alias in desired.models}  # the file's own fit
    rows = gpu_ledger.build(desired, facts, {**files, "new": {"config": config, "weights": weights}}, set())
    checks = gpu_ledger.checks(rows)
    assert checks and all(c.status == "ok" for c in checks), [(c.status, c.message) for c in checks]
    assert any("model new" in c.message for c in checks)


def test_on_an_empty_gpu_the_model_gets_its_whole_context_and_the_default_share(tmp_path):
    facts = nvml(gpu(0, 48))
    placed = _proposed(tmp_path, "", facts)
    assert (placed.gpus, placed.context_length, placed.fraction, placed.tensor_parallel_size) == ([0], 131072, 0.9, 1)
    assert "the longest the model takes" in placed.why["context_length"]
    assert "the default share of a GPU with no other model" in placed.why["vllm.gpu_memory_utilization"]
    assert "it holds no other model of this file" in placed.why["gpus"]
    assert_the_plan_finds_it_ok(tmp_path, "", facts, placed)


def test_beside_the_file_s_models_it_takes_what_they_leave(tmp_path):
    body = model("chat", fraction=0.3)
    facts = nvml(gpu(0, 80, used_gib=0))
    placed = _proposed(tmp_path, body, facts)
    assert placed.fraction == 0.7 and placed.context_length == 131072  # 1.0 - 0.3: memory is not the bound
    assert "what chat leaves of GPU 0" in placed.why["vllm.gpu_memory_utilization"]
    assert_the_plan_finds_it_ok(tmp_path, body, facts, placed)


def test_memory_held_by_other_programs_bounds_the_share(tmp_path):
    body = model("chat", fraction=0.3)
    facts = nvml(gpu(0, 80, used_gib=30))  # a desktop and a notebook hold 30 GiB
    placed = _proposed(tmp_path, body, facts)
    assert placed.fraction == pytest.approx(0.32)  # (80 - 30 - 24) / 80, rounded down
    assert_the_plan_finds_it_ok(tmp_path, body, facts, placed)


def test_when_the_longest_context_does_not_fit_the_longest_that_does_is_chosen(tmp_path):
    body = model("chat", fraction=0.4)
    facts = nvml(gpu(0, 48))
    placed = _proposed(tmp_path, body, facts)
    assert placed.context_length < 131072 and placed.gpus == [0]
    budget = int(placed.fraction * 48 * GIB)
    assert estimate(CONFIG, WEIGHTS, placed.context_length).total <= 0.9 * budget
    longer = [c for c in contexts(131072) if c > placed.context_length]
    assert longer and estimate(CONFIG, WEIGHTS, min(longer)).total > 0.9 * budget  # the next one up does not fit
    assert "the longest that fits GPU 0: the model takes 131072 tokens" in placed.why["context_length"]
    assert_the_plan_finds_it_ok(tmp_path, body, facts, placed)


def test_a_model_one_gpu_cannot_hold_is_split_over_more(tmp_path):
    facts = nvml(gpu(0, 40), gpu(1, 40))
    placed = _proposed(tmp_path, "", facts, weights=56 * GIB)
    assert (placed.gpus, placed.tensor_parallel_size) == ([0, 1], 2)
    assert "split over 2" in placed.why["vllm.tensor_parallel_size"]
    assert_the_plan_finds_it_ok(tmp_path, "", facts, placed, weights=56 * GIB)


def test_the_gpu_with_the_most_room_is_chosen(tmp_path):
    body = model("chat", gpus="[0]", fraction=0.6)
    facts = nvml(gpu(0, 48), gpu(1, 48))
    placed = _proposed(tmp_path, body, facts)
    assert placed.gpus == [1] and placed.fraction == 0.9
    assert_the_plan_finds_it_ok(tmp_path, body, facts, placed)


def test_a_model_that_fits_only_taking_turns_joins_the_swap_group_on_its_gpu(tmp_path):
    body = model("big", fraction=0.1) + model("a", fraction=0.75, extra="    swap_group: chat\n")
    body += model("b", fraction=0.6, extra="    swap_group: chat\n")
    facts = nvml(gpu(0, 48))
    placed = _proposed(tmp_path, body, facts)
    assert (placed.swap_group, placed.gpus, placed.fraction) == ("chat", [0], 0.75)  # the group's share stays
    assert "takes turns with a, b (1 awake at once)" in placed.why["swap_group"]
    assert_the_plan_finds_it_ok(tmp_path, body, facts, placed)


def test_a_model_that_fits_only_alone_is_not_placed_and_the_note_says_how_to_take_turns(tmp_path):
    body = model("chat", fraction=0.9)
    placed = _proposed(tmp_path, body, nvml(gpu(0, 48)))
    assert not placed.placed and placed.gpus is None
    (note,) = placed.notes
    assert note.startswith("it does not fit beside chat on GPU 0 (room left: 0.08 of it), and alone it would")
    assert "put those models in a swap group" in note


def test_a_model_too_big_for_every_gpu_is_not_placed(tmp_path):
    placed = _proposed(tmp_path, "", nvml(gpu(0, 24)), weights=70 * GIB)
    assert not placed.placed
    assert "use a smaller or quantized checkpoint" in placed.notes[0] and str(MIN_CONTEXT) in placed.notes[0]


def test_a_model_of_unknown_size_goes_where_the_room_is_and_says_nothing_checked_it(tmp_path):
    body = model("chat", fraction=0.5)
    placed = _proposed(tmp_path, body, nvml(gpu(0, 48)), weights=None)
    assert placed.placed and placed.gpus == [0] and placed.context_length == 131072 and placed.fraction == 0.48
    assert "nothing checks that it fits" in placed.why["context_length"]


def test_a_config_without_a_layer_count_is_of_unknown_size_too(tmp_path):
    config = {"model_type": "odd", "max_position_embeddings": 8192}
    placed = _proposed(tmp_path, "", nvml(gpu(0, 48)), config=config)
    assert placed.placed and placed.context_length == 8192 and placed.fraction == 0.9
    assert placed.notes == ("the model's size is unknown: config.json gives no layer count",)


def test_without_gpu_facts_the_fraction_is_what_the_file_leaves(tmp_path):
    body = model("chat", gpus="all", fraction=0.3) + model("other", gpus="[1]", fraction=0.5)
    desired = _desired(tmp_path, body)
    placed = fit([], desired, CONFIG, WEIGHTS, 131072)
    assert (placed.gpus, placed.fraction, placed.context_length) == (None, 0.2, 131072)  # 1 - (0.3 + 0.5)
    assert "not checked against GPU memory" in placed.why["context_length"]
    alone = fit([], _desired(tmp_path, ""), CONFIG, WEIGHTS, 131072)
    assert alone.fraction is None  # nothing to share with: the default


@pytest.mark.parametrize(
    "config,expected",
    [
        ({"max_position_embeddings": 40960, "seq_length": 32768}, 32768),
        ({"text_config": {"max_position_embeddings": 262144}}, 262144),
        ({"n_positions": 2048}, 2048),
        ({"max_position_embeddings": "131072"}, None),
        ({"max_position_embeddings": 10**30}, None),
        ({}, None),
        ([], None),
    ],
)
def test_the_longest_context_is_the_smallest_length_config_json_names(config, expected):
    assert context_limit(config) == expected
