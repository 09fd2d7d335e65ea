"""Rewriting the config file in place, the one way `fmt`, `image tag` and `import --write` do it: the
file is read once (a regular file only: never through a symlink, never a FIFO or device, which would
block or could be read only once), the edit is made from exactly those bytes, and the result is put
in place by aigo_apply/safe_write.py: checked as the file it would become, owner, group and mode
kept, and refused with nothing written when the file changed since it was read."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from aigo_apply import safe_write
from aigo_apply.config.file_read import MAX_FILE_BYTES, NO_SUCH_FILE
from aigo_apply.config.yaml_source import Source, load_bytes
from aigo_apply.errors import AigoError, ConfigFileError, ConfigInvalid, Problems, shown_path
from aigo_apply.observe.config_file import load_config


def read_config(path: Path, display: str) -> tuple[bytes, Source]:
    """The file's bytes (pass them to replace_config as `expect`) and what the project's reader reads in them."""
    raw = safe_write.read_current(path, display, limit=MAX_FILE_BYTES)
    if raw is None:
        raise ConfigFileError(display, NO_SUCH_FILE)
    return raw, load_bytes(raw, display)


def replace_config(path: Path, display: str, text: str, expect: bytes, check: Callable[[str], None]) -> None:
    """`check(tmp)` validates the written text and raises with its own words; nothing is written then."""
    safe_write.write(path, text, display, expect=expect, check=check, what="config file")


def replace_validated(
    path: Path,
    display: str,
    text: str,
    expect: bytes,
    invalid: Callable[[str], str],
    unreadable: Callable[[str], str],
) -> None:
    """Put `text` in place only if it validates as the file it would become: else nothing is written,
    and the problems are listed under `invalid(NAME)` (the file's name as shown), or a file that cannot
    be read is one line, `unreadable(ERROR)`; the temporary file's name never shows."""

    def check(tmp: str) -> None:
        shown = shown_path(display)  # the file's name stays on its line
        try:
            load_config(tmp)
        except ConfigInvalid as exc:
            raise Problems(invalid(shown), [p.format().replace(tmp, shown) for p in exc.problems]) from None
        except ConfigFileError as exc:
            raise AigoError(unreadable(str(exc).replace(tmp, shown))) from None

    replace_config(path, display, text, expect, check)
