"""Replacing a config file with an edited text, the one way `image tag`, `import --write` and `fmt`
do it: the text is written beside the file, checked as the file it would become (the caller's own
check, which raises with its own words), given the file's mode and renamed over it. A failure at any
step leaves the file as it was and no temporary file behind."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from aigo_apply.errors import AigoError


def replace_config(
    target: Path,
    display: str,
    text: str,
    check: Callable[[str], None],
    mode: int | None,
    before_rename: Callable[[str], None] | None = None,
    tail: str = "",
) -> None:
    """`check(tmp)` validates the written text; `before_rename(tmp)` does any last step (an owner, a
    check that the file is still the one read); `tail` ends the I/O error messages."""
    try:
        handle, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise AigoError(f"{display}: cannot write beside it: {exc.strerror or exc}{tail}") from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        check(tmp)
        if mode is not None:
            os.chmod(tmp, mode)
        if before_rename is not None:
            before_rename(tmp)
        os.replace(tmp, target)
    except OSError as exc:
        raise AigoError(f"{display}: cannot write it: {exc.strerror or exc}{tail}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
