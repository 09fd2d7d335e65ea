"""Plans with LoRA adapters: adding, removing or changing one replaces the engine (vLLM loads adapters
only at start), each with a reason naming the adapter; the router routes each adapter alias; the GPU
ledger adds the adapters' buffers as an estimate (the next commit); a folder vLLM cannot load
blocks the plan, and an adapter trained on another base is a warning."""

from __future__ import annotations

from pathlib import Path

from aigo_apply.config.load import load_config
from aigo_apply.desired.build import build_desired
from aigo_apply.desired.types import AdapterFiles
from aigo_apply.plan.adapter_checks import adapter_checks
from aigo_apply.plan.planner import build_plan

from helpers.configs import host_context, write_config
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
    "/store/org--sql-lora/r1": AdapterFiles(8, ("q_proj", "v_proj"), "org/base"),
    "/store/org--sql-lora/r2": AdapterFiles(8, ("q_proj", "v_proj"), "org/base"),
    "/store/org--chat-lora/r1": AdapterFiles(16, ("o_proj",), "org/base"),
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


def test_folders_vllm_cannot_load_block_and_another_base_warns(tmp_path):
    files = {
        "/store/org--sql-lora/r1": AdapterFiles(problem="/store/org--sql-lora/r1 does not exist on this machine"),
        "/store/org--chat-lora/r1": AdapterFiles(64, ("q_proj",), "Org/Other-Base"),
    }
    checks = adapter_checks(desired(tmp_path, SQL + CHAT, files, "    vllm: {max_lora_rank: 32}\n"))
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
    assert checks[2].message == "model 'base' adapter 'sql': /store/org--sql-lora/r1 does not exist on this machine"
    same_base = {**FILES, "/store/org--sql-lora/r1": AdapterFiles(8, (), "ORG/base")}
    assert adapter_checks(desired(tmp_path, SQL, same_base)) == []
