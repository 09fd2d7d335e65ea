"""LoRA adapters given by repo are fetched and locked like a model's files: the model store
lists each as a download of kind "adapter" (for the models that serve it), only an adapter's files are
selected (a repo without adapter_config.json is refused), the plan downloads it before any container
changes with a reason naming the adapter, a saved plan keeps its kind, aigo.lock records its commit
(drift shown as for models), and `apply --locked` pins it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aigo_apply.desired.build import build_desired
from aigo_apply.desired.model_store import downloads, is_complete, select_files
from aigo_apply.errors import PlanFileError, UnsupportedModel
from aigo_apply.observe.config_file import load_config
from aigo_apply.observe.hub_answer import HubAnswer, hub_key
from aigo_apply.plan import lockfile
from aigo_apply.plan.facts import PlanFacts
from aigo_apply.plan.fetch_plan import lock_moves
from aigo_apply.plan.planner import build_plan
from aigo_apply.plan.types import Action, DownloadSpec, Plan
from aigo_apply.platforms.docker.fetch_steps import check_download

from helpers.configs import host_context, write_config
from helpers.planner_inputs import observed

CONFIG = """
version: 1
project: lab
engines: {vllm: {image: local/engine, image_tag: "1"}}
models:
  base:
    source: {repo: org/base, revision: v1}
    context_length: 4096
    gpus: [0]
    adapters:
      sql: {source: {repo: org/sql-lora, revision: r1}}
"""
ADAPTER_DIR = "/store/adapters/org--sql-lora/r1"
BASE_DIR = "/store/org--base/v1"
KEY = ("org/sql-lora", "r1", None, "adapter")
C1, C2 = "1" * 40, "2" * 40


def desired(tmp_path, text=CONFIG):
    return build_desired(load_config(str(write_config(tmp_path, text))), host_context(Path("/store")), {})


def marker(commit, kind=None, repo="org/sql-lora", revision="r1"):
    return {
        "repo": repo,
        "revision": revision,
        "commit": commit,
        "files": {"adapter_config.json": 1},
        "complete_repo": True,
        **({"kind": kind} if kind else {}),
    }


def test_a_repo_adapter_is_a_download_of_its_own_kind_for_the_model_that_serves_it(tmp_path):
    d = desired(tmp_path)
    assert downloads(d.specs()) == [
        {"repo": "org/base", "revision": "v1", "file": None, "dest": BASE_DIR, "models": ["base"]},
        {
            "repo": "org/sql-lora",
            "revision": "r1",
            "file": None,
            "dest": ADAPTER_DIR,
            "models": ["base"],
            "kind": "adapter",
            "adapters": ["sql"],
        },
    ]
    assert hub_key(downloads(d.specs())[0]) == ("org/base", "v1", None)  # a model's key as before
    assert hub_key(downloads(d.specs())[1]) == KEY
    local = CONFIG.replace("{repo: org/sql-lora, revision: r1}", "{path: ./sql}")
    (tmp_path / "sql").mkdir()
    assert [n["repo"] for n in downloads(desired(tmp_path, local).specs())] == ["org/base"]  # a path: nothing


def test_an_adapters_files_are_selected_not_a_models():
    repo = [
        "README.md",
        "adapter_config.json",
        "adapter_model.safetensors",
        "adapter_model.bin",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "chat_template.jinja",
        "training_args.bin",
        "checkpoint-100/adapter_model.safetensors",
        "optimizer.pt",
    ]
    assert select_files("org/sql-lora", repo, kind="adapter") == [
        "adapter_config.json",
        "adapter_model.safetensors",
        "chat_template.jinja",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    old = ["adapter_config.json", "adapter_model.bin", "README.md"]
    assert select_files("org/old-lora", old, kind="adapter") == ["adapter_config.json", "adapter_model.bin"]
    with pytest.raises(UnsupportedModel, match="needs config.json"):  # a model's rule refuses an adapter
        select_files("org/sql-lora", repo)


@pytest.mark.parametrize(
    "files",
    [["README.md", "adapter_model.safetensors"], ["adapter_config.json", "README.md"], []],
)
def test_a_repo_that_is_no_adapter_is_refused_naming_what_it_has(files):
    with pytest.raises(UnsupportedModel) as caught:
        select_files("org/not-lora", files, kind="adapter")
    assert str(caught.value).startswith(
        "org/not-lora is not a LoRA adapter vLLM can load: it needs adapter_config.json and .safetensors "
        "(or .bin) weights at its top level; found "
    )
    assert str(caught.value).endswith(", ".join(sorted(files)) or "no files")


def test_only_an_adapters_marker_makes_its_folder_complete():
    adapter, model = (
        {"repo": "org/sql-lora", "revision": "r1", "kind": "adapter"},
        {"repo": "org/sql-lora", "revision": "r1"},
    )
    assert is_complete(marker(C1, "adapter"), adapter)
    assert not is_complete(marker(C1), adapter)  # a model's files are not an adapter's
    assert not is_complete(marker(C1, "adapter"), model)  # nor the other way round
    assert is_complete(marker(C1, "adapter"), adapter, commit=C1)
    assert not is_complete(marker(C1, "adapter"), adapter, commit=C2)


def test_the_plan_downloads_a_missing_adapter_first_and_says_whose_it_is(tmp_path):
    d = desired(tmp_path)
    remote = {KEY: HubAnswer(commit=C1, bytes=54_000_000, files=("adapter_config.json", "adapter_model.safetensors"))}
    seen = observed(d, downloaded=False, entries=[])
    seen.model_files[BASE_DIR] = marker(C1, repo="org/base", revision="v1")  # the base model is here
    plan = build_plan(d, seen, PlanFacts(remote=remote))
    download = next(a for a in plan.actions if a.kind == "download")
    assert download.address == "download.adapter:org/sql-lora@r1"
    assert download.reasons == (
        "LoRA adapter sql of model base: org/sql-lora@r1 is not on this machine: 2 files, 54.0 MB, commit 111111111111",
    )
    assert download.download == DownloadSpec(
        "org/sql-lora", "r1", None, ADAPTER_DIR, ("base",), C1, 54_000_000, None, "adapter"
    )
    assert [a.kind for a in plan.actions].index("download") < [a.kind for a in plan.actions].index("create")
    assert check_download(download) == {**download.download.to_spec(), "kind": "adapter"}
    # downloaded (as an adapter): nothing to fetch
    seen.model_files[ADAPTER_DIR] = marker(C1, "adapter")
    assert "download" not in [a.kind for a in build_plan(d, seen, PlanFacts(remote=remote)).actions]


def test_the_kind_goes_through_the_saved_plan_and_a_models_spec_has_none(tmp_path):
    adapter = DownloadSpec("org/sql-lora", "r1", None, ADAPTER_DIR, ("base",), C1, 5, None, "adapter")
    assert adapter.to_spec()["kind"] == "adapter"
    assert DownloadSpec.from_spec(json.loads(json.dumps(adapter.to_spec()))) == adapter
    model = DownloadSpec("org/base", "v1", None, BASE_DIR, ("base",), C1, 5)
    assert "kind" not in model.to_spec()
    assert DownloadSpec.from_spec(model.to_spec()).kind == "model"
    with pytest.raises(PlanFileError, match="damaged or edited"):
        DownloadSpec.from_spec({**adapter.to_spec(), "kind": "dataset"})
    d = desired(tmp_path)
    plan = build_plan(d, observed(d, downloaded=False, entries=[]), PlanFacts(remote={}))
    loaded = Plan.from_dict(json.loads(json.dumps(plan.to_dict())))
    assert [a.download for a in loaded.actions if a.download] == [a.download for a in plan.actions if a.download]
    assert {a.download.kind for a in loaded.actions if a.download} == {"model", "adapter"}
    # an adapter is a whole folder: a file named for it is not a download aigo-apply makes
    edited = DownloadSpec("org/sql-lora", "r1", "x.gguf", ADAPTER_DIR, ("base",), kind="adapter")
    with pytest.raises(PlanFileError, match="not one aigo-apply makes"):
        check_download(Action("download.adapter:org/sql-lora@r1", "download", ("edited",), payload=edited))


def test_the_lock_records_an_adapters_commit_and_shows_its_drift(tmp_path):
    d = desired(tmp_path)
    markers = {BASE_DIR: marker(C1, repo="org/base", revision="v1"), ADAPTER_DIR: marker(C1, "adapter")}
    lock = lockfile.build(d, [], markers)
    assert lock["models"] == {
        "org/base@v1": {"commit": C1, "models": ["base"]},
        "adapter:org/sql-lora@r1": {"commit": C1, "models": ["base"], "adapters": ["sql"]},
    }
    assert lockfile.parse(lockfile.text_of(lock), Path("aigo.lock")) == lock  # it reads back
    assert lockfile.drift(lock, d, {}, markers, {}) == []
    moved = {**markers, ADAPTER_DIR: marker(C2, "adapter")}
    assert lockfile.drift(lock, d, {}, moved, {"adapter:org/sql-lora@r1": C2}) == [
        "adapter:org/sql-lora@r1 on this machine is commit 222222222222, aigo.lock records 111111111111",
        "adapter:org/sql-lora@r1 now points to commit 222222222222 on the Hub; aigo.lock records 111111111111 "
        "(`apply --locked` installs the recorded one)",
    ]


def test_apply_locked_pins_an_adapter_and_replaces_its_model_when_its_files_move(tmp_path):
    d = desired(tmp_path)
    seen = observed(d)
    seen.model_files[ADAPTER_DIR] = marker(C2, "adapter")  # the folder holds another commit
    pinned = {KEY: HubAnswer(commit=C1, files=("adapter_config.json",), bytes=1, pin=C1)}
    plan = build_plan(d, seen, PlanFacts(remote=pinned))
    download = next(a for a in plan.actions if a.kind == "download")
    assert download.download is not None and download.download.pin == C1 and download.download.kind == "adapter"
    assert download.reasons[0].endswith("(the commit aigo.lock records)")
    base = next(a for a in lock_moves(d, seen, plan.actions, pinned) if a.address == "model.base")
    assert base.kind == "recreate" and base.reasons == ("its model files move to commit 111111111111 (aigo.lock)",)


def test_remote_info_asks_the_hub_for_an_adapters_files_at_the_locked_commit(tmp_path, monkeypatch):
    from aigo_apply.adapters import hub
    from aigo_apply.platforms.docker.planning import remote_info

    asked = []

    def fake_remote(repo, revision, file=None, timeout=10.0, with_config=False, kind="model"):
        asked.append((repo, revision, file, kind))
        return hub.Remote(repo, revision, C1, {"adapter_config.json": 10}, {})

    monkeypatch.setattr(hub, "remote", fake_remote)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    d = desired(tmp_path)
    seen = observed(d)
    seen.model_files[ADAPTER_DIR] = marker(C2, "adapter")
    lock = {"models": {"org/base@v1": {"commit": "c0ffee"}, "adapter:org/sql-lora@r1": {"commit": C1}}, "images": {}}
    answers = remote_info(d, seen, lock)
    assert asked == [("org/sql-lora", C1, None, "adapter")]  # the base model's folder is at its commit
    assert answers[KEY].pin == C1 and answers[KEY].commit == C1
    missing = remote_info(d, seen, {"models": {"org/base@v1": {"commit": "c0ffee"}}, "images": {}})
    assert (
        missing[KEY].blocker == "lock.missing" and missing[KEY].error == "adapter:org/sql-lora@r1 is not in aigo.lock"
    )


def test_every_marker_records_its_source_an_adapters_and_a_models_alike(tmp_path):
    from aigo_apply.adapters.hub import Remote, _verify_and_mark
    from aigo_apply.observe.markers import read_marker

    for kind, folder in (("adapter", tmp_path / "a"), ("model", tmp_path / "m")):
        folder.mkdir()
        (folder / "adapter_config.json").write_text("{}")
        found = Remote("org/x", "r1", C1, {"adapter_config.json": 2}, {})
        written = _verify_and_mark("org/x", "r1", folder, found, None, {}, kind)
        assert read_marker(folder) == written
        assert written["kind"] == kind and (written["repo"], written["revision"]) == ("org/x", "r1")
        assert is_complete(read_marker(folder), {"repo": "org/x", "revision": "r1", "kind": kind}, commit=C1)


def test_models_list_marks_an_adapter_and_names_the_model_that_uses_it(tmp_path):
    from aigo_apply.app.models import listing, render

    rows = listing(desired(tmp_path), tmp_path / "empty-store")
    assert [(r["folder"], r["used_by"], r.get("kind")) for r in rows] == [
        (ADAPTER_DIR, ["base"], "adapter"),
        (BASE_DIR, ["base"], None),
    ]
    assert render(rows).splitlines()[0] == (
        f"missing     LoRA adapter {ADAPTER_DIR}  (used by base; `aigo-apply models pull`)"
    )
