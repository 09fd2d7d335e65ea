"""Gather, then decide once: a run builds its desired state once from the facts it gathered (the
adapters' folders found from the file and read first), whatever the file holds and whichever command
opens it; only a repo adapter the Hub has just described on Docker (its rank known only after the
machine was read) makes a second build, documented at DockerPlatform.plan. A cluster's plan asks the
Hub first, from the file (no store of this machine to read), and builds once."""

from __future__ import annotations

import json

import pytest

from aigo_apply.app.choose_platform import open_platform
from aigo_apply.platforms import host_context
from aigo_apply.platforms.docker.planning import make_plan

from helpers.configs import write_config
from helpers.fakes import FakeRuntime
from helpers.hub import Hub

HEAD = """
version: 1
project: lab
engines: {vllm: {image: local/engine, image_tag: "1"}}
defaults: {models_dir: store}
models:
  base:
    source: {repo: org/base, revision: main}
    context_length: 4096
    gpus: none
"""
ADAPTERS = {
    "none": "",
    "local": "    adapters: {sql: {source: {path: ./sql}}}\n",
    "repo": "    adapters: {sql: {source: {repo: org/sql-lora, revision: main}}}\n",
    "both": "    adapters:\n      sql: {source: {path: ./sql}}\n      web: {source: {repo: org/web-lora}}\n",
    "disabled": "    adapters: {sql: {source: {path: ./sql}}}\n  spare:\n    enabled: false\n"
    "    source: {repo: org/base}\n    context_length: 4096\n    gpus: none\n"
    "    adapters: {old: {source: {path: ./sql}}}\n",
}
RANK = {"r": 32, "target_modules": ["q_proj"], "base_model_name_or_path": "org/base", "peft_type": "LORA"}


@pytest.fixture
def builds(tmp_path, monkeypatch):
    monkeypatch.setenv("AIGO_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (tmp_path / "sql").mkdir()
    (tmp_path / "sql" / "adapter_config.json").write_text(json.dumps(RANK))
    (tmp_path / "sql" / "adapter_model.safetensors").write_bytes(b"a" * 64)
    calls: list[object] = []
    real = host_context.build_desired

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(host_context, "build_desired", counted)
    return calls


@pytest.mark.parametrize("adapters", sorted(ADAPTERS))
@pytest.mark.parametrize("plans", [True, False], ids=["plan-apply", "status-destroy-logs"])
def test_a_run_builds_its_desired_state_once(tmp_path, builds, adapters, plans):
    path = write_config(tmp_path, HEAD + ADAPTERS[adapters])
    platform = open_platform(str(path), runtime=FakeRuntime(), plans=plans)
    if plans:
        plan = make_plan(platform)
        assert plan.actions
    assert len(builds) == 1


@pytest.mark.parametrize("adapters", ["local", "both"])
def test_the_one_build_knows_the_local_adapters_rank(tmp_path, builds, adapters):
    path = write_config(tmp_path, HEAD + ADAPTERS[adapters])
    desired = open_platform(str(path), runtime=FakeRuntime(), plans=True).desired
    assert desired is not None and desired.models["base"].spec["vllm"]["max_lora_rank"] == 32
    assert len(builds) == 1


def test_a_repo_adapter_the_hub_describes_is_the_one_second_build(tmp_path, builds, monkeypatch):
    with Hub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        monkeypatch.delenv("HF_HUB_OFFLINE")
        hub.add("org/base", {"config.json": b'{"architectures": ["LlamaForCausalLM"]}', "model.safetensors": b"w"})
        hub.add("org/sql-lora", {"adapter_config.json": json.dumps(RANK).encode(), "adapter_model.safetensors": b"a"})
        path = write_config(tmp_path, HEAD + ADAPTERS["repo"])
        make_plan(open_platform(str(path), runtime=FakeRuntime(), plans=True))
    assert len(builds) == 2


CLUSTER = """
version: 1
project: lab
platform: kubernetes
kubernetes: {storage: {node_local: true}}
models:
  base:
    source: {repo: org/base, revision: main}
    context_length: 4096
    kubernetes: {node_selector: {kubernetes.io/hostname: node-1}}
    adapters:
      sql: {source: {repo: org/sql-lora, revision: main}}
      notes: {source: {path: /srv/adapters/notes}}
"""


@pytest.mark.parametrize("plans", [True, False], ids=["plan-apply", "status-destroy-logs"])
def test_a_cluster_run_asks_the_hub_from_the_file_and_builds_once(tmp_path, builds, monkeypatch, plans):
    with Hub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        monkeypatch.delenv("HF_HUB_OFFLINE")
        hub.add("org/sql-lora", {"adapter_config.json": json.dumps(RANK).encode(), "adapter_model.safetensors": b"a"})
        desired = open_platform(str(write_config(tmp_path, CLUSTER)), plans=plans).desired
    assert len(builds) == 1
    # the Hub's rank (32) when the run plans; vLLM's default (16) when it asks the Hub nothing
    assert desired.models["base"].spec["vllm"]["max_lora_rank"] == (32 if plans else 16)


def test_the_file_s_repo_adapters_are_the_downloads_the_built_specs_name(tmp_path, monkeypatch):
    monkeypatch.setenv("AIGO_STATE_DIR", str(tmp_path / "state"))
    from aigo_apply.desired.adapters import adapter_downloads
    from aigo_apply.desired.model_store import downloads, kind_of
    from aigo_apply.observe.config_file import load_config

    text = (
        CLUSTER
        + """  other:
    source: {repo: org/other, revision: main}
    context_length: 4096
    kubernetes: {node_selector: {kubernetes.io/hostname: node-1}}
    adapters:
      sql2: {source: {repo: org/sql-lora, revision: main}}
      web: {source: {repo: org/web-lora, revision: v2}}
"""
    )
    config = load_config(str(write_config(tmp_path, text)))
    host = host_context.current_host()
    built = host_context.desired_state(config, host)
    assert adapter_downloads(config, host) == [d for d in downloads(built.specs()) if kind_of(d) == "adapter"]
    found = adapter_downloads(config, host)
    assert [(d["models"], d.get("adapters")) for d in found] == [
        (["base", "other"], ["sql", "sql2"]),
        (["other"], ["web"]),
    ]
