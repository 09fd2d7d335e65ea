"""Gather, then decide once: a run builds its desired state once from the facts it gathered (the
adapters' folders found from the file and read first; for a run that plans, the Hub asked first about
the file's repo adapters not complete in the model store, pinned to aigo.lock with --locked), whatever
the file holds and whichever command opens it, and the plan asks the Hub nothing it asked before. The one
second build: an adapter's folder that another run changed while this one waited for the project lock
(documented at DockerPlatform.plan). A cluster's plan asks the Hub first too, from the file."""

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


def adapter_file_asks(hub, repo="org/sql-lora"):
    """What the Hub was asked for `repo`'s file list (one question per download the plan weighs; the
    lock's drift check asks only where a branch points), as paths in order."""
    return [p for m, p, _ in hub.requests if m == "GET" and p.startswith(f"/api/models/{repo}/tree/")]


def create_spec(plan, alias="base"):
    action = next(a for a in plan.actions if a.address == f"model.{alias}")
    assert action.kind == "create" and action.spec is not None
    return action.spec


def test_a_repo_adapter_the_hub_describes_is_in_the_one_build_and_asked_once(tmp_path, builds, monkeypatch):
    with Hub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        monkeypatch.delenv("HF_HUB_OFFLINE")
        hub.add("org/base", {"config.json": b'{"architectures": ["LlamaForCausalLM"]}', "model.safetensors": b"w"})
        hub.add("org/sql-lora", {"adapter_config.json": json.dumps(RANK).encode(), "adapter_model.safetensors": b"a"})
        path = write_config(tmp_path, HEAD + ADAPTERS["repo"])
        plan = make_plan(open_platform(str(path), runtime=FakeRuntime(), plans=True))
        asks = adapter_file_asks(hub)
    assert len(builds) == 1
    assert create_spec(plan)["vllm"]["max_lora_rank"] == 32  # the Hub's rank, in the one build
    assert len(asks) == 1  # asked before the build, not again by the plan


def downloaded_adapter(store, commit, rank):
    """The adapter's folder in the model store as a finished download of `commit` left it."""
    from aigo_apply.desired.model_store import MARKER, repo_dir

    folder = repo_dir(store, "org/sql-lora", "main", "adapter")
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({**RANK, "r": rank}))
    (folder / "adapter_model.safetensors").write_bytes(b"a" * 64)
    marker = {"repo": "org/sql-lora", "revision": "main", "commit": commit, "kind": "adapter"}
    (folder / MARKER).write_text(json.dumps({**marker, "files": {"adapter_config.json": 1}, "complete_repo": True}))


@pytest.mark.parametrize("locked", [True, False], ids=["apply-locked", "apply"])
def test_apply_locked_sizes_the_one_build_by_the_adapter_aigo_lock_pins(tmp_path, builds, monkeypatch, locked):
    """The store holds the adapter at the branch's new commit (rank 8); aigo.lock pins the older one
    (rank 64). --locked puts the pinned one back, so its engine is sized by the pinned rank, asked of the
    Hub at that commit before the one build; without --locked the folder's rank stands, asked nothing."""
    from aigo_apply.app.apply import open_for_apply
    from aigo_apply.plan.facts import PlanRequest
    from aigo_apply.platforms import lock_file
    from aigo_apply.platforms.requests import ApplyRequest

    with Hub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        monkeypatch.delenv("HF_HUB_OFFLINE")
        base = hub.add(
            "org/base", {"config.json": b'{"architectures": ["LlamaForCausalLM"]}', "model.safetensors": b"w"}
        )
        weights = {"adapter_model.safetensors": b"a"}
        pinned = hub.add("org/sql-lora", {"adapter_config.json": json.dumps({**RANK, "r": 64}).encode(), **weights})
        newer = hub.add("org/sql-lora", {"adapter_config.json": json.dumps({**RANK, "r": 8}).encode(), **weights})
        path = write_config(tmp_path, HEAD + ADAPTERS["repo"])
        downloaded_adapter(tmp_path / "store", newer, 8)
        lock_file.write(
            lock_file.path_for(str(path)),
            {
                "version": 1,
                "project": "lab",
                "images": {},
                "models": {
                    "org/base@main": {"commit": base, "models": ["base"]},
                    "adapter:org/sql-lora@main": {"commit": pinned, "models": ["base"], "adapters": ["sql"]},
                },
            },
        )
        _, platform = open_for_apply(ApplyRequest(file=str(path), locked=locked), FakeRuntime())
        plan = platform.plan(platform.observe(), PlanRequest(locked=locked))
        asks = adapter_file_asks(hub)
    assert len(builds) == 1
    assert create_spec(plan)["vllm"]["max_lora_rank"] == (64 if locked else 8)
    assert asks == ([f"/api/models/org/sql-lora/tree/{pinned}"] if locked else [])


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


@pytest.mark.parametrize("change", ["downloaded meanwhile", "removed meanwhile"])
def test_an_adapter_folder_another_run_changed_while_this_one_waited_is_read_again(
    tmp_path, builds, monkeypatch, change
):
    """The adapter's folder is read (and the Hub asked) before the build, outside the project lock;
    another apply finishes or removes its download before this run reads the machine under the lock.
    The plan then sizes the engine by what is there now, never by the stale answer (the one second
    build), so vLLM is not started with a --max-lora-rank below the adapter's rank."""
    import shutil

    with Hub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        monkeypatch.delenv("HF_HUB_OFFLINE")
        hub.add("org/base", {"config.json": b'{"architectures": ["LlamaForCausalLM"]}', "model.safetensors": b"w"})
        weights = {"adapter_model.safetensors": b"a"}
        hub.add("org/sql-lora", {"adapter_config.json": json.dumps(RANK).encode(), **weights})  # rank 32
        path = write_config(tmp_path, HEAD + ADAPTERS["repo"])
        if change == "removed meanwhile":
            downloaded_adapter(tmp_path / "store", "f" * 40, 128)
        platform = open_platform(str(path), runtime=FakeRuntime(), plans=True)
        if change == "downloaded meanwhile":
            downloaded_adapter(tmp_path / "store", "f" * 40, 128)
        else:
            from aigo_apply.desired.model_store import repo_dir

            shutil.rmtree(repo_dir(tmp_path / "store", "org/sql-lora", "main", "adapter"))
        plan = make_plan(platform)
    assert len(builds) == 2
    # what is there now: the folder's rank 128, or (gone again) the Hub's 32
    assert create_spec(plan)["vllm"]["max_lora_rank"] == (128 if change == "downloaded meanwhile" else 32)
    assert not [b for b in plan.blockers if b.id == "adapter.files"]


def test_apply_locked_without_aigo_lock_asks_the_hub_nothing_before_it_is_refused(tmp_path, builds, monkeypatch):
    from aigo_apply.app.apply import open_for_apply, run_apply
    from aigo_apply.errors import AigoError
    from aigo_apply.platforms.requests import ApplyRequest

    with Hub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        monkeypatch.delenv("HF_HUB_OFFLINE")
        hub.add("org/sql-lora", {"adapter_config.json": json.dumps(RANK).encode(), "adapter_model.safetensors": b"a"})
        path = write_config(tmp_path, HEAD + ADAPTERS["repo"])
        request = ApplyRequest(file=str(path), locked=True, yes=True)
        saved, platform = open_for_apply(request, FakeRuntime())
        with pytest.raises(AigoError, match="apply --locked needs"):
            run_apply(request, console=None, target=platform, saved=saved)
        asked = list(hub.requests)
    assert asked == [] and len(builds) == 1
