"""Reads the bytes of a config file exactly once, whatever it is: a regular file, or a pipe such as
`-f /dev/stdin` or `-f <(...)`, which can be read only once (a second read sees nothing).

Every read is bounded. A regular file (also through a symbolic link: a config kept in a dotfiles
repository and linked into place is ordinary) is read by the one bounded reader
(aigo_apply/safe_read.py, CONFIG: judged before it is opened and again once open, opened without
waiting, at most 1 MiB). Anything else, the config being the one file that may be a pipe, is read
at most the size limit plus one byte (so /dev/zero is harmless) and for at most PIPE_DEADLINE_S
seconds (a FIFO nobody writes to would otherwise wait forever). A pipe's bytes are kept for the rest
of the process, so a command that needs the file twice (the validity cache, a second look) sees the
same bytes both times.

(Files a command writes, and the config a command rewrites, go through aigo_apply/safe_write.py;
whether another account could change a folder the tool downloads into is a host fact, read by
observe/host_paths.others_can_write.)
"""

from __future__ import annotations

import os
import select
import stat
import time
from pathlib import Path

from aigo_apply import safe_read
from aigo_apply.config.defaults import DEFAULT_FILE
from aigo_apply.errors import ConfigFileError, Unreadable

MAX_FILE_BYTES = safe_read.CONFIG.limit
PIPE_DEADLINE_S = 10.0

_piped: dict[str, bytes] = {}  # what was read from a pipe or device, by the name it was given


NO_SUCH_FILE = (
    "no such file: `aigo-apply init -f FILE` writes a starter file there (or name another with -f FILE / AIGO_FILE)"
)
NO_DEFAULT_FILE = "no aigo.yaml here: `aigo-apply init` writes a starter file (or -f FILE / AIGO_FILE)"


def no_such_file(display: str) -> str:
    """What to say of a config file that is not there: how to make one (`init`, which the wheel has,
    where a checkout's examples/ is not), or how to name another."""
    return NO_DEFAULT_FILE if display == DEFAULT_FILE else NO_SUCH_FILE


NOT_READABLE = "permission denied; make the file readable by this user"
TOO_LARGE = f"is larger than {MAX_FILE_BYTES} bytes (1 MiB), the limit for aigo.yaml files"


def read_bytes(path: Path, display: str) -> bytes:
    """The file's bytes (at most MAX_FILE_BYTES + 1), read once; OS failures become one clear line."""
    key = str(path)
    if key in _piped:
        return _piped[key]
    try:
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise ConfigFileError(display, "is a directory, not a YAML file; pass the file itself with -f/--file")
        if stat.S_ISREG(info.st_mode):
            return _read_regular(path, display)
        _piped[key] = _read_stream(path, display)
        return _piped[key]
    except FileNotFoundError:
        raise ConfigFileError(display, no_such_file(display)) from None
    except PermissionError:
        raise ConfigFileError(display, NOT_READABLE) from None
    except OSError as exc:
        raise ConfigFileError(display, f"cannot be read: {exc.strerror or exc}") from None


def _read_regular(path: Path, display: str) -> bytes:
    """A regular file by safe_read.CONFIG's rules; one swapped for a FIFO or device since the stat is
    refused, never waited on."""
    try:
        data = safe_read.read(path, safe_read.CONFIG, display)
    except Unreadable as exc:
        if exc.why == "size":
            raise ConfigFileError(display, TOO_LARGE) from None
        if exc.missing or exc.why == "permission":
            raise ConfigFileError(display, no_such_file(display) if exc.missing else NOT_READABLE) from None
        raise ConfigFileError(display, exc.reason + (f"; {exc.fix}" if exc.fix else "")) from None
    assert data is not None
    return data


def _read_stream(path: Path, display: str) -> bytes:
    """A pipe, FIFO or device: never a terminal (nobody types a config), never past the deadline."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO without a writer must not block the open
    try:
        if os.isatty(fd):
            raise ConfigFileError(display, "is a terminal; pipe the file in instead (-f /dev/stdin < aigo.yaml)")
        return _drain(fd, display)
    finally:
        os.close(fd)


def _drain(fd: int, display: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    deadline = time.monotonic() + PIPE_DEADLINE_S
    while size <= MAX_FILE_BYTES:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise ConfigFileError(
                display, f"sent no end of file within {PIPE_DEADLINE_S:g} seconds; is anything writing to it?"
            )
        try:
            chunk = os.read(fd, MAX_FILE_BYTES + 1 - size)
        except BlockingIOError:
            continue
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
