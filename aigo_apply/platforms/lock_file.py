"""Reading and writing `aigo.lock` beside the config file: the file's I/O, around plan/lockfile.py's
pure contract (its shape, drift, restores). Read by the one bounded reader (aigo_apply/safe_read.py),
written the one safe way (aigo_apply/safe_write.py)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from aigo_apply import safe_read, safe_write
from aigo_apply.json_types import JsonObject
from aigo_apply.plan.lockfile import NAME, parse, text_of


def path_for(config_file: str) -> Path:
    return Path(config_file).resolve().with_name(NAME)


def read(path: Path) -> JsonObject | None:
    """The lock file's checked data; None when there is none. Read by safe_read.LOCK's rules: a
    regular file of at most 4 MiB, never through a symbolic link (a config repository could commit
    one to a huge file or a device), never waiting on a FIFO."""
    raw = safe_read.read(path, safe_read.LOCK, str(path), missing_ok=True)
    return None if raw is None else parse(raw, path)


def write(path: Path, data: Mapping[str, object]) -> bool:
    """Write the one safe way; False (and nothing written) when the content is unchanged. Refused
    when the lock changed between this read and the write."""
    text = text_of(data)
    current = safe_write.read_current(path, str(path))
    if current == text:
        return False
    safe_write.write(path, text, expect=current, new_mode=0o644, what="lock file")
    return True
