"""Plans with LoRA adapters: adding, removing or changing one replaces the engine (vLLM loads adapters
only at start), each with a reason naming the adapter; the router routes each adapter alias; the GPU
ledger adds the adapters' buffers as an estimate, figured here by hand; a folder vLLM cannot load
blocks the plan, and an adapter trained on another base is a warning."""

from __future__ import annotations

import json
from pathlib import Path

from aigo_apply.desired.build import build_desired
from aigo_apply.desired.types import AdapterFiles
from aigo_apply.observe.config_file import load_config
from aigo_apply.plan import gpu_ledger
from aigo_apply.plan.adapter_checks import adapter_checks
from aigo_apply.plan.planner import build_plan
from aigo_apply.plan.vram import lora_bytes

from helpers.configs import host_context, write_config
from helpers.paths import FIXTURES
from helpers.planner_inputs import observed

HEAD = """
version: 1
project: lab
engines: {vllm: {image: local/engine, image_tag: "1"}}
models:
  base:
    source: {repo: org/base, revision: v1}
    context_length: 4096
    gpus: [0]
"""
SQL = "      sql: {source: {repo: org/sql-lora, revision: r1}}\n"
CHAT = "      chat: {source: {repo: org/chat-lora, revision: r1}}\n"
FILES = {
    "/store/adapters/org--sql-lora/r1": AdapterFiles(8, ("q_proj", "v_proj"), "org/base"),
    "/store/adapters/org--sql-lora/r2": AdapterFiles(8, ("q_proj", "v_proj"), "org/base"),
    "/store/adapters/org--chat-lora/r1": AdapterFiles(16, ("o_proj",), "org/base"),
}


def desired(tmp_path, adapters="", files=FILES, extra=""):
    text = HEAD + extra + ("    adapters:\n" + adapters if adapters else "")
    return build_desired(load_config(str(write_config(tmp_path, text))), host_context(Path("/store")), files)


def action(plan, address="model.base"):
    return next(a for a in plan.actions if a.address == address)


def test_an_unchanged_file_with_adapters_plans_no_change(tmp_path):
    d = desired(tmp_path, SQL + CHAT)
    plan = build_plan(desired(tmp_path, SQL + CHAT), observed(d))
    assert {a.kind for a in plan.actions} == {"noop"}


def test_an_added_adapter_replaces_the_engine_and_names_it(tmp_path):
    before = observed(desired(tmp_path, SQL))
    plan = build_plan(desired(tmp_path, SQL + CHAT), before)
    base = action(plan)
    assert base.kind == "recreate"
    assert base.reasons == (
        "vllm.max_lora_rank changed",
        "vllm.max_loras changed",
        "adapter 'chat' added (org/chat-lora@r1); vLLM loads adapters only at start",
    )
    assert [c.path for c in base.changes] == ["adapters.chat", "vllm.max_lora_rank", "vllm.max_loras"]
    assert "route for adapter chat (on model base) to be added" in action(plan, "router").reasons


def test_adapters_added_to_a_model_that_had_none(tmp_path):
    plan = build_plan(desired(tmp_path, SQL), observed(desired(tmp_path)))
    assert action(plan).reasons == (
        "vllm.max_lora_rank changed",
        "vllm.max_loras changed",
        "adapter 'sql' added (org/sql-lora@r1); vLLM loads adapters only at start",
    )
    assert [c.path for c in action(plan).changes] == ["adapters", "vllm.max_lora_rank", "vllm.max_loras"]


def test_a_removed_adapter_replaces_the_engine_and_its_route_goes(tmp_path):
    plan = build_plan(desired(tmp_path, SQL), observed(desired(tmp_path, SQL + CHAT)))
    assert action(plan).reasons == (
        "vllm.max_lora_rank changed",
        "vllm.max_loras changed",
        "adapter 'chat' removed (org/chat-lora@r1)",
    )
    assert "route for adapter chat (on model base) to be removed" in action(plan, "router").reasons


def test_a_changed_adapter_says_what_it_was_and_is(tmp_path):
    plan = build_plan(desired(tmp_path, SQL.replace("r1", "r2")), observed(desired(tmp_path, SQL)))
    assert action(plan).reasons == ("adapter 'sql' changed: org/sql-lora@r1 -> org/sql-lora@r2",)


def test_the_ledger_adds_the_adapters_buffers_as_an_estimate(tmp_path):
    config = {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "num_hidden_layers": 3,
        "torch_dtype": "bfloat16",
    }
    d = desired(tmp_path, SQL + CHAT)
    nvml = json.loads((FIXTURES / "hosts" / "rtx5090.json").read_text())["nvml"]
    facts = {"base": {"config": config, "weights": 1000, "found": "test", "problem": None}}
    (row,) = gpu_ledger.build(d, nvml, facts, set())
    (m,) = row["models"]
    # per layer and adapter slot: q (64 -> 64), k and v (64 -> 32), gate and up (64 -> 128) column-parallel,
    # o (64 -> 64) and down (128 -> 64) row-parallel: rank x (in + out) each, at tp 1
    per_slot = (64 + 64) + 2 * (64 + 32) + 2 * (64 + 128) + (64 + 64) + (128 + 64)
    lora = 3 * 2 * 16 * per_slot * 2  # 3 layers, max_loras 2, max_lora_rank 16, bfloat16
    assert m["estimate"]["lora"] == lora
    assert (
        m["estimate"]["total"]
        == m["estimate"]["weights"] + m["estimate"]["kv_cache"] + m["estimate"]["overhead"] + lora
    )
    assert any(
        n.startswith("LoRA adapters ~0.0 GiB: an estimate of vLLM's buffers for 2 adapter(s)")
        for n in m["estimate"]["notes"]
    )
    assert "the adapters train o_proj, q_proj, v_proj" in m["estimate"]["notes"]
    assert "+ LoRA adapters 0.0 GiB (an estimate)" in m["message"]
    plain = gpu_ledger.build(desired(tmp_path), nvml, facts, set())[0]["models"][0]
    assert "lora" not in plain["estimate"] and "LoRA" not in plain["message"]


def test_lora_buffers_split_over_tensor_parallel_gpus_and_say_what_they_miss():
    config = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, "num_experts": 8}
    size, note = lora_bytes(config, 1, 8, tp=2)
    # attention only (no intermediate_size): q, k, v (64 -> 64, heads = kv heads) with B halved; o with A halved
    assert size == 2 * 1 * 8 * (3 * (64 + 32) + (32 + 64)) * 2
    assert "experts' LoRA buffers of this mixture of experts are not counted" in note
    assert lora_bytes(None, 1, 8) == (None, "LoRA adapters' memory unknown: no config.json")


def downloaded(*folders):
    """The model store's markers when each of `folders` (STORE/adapters/ORG--NAME/REVISION) holds a
    downloaded adapter, recording its source."""
    return {
        f: {
            "repo": f.split("/")[-2].replace("--", "/", 1),
            "revision": f.split("/")[-1],
            "commit": "c0ffee",
            "files": {"adapter_config.json": 1},
            "complete_repo": True,
            "kind": "adapter",
        }
        for f in folders
    }


def test_folders_vllm_cannot_load_block_and_another_base_warns(tmp_path):
    files = {
        "/store/adapters/org--sql-lora/r1": AdapterFiles(
            problem="/store/adapters/org--sql-lora/r1 holds no adapter_config.json"
        ),
        "/store/adapters/org--chat-lora/r1": AdapterFiles(64, ("q_proj",), "Org/Other-Base"),
    }
    store = downloaded("/store/adapters/org--sql-lora/r1", "/store/adapters/org--chat-lora/r1")
    checks = adapter_checks(desired(tmp_path, SQL + CHAT, files, "    vllm: {max_lora_rank: 32}\n"), store)
    assert [(c.id, c.status) for c in checks] == [
        ("adapter.files", "blocking"),
        ("adapter.base", "warning"),
        ("adapter.files", "blocking"),
    ]
    assert (
        checks[0].message
        == "model 'base' adapter 'chat': its rank 64 is above the engine's max_lora_rank 32, and vLLM refuses to load it"
    )
    assert checks[1].message.startswith("model 'base' adapter 'chat' was trained on Org/Other-Base")
    assert (
        checks[2].message == "model 'base' adapter 'sql': /store/adapters/org--sql-lora/r1 holds no adapter_config.json"
    )
    same_base = {**FILES, "/store/adapters/org--sql-lora/r1": AdapterFiles(8, (), "ORG/base")}
    assert adapter_checks(desired(tmp_path, SQL, same_base), store) == []


def test_a_repo_adapter_not_in_the_store_is_not_blocked_apply_downloads_it(tmp_path):
    files = {
        "/store/adapters/org--sql-lora/r1": AdapterFiles(
            problem="/store/adapters/org--sql-lora/r1 does not exist on this machine"
        )
    }
    d = desired(tmp_path, SQL, files)
    assert d.models["base"].spec["vllm"]["max_lora_rank"] == 16  # vLLM's own while the rank is unread
    # a model's marker in the folder is not an adapter's: still downloaded
    model = {"repo": "org/sql-lora", "revision": "r1", "files": {"config.json": 1}, "complete_repo": True}
    model_marker = {"/store/adapters/org--sql-lora/r1": model}
    for markers in (None, {}, model_marker):
        checks = adapter_checks(d, markers)
        assert [(c.id, c.status) for c in checks] == [("adapter.files", "ok")]
        assert checks[0].message == (
            "model 'base' adapter 'sql': org/sql-lora@r1 is not in the model store yet: apply downloads it "
            "(or `aigo-apply models pull`), and its files are checked then"
        )
    # once downloaded, its files are judged like a local adapter's
    assert [c.status for c in adapter_checks(d, downloaded("/store/adapters/org--sql-lora/r1"))] == ["blocking"]


def test_a_local_adapter_keeps_its_check_whatever_the_store_holds(tmp_path):
    (tmp_path / "empty").mkdir()
    local = "      mine: {source: {path: ./empty}}\n"
    files = {str(tmp_path / "empty"): AdapterFiles(problem="it holds no adapter_config.json")}
    d = desired(tmp_path, local, files)
    checks = adapter_checks(d, downloaded(str(tmp_path / "empty")))
    assert [(c.id, c.status) for c in checks] == [("adapter.files", "blocking")]
