"""A model store written by the older layout (one folder per `ORG--NAME/REVISION`, a revision's `/`
as `--`, adapters beside models) keeps working: `apply` and `models pull` take a folder over, once, by
hard links, only where its marker records exactly the wanted source, and leave it whole for what still
mounts it; a folder whose marker records another source is neither used nor written over."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from aigo_apply.adapters import hub
from aigo_apply.desired.model_store import MARKER, is_complete, repo_dir
from aigo_apply.errors import AigoError, HubError
from aigo_apply.observe.markers import read_marker
from aigo_apply.platforms.docker.fetch_steps import download_folder

from helpers.fakes import FakeReporter

C1 = "1" * 40
FILES = {"config.json": b"{}", "model.safetensors": b"w" * 64}


def older_folder(store: Path, folder: str, revision: str, kind: str | None = None, files=FILES) -> Path:
    """A download as the older aigo-apply left it: its files and its marker (no kind for a model)."""
    path = store / folder
    path.mkdir(parents=True)
    for name, data in files.items():
        (path / name).write_bytes(data)
    marker = {
        "repo": "org/m",
        "revision": revision,
        "commit": C1,
        "files": {name: len(data) for name, data in files.items()},
        "sha256": {},
        "complete_repo": True,
        "downloaded_at": "2026-11-30T10:00:00Z",
        **({"kind": kind} if kind else {}),
    }
    (path / MARKER).write_text(json.dumps(marker))
    return path


def spec(store: Path, revision: str, kind: str = "model") -> dict:
    return {
        "repo": "org/m",
        "revision": revision,
        "file": None,
        "dest": str(repo_dir(store, "org/m", revision, kind)),
        "kind": kind,
    }


class Fetches:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __call__(self, repo, revision, dest, file, progress, pin=None, kind="model"):
        self.calls.append((repo, revision, str(dest), kind))
        return {"files": {}, "commit": C1}


@pytest.mark.parametrize(
    "revision, kind, older",
    [
        ("feature--x", "model", "org--m/feature--x"),  # a revision whose escaping changed
        ("r1", "adapter", "org--m/r1"),  # an adapter, which lay beside the models
    ],
)
def test_an_older_folder_recording_exactly_the_source_is_linked_over_once_and_left_whole(
    tmp_path, revision, kind, older
):
    store = tmp_path / "store"
    old = older_folder(store, older, revision, kind if kind == "adapter" else None)
    want, fetch, reporter = spec(store, revision, kind), Fetches(), FakeReporter()
    marker = download_folder(f"download.org/m@{revision}", want, reporter, fetch)
    assert fetch.calls == []  # nothing downloaded
    dest = Path(want["dest"])
    assert dest != old and marker is not None and marker["kind"] == kind and marker["commit"] == C1
    assert is_complete(read_marker(dest), want)
    for name in FILES:
        assert os.stat(dest / name).st_ino == os.stat(old / name).st_ino  # the same files: no copy
    assert (old / MARKER).exists() and read_marker(old)["revision"] == revision  # the old folder stays whole
    [(_, event)] = reporter.events
    assert event["outcome"] == "ok" and event["message"].startswith(
        f"{'adapter:' if kind == 'adapter' else ''}org/m@{revision} linked into {dest} from {old}, where an older aigo-apply kept it: nothing downloaded"
    )
    assert download_folder(f"download.org/m@{revision}", want, FakeReporter(), fetch) is None  # once
    assert fetch.calls == []


@pytest.mark.parametrize(
    "revision, older_revision, files, marker_files",
    [
        ("feature--x", "feature/x", FILES, None),  # the older folder holds the other revision
        ("feature--x", "feature--x", FILES, {"config.json": 3, "model.safetensors": 64}),  # a size it lacks
        ("feature--x", "feature--x", FILES, {"../../secret": 4}),  # a name that leads out of it
    ],
)
def test_an_older_folder_that_does_not_prove_the_source_is_never_taken(
    tmp_path, revision, older_revision, files, marker_files
):
    store = tmp_path / "store"
    (tmp_path / "secret").write_text("key!")
    old = older_folder(store, "org--m/feature--x", older_revision, files=files)
    if marker_files is not None:
        marker = json.loads((old / MARKER).read_text())
        (old / MARKER).write_text(json.dumps({**marker, "files": marker_files}))
    want, fetch = spec(store, revision), Fetches()
    download_folder(f"download.org/m@{revision}", want, FakeReporter(), fetch)
    assert fetch.calls == [("org/m", revision, want["dest"], "model")]  # downloaded as usual
    assert not Path(want["dest"], "secret").exists() and not list(store.rglob("secret"))


def test_a_folder_whose_marker_records_another_source_is_neither_used_nor_written_over(tmp_path, monkeypatch):
    store = tmp_path / "store"
    older_folder(store, "org--m/feature--x", "feature--x")  # where feature/x's folder is now
    want, fetch = spec(store, "feature/x"), Fetches()
    with pytest.raises(AigoError) as caught:
        download_folder("download.org/m@feature/x", want, FakeReporter(), fetch)
    assert fetch.calls == []
    assert str(caught.value) == (
        f"download.org/m@feature/x: {want['dest']} holds org/m@feature--x by its download marker, not "
        "org/m@feature/x (an older aigo-apply gave both one folder): it is neither used nor written over; "
        "move it away or remove it, then run the command again"
    )
    # the Hub download itself refuses too, before it asks the Hub anything (none answers here)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    for kind, named in (("model", "org/m@feature--x"), ("adapter", "org/m@feature--x")):
        with pytest.raises(HubError, match=f"holds {named} by its download marker"):
            hub.download("org/m", "feature/x" if kind == "model" else "feature--x", Path(want["dest"]), kind=kind)
    assert read_marker(Path(want["dest"]))["revision"] == "feature--x"
