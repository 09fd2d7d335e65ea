"""Reading and writing `aigo.lock` beside the config file: the file's I/O, around plan/lockfile.py's
pure contract (its shape, drift, restores). Written the one safe way (aigo_apply/safe_write.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aigo_apply import safe_write
from aigo_apply.errors import AigoError
from aigo_apply.plan.lockfile import NAME, parse, text_of


def path_for(config_file: str) -> Path:
    return Path(config_file).resolve().with_name(NAME)


def read(path: Path) -> dict[str, Any] | None:
    """The lock file's checked data; None when there is none."""
    if not path.is_file():
        return None
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise AigoError(
            f"{path}: not a readable lock file ({exc}); delete it and apply again to write a new one"
        ) from None
    return parse(raw, path)


def write(path: Path, data: dict[str, Any]) -> bool:
    """Write the one safe way; False (and nothing written) when the content is unchanged. Refused
    when the lock changed between this read and the write."""
    text = text_of(data)
    current = safe_write.read_current(path, str(path))
    if current == text:
        return False
    safe_write.write(path, text, expect=current, new_mode=0o644, what="lock file")
    return True
