"""The model store's download markers as this machine has them: each folder's marker read (bounded,
never through a link or a FIFO) and taken in the shape the tool writes it
(desired/model_store.marker_shape), or None. The one read of the model store outside adapters/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aigo_apply import safe_write
from aigo_apply.desired.model_store import MARKER, MAX_MARKER_BYTES, downloads, marker_shape
from aigo_apply.errors import AigoError


def read_marker(folder: Path) -> dict[str, Any] | None:
    """The folder's download marker in the shape the tool writes it, or None (not downloaded) when it
    is missing, unreadable, not a regular file (a symlink, a FIFO: never waited on) or of another
    shape: a damaged marker means the folder is downloaded and verified again, never a traceback."""
    try:
        raw = safe_write.read_current(folder / MARKER, str(folder / MARKER), limit=MAX_MARKER_BYTES)
        data = json.loads(raw) if raw is not None else None
    except (AigoError, ValueError, RecursionError):
        return None
    return marker_shape(data)


def read_markers(specs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The markers of every folder the models download into, their repo LoRA adapters' too ({} where
    there is none)."""
    return {d["dest"]: read_marker(Path(d["dest"])) or {} for d in downloads(specs)}
