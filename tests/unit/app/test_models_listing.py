"""`models list` shows each folder with the source its marker records: a folder is used by the models
that need that very source; one that a model needs for another source is flagged (the plan blocks on
it), and an older layout's folder says where the store keeps its source now."""

from __future__ import annotations

import json
from pathlib import Path

from aigo_apply.app.models import listing, render
from aigo_apply.desired.model_store import MARKER, repo_dir


class Desired:
    """What listing reads of the desired state: the models' specs."""

    def __init__(self, store: Path, **revisions: str) -> None:
        self.store, self.revisions = store, revisions

    def specs(self):
        return {
            alias: {"source": {"repo": "org/m", "revision": rev}, "model_dir": str(repo_dir(self.store, "org/m", rev))}
            for alias, rev in self.revisions.items()
        }


def stored(folder: Path, revision: str, kind: str | None = None) -> None:
    folder.mkdir(parents=True)
    marker = {"repo": "org/m", "revision": revision, "commit": "1" * 40, "files": {"config.json": 2}}
    (folder / MARKER).write_text(json.dumps({**marker, "complete_repo": True, **({"kind": kind} if kind else {})}))


def test_each_folder_shows_its_recorded_source_and_a_mismatch_or_an_older_folder_is_flagged(tmp_path):
    store = tmp_path / "store"
    stored(store / "org--m" / "feature--x", "feature--x")  # the older layout's folder of feature--x
    stored(store / "org--m" / "main", "main")
    rows = listing(Desired(store, fx="feature/x", m="main", n="main"), store)
    by_folder = {Path(r["folder"]).relative_to(store).as_posix(): r for r in rows}
    older = by_folder["org--m/feature--x"]
    assert (older["repo"], older["revision"], older["used_by"]) == ("org/m", "feature--x", [])
    assert older["mismatch"] == "model fx needs org/m@feature/x"
    assert older["moved"] == str(store / "org--m" / "feature%2D%2Dx")
    assert by_folder["org--m/main"]["used_by"] == ["m", "n"] and "mismatch" not in by_folder["org--m/main"]
    assert "moved" not in by_folder["org--m/main"]
    text = render(rows)
    assert (
        "    MISMATCH: model fx needs org/m@feature/x here: the plan blocks until this folder is moved away or removed"
    ) in text
    assert f"    an older aigo-apply's folder: the store keeps this source in {older['moved']} now" in text
    # an adapter's folder below adapters/ is listed as one
    stored(store / "adapters" / "org--m" / "r1", "r1", "adapter")
    adapter = next(r for r in listing(Desired(store), store) if r.get("kind") == "adapter")
    assert adapter["folder"] == str(store / "adapters" / "org--m" / "r1") and "moved" not in adapter
