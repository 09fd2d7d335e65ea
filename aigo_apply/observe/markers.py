"""The model store's download markers as this machine has them: each folder's marker read (bounded,
never through a link or a FIFO) and taken in the shape the tool writes it
(desired/model_store.marker_shape), or None; and whether a download folder is one the tool may write
into and mount (no link where the store lays out real folders). The one read of the model store
outside adapters/."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from aigo_apply import safe_read
from aigo_apply.desired.model_store import (
    MARKER,
    Download,
    downloads,
    is_complete,
    kind_of,
    legacy_dir,
    marker_shape,
    store_depth,
)
from aigo_apply.desired.spec import ModelSpec
from aigo_apply.errors import Unreadable


def read_marker(folder: Path) -> dict[str, object] | None:
    """The folder's download marker in the shape the tool writes it, or None (not downloaded) when it
    is missing, unreadable, not a regular file (a symlink, a FIFO: never waited on) or of another
    shape: a damaged marker means the folder is downloaded and verified again, never a traceback."""
    return marker_or_why(folder)[0]


def marker_or_why(folder: Path) -> tuple[dict[str, object] | None, str | None]:
    """(the marker, None), (None, None) when there is none, or (None, why it is no marker), read by the
    one bounded reader (safe_read.MARKER: a regular file, never through a link, its JSON nested at most
    8 levels with no number of more than 30 digits)."""
    path = folder / MARKER
    try:
        raw = safe_read.read(path, safe_read.MARKER, str(path), missing_ok=True)
        data = safe_read.json_value(raw, safe_read.MARKER.depth) if raw is not None else None
    except Unreadable as exc:
        return None, exc.reason
    except safe_read.BadData as exc:
        return None, str(exc)
    if data is None:
        return None, None
    shaped = marker_shape(data)
    return (shaped, None) if shaped is not None else (None, "is not in the shape aigo-apply writes")


def read_markers(specs: Mapping[str, ModelSpec]) -> dict[str, dict[str, object]]:
    """The markers of every folder the models download into, their repo LoRA adapters' too, and of
    the folder the older store layout gave each (model_store.legacy_dir) where that is another ({}
    where there is none)."""
    return markers_of(downloads(specs))


def markers_of(needs: Iterable[Download]) -> dict[str, dict[str, object]]:
    """read_markers for the downloads `needs` (model_store.downloads of built specs, or a file's repo
    adapters found before its build: desired/adapters.adapter_downloads)."""
    out: dict[str, dict[str, object]] = {}
    for need in needs:
        for folder in (need["dest"], legacy_dir(need)):
            if folder is not None and folder not in out:
                out[folder] = read_marker(Path(folder)) or {}
    return out


MAX_STORE_ENTRIES = 10_000  # a model's folder holds a few dozen files; one far larger is no download of ours


def store_link(dest: Path, inside: bool = True, depth: int = 2) -> str | None:
    """Why the download folder `dest` (STORE/ORG--NAME/REVISION, or STORE/adapters/ORG--NAME/REVISION:
    `depth` levels below the store, model_store.store_depth) may not be written into or mounted, or
    None. The store lays out real folders: where one of those levels is a symbolic link (a config
    repository can commit one), a download would write, and an engine mount, wherever the link leads.
    With `inside`, a link or a special file anywhere inside `dest` counts too (the Hub client writes its
    partial files and metadata under it). A missing folder is fine: the download makes it."""
    for level in [*reversed(dest.parents[: depth - 1]), dest]:
        try:
            mode = os.lstat(level).st_mode
        except FileNotFoundError:
            return None
        except OSError as exc:
            return f"{level} cannot be read ({exc.strerror})"
        if stat.S_ISLNK(mode):
            return f"{level} is a symbolic link (to {os.readlink(level)})"
        if not stat.S_ISDIR(mode):
            return f"{level} is not a folder"
    if not inside:
        return None
    seen = 0
    for root, folders, files in os.walk(dest):  # links to folders are listed, never entered
        for name in folders + files:
            seen += 1
            if seen > MAX_STORE_ENTRIES:
                return f"{dest} holds more than {MAX_STORE_ENTRIES} entries"
            path = os.path.join(root, name)
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue  # gone since it was listed
            if stat.S_ISLNK(mode):
                return f"{path} is a symbolic link (to {os.readlink(path)})"
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                return f"{path} is not a regular file"
    return None


def store_link_problems(
    specs: Mapping[str, ModelSpec], markers: Mapping[str, Mapping[str, object]]
) -> dict[str, list[str]]:
    """alias -> why the download folders its model (or an adapter) uses may not be written into or
    mounted (store_link). A folder that is complete is only mounted: its inside is not walked."""
    out: dict[str, list[str]] = {}
    for need in downloads(specs):
        done = is_complete(markers.get(need["dest"]), need)
        why = store_link(Path(need["dest"]), inside=not done, depth=store_depth(kind_of(need)))
        if why:
            for alias in need["models"]:
                out.setdefault(alias, []).append(f"{need['repo']}@{need['revision']}: {why}")
    return out
