"""A repo adapter not downloaded yet is sized and checked by what the Hub says: the plan reads its
adapter_config.json from the Hub (the local stand-in, over a real socket) with its file list, so
the engine's --max-lora-rank is the adapter's rank from the first plan (not vLLM's 16 until the
next one, which would then replace the engine), a config vLLM cannot load blocks the plan before
any download, and an explicit max_lora_rank below the rank blocks it too. Offline, the plan keeps
vLLM's default and says so."""

from __future__ import annotations

import json

import pytest

from aigo_apply.app.choose_platform import open_platform
from aigo_apply.desired import engines
from aigo_apply.platforms.docker.planning import make_plan

from helpers.configs import write_config
from helpers.fakes import FakeRuntime
from helpers.hub import Hub

CONFIG = """
version: 1
project: lab
engines: {{vllm: {{image: local/engine, image_tag: "1"}}}}
defaults: {{models_dir: store}}
models:
  base:
    source: {{repo: org/base, revision: main}}
    context_length: 4096
    gpus: none
{vllm}    adapters:
      sql: {{source: {{repo: org/sql-lora, revision: main}}}}
"""
BASE_CONFIG = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2}


def adapter_config(rank):
    return {
        "r": rank,
        "target_modules": ["q_proj", "v_proj"],
        "base_model_name_or_path": "org/base",
        "peft_type": "LORA",
    }


@pytest.fixture
def hub(tmp_path, monkeypatch):
    with Hub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
        monkeypatch.setenv("AIGO_STATE_DIR", str(tmp_path / "state"))
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        hub.add("org/base", {"config.json": json.dumps(BASE_CONFIG).encode(), "model.safetensors": b"w" * 4096})
        yield hub


def plan_of(tmp_path, vllm=""):
    path = write_config(tmp_path, CONFIG.format(vllm=vllm))
    return make_plan(open_platform(str(path), runtime=FakeRuntime(), plans=True))


def engine_command(plan):
    """The engine's command line as apply makes its container: rendered from the action's spec."""
    create = next(a for a in plan.actions if a.address == "model.base")
    assert create.kind == "create" and create.spec is not None and create.model
    return list(engines.render(plan.project, create.model, create.spec).command)


def blockers(plan):
    return [b for b in plan.blockers if b.id == "adapter.files"]


def test_the_first_plan_sizes_the_engine_by_the_rank_the_hubs_adapter_config_declares(tmp_path, hub):
    hub.add(
        "org/sql-lora",
        {"adapter_config.json": json.dumps(adapter_config(64)).encode(), "adapter_model.safetensors": b"a" * 512},
    )
    plan = plan_of(tmp_path)
    command = engine_command(plan)
    assert command[command.index("--max-lora-rank") + 1] == "64"
    assert not plan.blockers
    assert not any("is not known" in n for a in plan.actions for n in a.notes)
    # of the adapter's files, only its config was fetched: nothing is downloaded by a plan
    assert any(path.endswith("/adapter_config.json") for path, _ in hub.file_gets())
    assert not any(path.endswith("adapter_model.safetensors") for path, _ in hub.file_gets())


def test_an_adapter_config_on_the_hub_that_vllm_cannot_load_blocks_the_plan_before_any_download(tmp_path, hub):
    hub.add("org/sql-lora", {"adapter_config.json": b'{"r": "eight"}', "adapter_model.safetensors": b"a" * 512})
    plan = plan_of(tmp_path)
    (blocker,) = blockers(plan)
    assert "adapter_config.json on the Hub declares no rank vLLM can load (r: 'eight'" in blocker.message
    assert blocker.message.startswith("model 'base' adapter 'sql': org/sql-lora@")
    assert "source.revision" in blocker.remediation


def test_an_explicit_max_lora_rank_below_the_hubs_rank_blocks_the_plan(tmp_path, hub):
    hub.add(
        "org/sql-lora",
        {"adapter_config.json": json.dumps(adapter_config(64)).encode(), "adapter_model.safetensors": b"a" * 512},
    )
    plan = plan_of(tmp_path, vllm="    vllm: {max_lora_rank: 32}\n")
    assert [b.message for b in blockers(plan)] == [
        "model 'base' adapter 'sql': its rank 64 is above the engine's max_lora_rank 32, and vLLM refuses to load it"
    ]


def test_offline_the_plan_keeps_vllms_default_rank_and_says_why(tmp_path, hub, monkeypatch):
    hub.add(
        "org/sql-lora",
        {"adapter_config.json": json.dumps(adapter_config(64)).encode(), "adapter_model.safetensors": b"a" * 512},
    )
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    plan = plan_of(tmp_path)
    command = engine_command(plan)
    assert command[command.index("--max-lora-rank") + 1] == "16"
    notes = [n for a in plan.actions for n in a.notes if "max_lora_rank" in n]
    assert notes and "neither on this machine nor given by the Hub" in notes[0]
