"""A model and a LoRA adapter of one repo@revision are two downloads (two folders, two commits), so
every place that names a download tells them apart: the plan's addresses (text and JSON), `models
pull`'s, the journal's (the addresses), aigo.lock's keys (`adapter:repo@revision`) and its drift. An
older lock, whose keys named no kind, is read as it was meant: an entry with `adapters` was an
adapter's, one without a model's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aigo_apply.app.models import pull
from aigo_apply.desired.build import build_desired
from aigo_apply.desired.model_store import MARKER, downloads, label
from aigo_apply.errors import AigoError
from aigo_apply.observe.config_file import load_config
from aigo_apply.observe.hub_answer import HubAnswer, hub_key
from aigo_apply.plan import lockfile
from aigo_apply.plan.facts import PlanFacts
from aigo_apply.plan.planner import build_plan
from aigo_apply.plan.text import plan_text

from helpers.configs import host_context, write_config
from helpers.fakes import FakeReporter
from helpers.planner_inputs import observed

CONFIG = """
version: 1
project: lab
engines: {vllm: {image: local/engine, image_tag: "1"}}
models:
  c:
    source: {repo: org/name, revision: main}
    context_length: 4096
    gpus: [0]
  base:
    source: {repo: org/base, revision: v1}
    context_length: 4096
    gpus: [1]
    adapters:
      ad: {source: {repo: org/name, revision: main}}
"""
MODEL_C, ADAPTER_C = "a" * 40, "b" * 40
MODEL_DIR, ADAPTER_DIR = "/store/org--name/main", "/store/adapters/org--name/main"


def desired(tmp_path, store=Path("/store")):
    return build_desired(load_config(str(write_config(tmp_path, CONFIG))), host_context(store), {})


def marker(kind, commit, repo="org/name", revision="main"):
    return {
        "repo": repo,
        "revision": revision,
        "commit": commit,
        "files": {"adapter_config.json" if kind == "adapter" else "config.json": 1},
        "complete_repo": True,
        **({"kind": kind} if kind == "adapter" else {}),
    }


MARKERS = {
    MODEL_DIR: marker("model", MODEL_C),
    ADAPTER_DIR: marker("adapter", ADAPTER_C),
    "/store/org--base/v1": marker("model", "c" * 40, "org/base", "v1"),
}


def test_no_two_downloads_share_a_name(tmp_path):
    needs = downloads(desired(tmp_path).specs())
    assert len(needs) == 3 and len({label(n) for n in needs}) == 3
    assert sorted(label(n) for n in needs) == ["adapter:org/name@main", "org/base@v1", "org/name@main"]


def test_the_plan_names_the_models_and_the_adapters_download_apart_in_text_and_json(tmp_path):
    d = desired(tmp_path)
    answer = HubAnswer(commit=MODEL_C, bytes=10, files=("config.json",))
    remote = {hub_key(n): answer for n in downloads(d.specs())}
    plan = build_plan(d, observed(d, entries=[], downloaded=False), PlanFacts(remote=remote))
    addresses = [a["address"] for a in json.loads(json.dumps(plan.to_dict()))["actions"] if a["kind"] == "download"]
    assert sorted(addresses) == ["download.adapter:org/name@main", "download.org/base@v1", "download.org/name@main"]
    text = plan_text(plan)
    assert "download.adapter:org/name@main" in text and "download.org/name@main " in text


def test_the_lock_keeps_both_commits_and_finds_no_false_drift(tmp_path):
    d = desired(tmp_path)
    lock = lockfile.build(d, [], MARKERS)
    assert lock["models"]["org/name@main"] == {"commit": MODEL_C, "models": ["c"]}
    assert lock["models"]["adapter:org/name@main"] == {"commit": ADAPTER_C, "models": ["base"], "adapters": ["ad"]}
    assert lockfile.parse(lockfile.text_of(lock), Path("aigo.lock")) == lock
    assert lockfile.drift(lock, d, {}, MARKERS, {}) == []
    moved = {**MARKERS, ADAPTER_DIR: marker("adapter", "d" * 40)}
    assert lockfile.drift(lock, d, {}, moved, {}) == [
        f"adapter:org/name@main on this machine is commit dddddddddddd, aigo.lock records {ADAPTER_C[:12]}"
    ]


def _old_lock(models: dict) -> bytes:
    return json.dumps({"version": 1, "project": "lab", "images": {}, "models": models}).encode()


def test_an_older_lock_is_read_as_it_was_meant(tmp_path):
    """Before keys named the kind, an adapter's entry (the one with `adapters`) took the model's key
    too: it is the adapter's, and the model has no entry (never the adapter's commit)."""
    d = desired(tmp_path)
    both = _old_lock(
        {
            "org/base@v1": {"commit": "c" * 40, "models": ["base"]},
            "org/name@main": {"commit": ADAPTER_C, "models": ["base"], "adapters": ["ad"]},
        }
    )
    lock = lockfile.parse(both, Path("aigo.lock"))
    assert set(lock["models"]) == {"org/base@v1", "adapter:org/name@main"}
    assert lock["models"]["adapter:org/name@main"]["commit"] == ADAPTER_C
    assert lockfile.drift(lock, d, {}, MARKERS, {}) == []  # the model is not compared with the adapter's commit
    models_only = lockfile.parse(_old_lock({"org/name@main": {"commit": MODEL_C, "models": ["c"]}}), Path("x"))
    assert models_only["models"] == {"org/name@main": {"commit": MODEL_C, "models": ["c"]}}


def test_apply_locked_never_pins_a_model_to_its_namesake_adapters_commit(tmp_path, monkeypatch):
    from aigo_apply.adapters import hub
    from aigo_apply.platforms.docker.planning import remote_info

    asked = []

    def the_hub(repo, revision, file=None, timeout=10.0, with_config=False, kind="model"):
        asked.append((repo, revision, kind))
        return hub.Remote(repo, revision, revision, {"adapter_config.json": 10}, {})

    monkeypatch.setattr(hub, "remote", the_hub)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    d = desired(tmp_path)
    old = lockfile.parse(
        _old_lock({"org/name@main": {"commit": ADAPTER_C, "models": ["base"], "adapters": ["ad"]}}), Path("aigo.lock")
    )
    answers = remote_info(d, observed(d, entries=[], downloaded=False), old)
    assert asked == [("org/name", ADAPTER_C, "adapter")]  # only the adapter is pinned, to its own commit
    by_label = {label(n): answers[hub_key(n)] for n in downloads(d.specs())}
    assert by_label["org/name@main"].blocker == "lock.missing" and by_label["org/name@main"].pin is None
    assert by_label["adapter:org/name@main"].pin == ADAPTER_C


def test_models_pull_names_each_download_apart(tmp_path):
    store = tmp_path / "store"
    d = desired(tmp_path, store)
    for need in downloads(d.specs()):  # every folder complete: pull reports each, downloads nothing
        folder = Path(need["dest"])
        folder.mkdir(parents=True)
        kind = need.get("kind", "model")
        (folder / MARKER).write_text(json.dumps(marker(kind, MODEL_C, need["repo"], need["revision"])))
    reporter = FakeReporter()
    pull(d, (), reporter)
    addresses = [event["address"] for _, event in reporter.events]
    assert sorted(addresses) == ["download.adapter:org/name@main", "download.org/base@v1", "download.org/name@main"]


def test_an_adapters_list_that_is_not_aliases_is_refused():
    raw = _old_lock({"org/name@main": {"commit": ADAPTER_C, "adapters": [1]}})
    with pytest.raises(AigoError, match="adapters is not a list of aliases"):
        lockfile.parse(raw, Path("aigo.lock"))
