"""A download taken over once from the folder the older model store layout gave it
(model_store.legacy_dir: `ORG--NAME/REVISION` with a revision's `/` as `--`, adapters beside models),
so that upgrading aigo-apply downloads nothing again. Only a folder whose marker records exactly the
wanted source is taken (the caller checks that: model_store.is_complete), never one that merely sits
where the source would have gone, since many sources shared such folders.

Its files are hard-linked into the new folder (where the file system has no hard links, it is downloaded
instead: no byte of the older folder is read), and the marker is written last, so an interrupted
take-over is a folder without a marker: not downloaded.
The old folder stays whole: a container that mounts it, or one a rollback starts again, still finds
its files there; `models list` shows it as used by nothing once nothing does.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from aigo_apply import safe_write
from aigo_apply.desired.model_store import MARKER, kind_of, store_depth
from aigo_apply.errors import AigoError
from aigo_apply.json_types import JsonValue, obj
from aigo_apply.observe.markers import store_link


def take_over(
    need: Mapping[str, object], legacy: Path, marker: Mapping[str, object]
) -> tuple[dict[str, object] | None, str]:
    """Link the files `marker` (the older folder `legacy`'s, recording `need`'s source) lists into
    `need`'s folder and mark it: (its new marker, ""), or (None, why not) when the older folder cannot
    be taken as its marker says (a link in it or at the new folder, a file missing or of another size,
    a name that leads out of it): then the caller downloads it as usual."""
    dest = Path(str(need["dest"]))
    why = store_link(legacy, inside=True) or store_link(dest, inside=True, depth=store_depth(kind_of(need)))
    if why:
        return None, why
    files: dict[str, JsonValue] = dict(obj(marker.get("files")))  # an object: is_complete held the marker to it
    for name, size in files.items():
        parts = PurePosixPath(name).parts
        if not parts or PurePosixPath(name).is_absolute() or any(p in (".", "..") for p in parts) or name == MARKER:
            return None, f"its marker names the file {name!r}, which is not one of a download"
        try:
            found = os.lstat(legacy / name)
        except OSError as exc:
            return None, f"{legacy / name} cannot be read ({exc.strerror})"
        if not stat.S_ISREG(found.st_mode) or found.st_size != size:
            return None, f"{legacy / name} is not the file of {size} bytes its marker lists"
    try:
        for name in files:
            source, target = legacy / name, dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if os.path.lexists(target):
                os.unlink(target)
            os.link(source, target, follow_symlinks=False)  # (a link in the older folder was refused above)
        taken = {**marker, "kind": kind_of(need)}
        text = json.dumps(taken, indent=1) + "\n"
        safe_write.write(dest / MARKER, text, expect=safe_write.ANY, new_mode=0o644, what="download marker")
    except (OSError, AigoError) as exc:
        return None, f"its files could not be linked into {dest} ({getattr(exc, 'strerror', None) or exc})"
    return taken, ""
