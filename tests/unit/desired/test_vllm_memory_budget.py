"""The memory budget stays explicit: every `vllm serve` command line aigo-apply renders (Docker's and the
Kubernetes pods', which take the same container command) carries `--gpu-memory-utilization` with the
fraction the GPU plan counts, for every release whose facts are here and for a tag without facts.
vLLM's own default for an unset flag moved from 0.92 to all of the GPU's memory in v0.34.0 (its extensible
KV cache), so an engine left without the flag would take what the plan gave to the others on its GPU."""

from __future__ import annotations

import os
from typing import Any

import pytest
import yaml

from aigo_apply.config.defaults import DEFAULT_GPU_MEMORY_UTILIZATION
from aigo_apply.config.engine_choice import engine_of
from aigo_apply.config.vllm_facts import facts, known_releases
from aigo_apply.desired.build import build_desired
from aigo_apply.observe.config_file import load_config

from helpers.configs import host_context
from helpers.paths import EXAMPLES, ROOT
from helpers.retag import retagged

FLAG = "--gpu-memory-utilization"
# Every example, the contract's file that sets each `vllm:` setting (adapters and speculative decoding
# included), and a swap group (sleep mode) whose members take the fraction from each level of defaults.
SWAP_GROUP = """\
version: 1
project: budget
defaults: {gpu_memory_utilization: 0.4}
models:
  own: {source: {repo: a/own}, context_length: 4096, gpus: [0], swap_group: g, vllm: {gpu_memory_utilization: 0.3}}
  from-defaults: {source: {repo: a/def}, context_length: 4096, gpus: [0], swap_group: g}
  built-in: {source: {repo: a/b}, context_length: 4096, gpus: [1]}
"""
CONFIGS = {p.stem: p.read_text() for p in sorted(EXAMPLES.glob("*.yaml"))}
CONFIGS["every-vllm-setting"] = (ROOT / "tests" / "contract" / "every-vllm-setting.yaml").read_text()
CONFIGS["swap-group"] = SWAP_GROUP
BASE_DIRS = {"every-vllm-setting": ROOT / "tests" / "contract"}
TAGS = [f"v{release}" for release in known_releases()] + ["v0.30.1", "latest"]


def asked_fraction(data: dict[str, Any], alias: str) -> float:
    """What the file asks for one model: its own, else defaults', else the built-in 0.90."""
    own = (data["models"][alias].get("vllm") or {}).get("gpu_memory_utilization")
    default = (data.get("defaults") or {}).get("gpu_memory_utilization", DEFAULT_GPU_MEMORY_UTILIZATION)
    return float(own if own is not None else default)


@pytest.mark.parametrize("tag", TAGS)
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_every_vllm_command_line_carries_the_memory_budget(tmp_path, monkeypatch, name, tag):
    data = retagged(CONFIGS[name], BASE_DIRS.get(name, EXAMPLES), tag)
    path = tmp_path / "aigo.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    monkeypatch.setitem(os.environ, "AIGO_STATE_DIR", str(tmp_path / "state"))
    desired = build_desired(load_config(str(path)), host_context(tmp_path / "store"))
    vllm_models = [a for a, m in data["models"].items() if engine_of(m, data.get("defaults")) == "vllm"]
    if not vllm_models:
        pytest.skip(f"{name} has no vLLM model")
    for alias in vllm_models:
        model = desired.models[alias]
        command = list(model.container.command)
        assert command.count(FLAG) == 1, (alias, command)
        value = float(command[command.index(FLAG) + 1])
        assert value == model.spec["vllm"]["gpu_memory_utilization"] == asked_fraction(data, alias), alias
        assert 0 < value <= 1


def test_the_releases_facts_say_why():
    """The facts behind the docs' note: 0.92 up to v0.33.0, no fraction (all free memory) from v0.34.0."""
    defaults = {r: facts(r)["flags"][FLAG]["default"] for r in known_releases()}
    assert {r: d for r, d in defaults.items() if r < "0.34.0"} == dict.fromkeys(
        [r for r in known_releases() if r < "0.34.0"], 0.92
    )
    assert defaults["0.34.0"] is None
