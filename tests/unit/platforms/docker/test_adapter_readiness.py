"""The plan's readiness for LoRA adapters, wired as `plan` runs it: the adapters' folders are read
before the desired state is built (their ranks size --max-lora-rank), and a folder vLLM cannot load
is an `adapter.files` blocker in the host checks, beside the other readiness checks. A repo adapter
not in the model store yet is not: apply downloads it (the check says so)."""

from __future__ import annotations

import json

from aigo_apply.observe.config_file import load_config
from aigo_apply.platforms.docker.planning import host_checks
from aigo_apply.platforms.host_context import desired_state

from helpers.configs import host_context, write_config
from helpers.fakes import FakeRuntime

CONFIG = """
version: 1
project: lab
models:
  base:
    source: {repo: org/base}
    context_length: 4096
    gpus: none
    adapters:
      good: {source: {path: ./good}}
      empty: {source: {path: ./empty}}
      hub: {source: {repo: org/hub-lora, revision: r1}}
"""


def test_adapter_folders_are_read_before_the_plan_and_block_when_vllm_cannot_load_them(tmp_path):
    (tmp_path / "good").mkdir()
    (tmp_path / "good" / "adapter_config.json").write_text(json.dumps({"r": 64, "target_modules": ["q_proj"]}))
    (tmp_path / "good" / "adapter_model.safetensors").write_bytes(b"")
    (tmp_path / "empty").mkdir()
    store = tmp_path / "store"
    desired = desired_state(load_config(str(write_config(tmp_path, CONFIG))), host_context(store))
    assert desired.models["base"].spec["vllm"]["max_lora_rank"] == 64  # the unread ones are below it
    checks, ledger = host_checks(desired, FakeRuntime())
    adapters = [c for c in checks if c.id.startswith("adapter.")]
    assert [(c.id, c.status) for c in adapters] == [("adapter.files", "blocking"), ("adapter.files", "ok")]
    assert adapters[0].message.startswith("model 'base' adapter 'empty': ")
    assert "holds no adapter_config.json" in adapters[0].message
    assert adapters[1].message == (
        "model 'base' adapter 'hub': org/hub-lora@r1 is not in the model store yet: apply downloads it "
        "(or `aigo-apply models pull`), and its files are checked then"
    )
    assert ledger == []  # gpus: none: no NVML, no ledger
