"""The one way aigo-apply reads a file that comes from outside it: a config repository, your home, the
model store. `aigo.lock`, saved plans, `.baimodel` definitions, a kubeconfig and every file it names,
secret files, the Hugging Face token file, the model store's download markers and a model folder's
metadata files are all read here (the config file too, through config/file_read.py, which also takes a
pipe for `-f /dev/stdin`).

Why one module: such a file may be a committed symbolic link to a huge file or a device, a FIFO
nobody writes to, or JSON nested a million levels deep; each of those once ended in a hang, a
traceback or gigabytes of memory. So, for every kind of file (`Kind`: how messages name it, the
most bytes it may have, whether a link at its path is followed, how deep its JSON may nest, what to do):
- only a regular file is read: a FIFO, socket, device or folder is refused before it is opened
  (stat, or lstat where links are not followed) and again once open (fstat: the open file must be
  the one judged, same device and inode); the open never waits (O_NONBLOCK), never takes a terminal
  (O_NOCTTY), and never follows a link where the kind does not (O_NOFOLLOW);
- at most `limit` bytes are read, whatever the file's size says (a file can grow while it is read);
- JSON is parsed strictly (`json_value`): its nesting bounded, integers of at most MAX_INT_DIGITS
  digits, floats finite, NaN and Infinity refused; and parsed YAML is walked once within bounds
  (`check_tree`: depth, and the count of values, which anchors and aliases can multiply);
- every refusal is one Unreadable naming the file, why, and what to do, never a traceback.

Which kinds follow links, and why, is written in docs/router-and-security.md ("Files read from
outside"). Files the tool writes go through aigo_apply/safe_write.py; package data through
resources.py.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from aigo_apply.errors import AigoError, Unreadable

MIB = 1024 * 1024
MAX_INT_DIGITS = 30  # no count, size or id a file of ours holds comes near 10**30
_OPEN = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class Kind:
    """What one kind of file from outside may be: `what` names it in messages ("the lock file"),
    `limit` is the most bytes read, `links` whether a symbolic link at the path is followed,
    `depth` how deep its JSON or YAML may nest, `fix` what to do when it is refused."""

    what: str
    limit: int
    links: bool
    fix: str
    depth: int = 32


# Each kind of file read from outside, with its rules (docs/router-and-security.md lists them).
CONFIG = Kind(  # -f, AIGO_FILE, ./aigo.yaml: a pipe too, through config/file_read.py
    "an aigo.yaml", MIB, True, "pass the file itself with -f/--file (a pipe works too: -f /dev/stdin < aigo.yaml)"
)
LOCK = Kind(
    "the lock file", 4 * MIB, False, "restore aigo.lock from git, or delete it and apply again to write a new one"
)
PLAN = Kind("the plan file", 16 * MIB, True, "make a new one with `aigo-apply plan --out` (nothing was changed)")
MODEL_DEFINITION = Kind(
    "a model definition", MIB, True, "give the file that `aigo-apply export ALIAS --out NAME.baimodel` wrote"
)
KUBECONFIG = Kind(
    "the kubeconfig",
    16 * MIB,
    True,
    "fix the file, or point KUBECONFIG (or kubernetes.context in aigo.yaml) at a working one",
    depth=64,
)
KUBE_CREDENTIAL = Kind(
    "a file the kubeconfig names", 4 * MIB, True, "point the kubeconfig's entry at the file itself, or fix the file"
)
SECRET = Kind(  # at the path as resolved and judged by platforms/secrets.py: never a link by then
    "the secret file",
    64 * 1024,
    False,
    "keep the secret in a regular file of its own (e.g. ~/.aigo/secrets/NAME, mode 600) and point from_file there",
)
HUB_TOKEN = Kind(  # $HF_TOKEN_PATH, $HF_HOME/token: read for huggingface_hub (adapters/hub_env.py)
    "the Hugging Face token file",
    64 * 1024,
    True,
    "keep the token in a regular file (`hf auth login` writes one), point HF_TOKEN_PATH at it, or export HF_TOKEN",
)
MARKER = Kind(
    "the download marker", 16 * MIB, False, "`aigo-apply models pull` downloads and verifies the folder again", 8
)


def shown(path: Path | str) -> str:
    """A path as an error names it: as given when printable, else Python's quoted form."""
    text = str(path)
    return text if text.isprintable() else repr(text)


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words (a stat's mode)."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def size_text(limit: int) -> str:
    """A byte limit in words: 16 MiB, 64 KiB, 100 bytes."""
    if limit >= MIB and limit % MIB == 0:
        return f"{limit // MIB} MiB"
    if limit >= 1024 and limit % 1024 == 0:
        return f"{limit // 1024} KiB"
    return f"{limit} bytes"


def home_path(text: str, what: str) -> Path:
    """`text` (a path from an option, a variable or a file) with a leading `~` or `~USER` expanded; a
    `~USER` that names no account here is one AigoError naming `what` ("HF_HOME", "the config file")
    instead of pathlib's RuntimeError."""
    try:
        return Path(text).expanduser()
    except RuntimeError:
        user = text.split("/", 1)[0]
        raise AigoError(
            f"{what} {shown(text)}: {shown(user)} names no account on this host, so it has no home folder; "
            "write the path out in full"
        ) from None


def read(path: Path | str, kind: Kind, display: str | None = None, *, missing_ok: bool = False) -> bytes | None:
    """The bytes of the regular file at `path` by `kind`'s rules; None when there is no such file and
    `missing_ok`. Every refusal (and every OS failure) is one Unreadable."""
    name = display or shown(path)
    try:
        with opened(path, kind, name) as f:
            try:
                data = read_at_most(f.fileno(), kind.limit)
            except OSError as exc:
                raise _refusal(name, exc, kind) from None
    except Unreadable as exc:
        if exc.missing and missing_ok:
            return None
        raise
    if len(data) > kind.limit:  # it grew since it was judged
        raise Unreadable(name, f"is larger than {size_text(kind.limit)}, more than {kind.what} holds", kind.fix, "size")
    return data


@contextmanager
def opened(
    path: Path | str,
    kind: Kind,
    display: str | None = None,
    judge: Callable[[os.stat_result], str | None] | None = None,
) -> Iterator[BinaryIO]:
    """`path` open for reading by `kind`'s rules: judged before it is opened and again once open
    (its size too; read it with `read_at_most`, which bounds the reading). `judge(stat)` may add a
    refusal of the caller's: a reason, or None."""
    name = display or shown(path)
    stack = ExitStack()
    try:  # only the opening is mapped: what the caller's block raises is its own
        f = stack.enter_context(judged(path, kind.links, lambda info: _check(path, name, info, kind, judge)))
    except (OSError, ValueError) as exc:
        raise _refusal(name, exc, kind) from None
    with stack:
        yield f


@contextmanager
def judged(path: Path | str, links: bool, check: Callable[[os.stat_result], None]) -> Iterator[BinaryIO]:
    """`path` open for reading once `check` (which raises) passed it twice: on stat (lstat without
    `links`) before it is opened, so a FIFO or device is never opened, and on fstat once open, which
    must be the same file (device and inode). Opened without waiting, without taking a terminal, and
    without following a link unless `links`. OSError as the system says it."""
    before = os.stat(path) if links else os.lstat(path)
    check(before)
    fd = os.open(path, _OPEN | (0 if links else os.O_NOFOLLOW))
    try:
        info = os.fstat(fd)
        if (info.st_dev, info.st_ino) != (before.st_dev, before.st_ino):
            raise OSError(errno.ESTALE, "it was replaced while it was read; run the command again")
        check(info)
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with f:
        yield f


def read_checked(path: Path | str, check: Callable[[os.stat_result], None], limit: int, links: bool = False) -> bytes:
    """At most `limit` + 1 bytes of `path`, opened by `judged`'s rules with `check`. OSError as the
    system says it."""
    with judged(path, links, check) as f:
        return read_at_most(f.fileno(), limit)


def _check(
    path: Path | str,
    name: str,
    info: os.stat_result,
    kind: Kind,
    judge: Callable[[os.stat_result], str | None] | None,
) -> None:
    if stat.S_ISLNK(info.st_mode):
        try:
            points = f" (to {shown(os.readlink(path))})"
        except (OSError, ValueError):
            points = ""
        raise Unreadable(name, f"is a symbolic link{points}; {kind.what} is never read through one", kind.fix, "link")
    if not stat.S_ISREG(info.st_mode):
        raise Unreadable(name, f"is {file_kind(info.st_mode)}, not a regular file, so it is not read", kind.fix, "kind")
    if info.st_size > kind.limit:
        raise Unreadable(name, f"is larger than {size_text(kind.limit)}, more than {kind.what} holds", kind.fix, "size")
    why = judge(info) if judge is not None else None
    if why:
        raise Unreadable(name, why, kind.fix, "judge")


def _refusal(name: str, exc: OSError | ValueError, kind: Kind) -> Unreadable:
    """An OS failure (or a path no system call takes) as one Unreadable."""
    if isinstance(exc, FileNotFoundError):
        return Unreadable(name, f"cannot be read: {exc.strerror or 'no such file'}", kind.fix, "missing")
    if getattr(exc, "errno", None) == errno.ELOOP and not kind.links:  # became a link after the lstat
        return Unreadable(name, f"is a symbolic link; {kind.what} is never read through one", kind.fix, "link")
    if isinstance(exc, PermissionError):
        return Unreadable(name, "cannot be read: permission denied", kind.fix, "permission")
    if isinstance(exc, ValueError):
        return Unreadable(name, "cannot be read: it holds a character no file name can hold", kind.fix)
    return Unreadable(name, f"cannot be read: {exc.strerror or type(exc).__name__}", kind.fix)


def read_at_most(fd: int, limit: int) -> bytes:
    """At most `limit` + 1 bytes of an open file (so a caller can tell one over the limit)."""
    chunks, size = [], 0
    while size <= limit and (chunk := os.read(fd, min(MIB, limit + 1 - size))):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


# -- what is parsed from such a file ----------------------------------------------------------------


class BadData(ValueError):
    """Text that is not the bounded JSON or YAML a file from outside may hold: what is wrong, in
    words that follow the file's name ("is not JSON (...)", "nests deeper than 32 levels"); `line`
    and `column` where JSON's parser knows them (else None)."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.line, self.column = line, column


def json_value(
    raw: bytes | str,
    depth: int = 32,
    *,
    unique: bool = False,
    constants: bool = False,
    max_digits: int = MAX_INT_DIGITS,
) -> Any:
    """`raw` (UTF-8) as JSON, bounded: lists and objects at most `depth` levels deep, integers of at
    most `max_digits` digits, finite floats; NaN and Infinity refused (or read as None with
    `constants`: model files written by Python may hold them), a key twice in one object refused with
    `unique`. Every refusal is one BadData (a ValueError), never RecursionError or a digit-limit error."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as exc:
        raise BadData(f"is not UTF-8 text (byte {exc.start})") from None
    try:
        value = json.loads(
            text,
            parse_int=lambda digits: _int(digits, max_digits),
            parse_float=_float,
            parse_constant=_none if constants else _no_constant,
            object_pairs_hook=_unique if unique else None,
        )
    except json.JSONDecodeError as exc:
        raise BadData(f"is not JSON ({exc.msg})", exc.lineno, exc.colno) from None
    except RecursionError:
        raise BadData(f"nests deeper than {depth} levels") from None
    check_tree(value, depth)
    return value


def _int(digits: str, most: int) -> int:
    count = len(digits.lstrip("-"))
    if count > most:
        raise BadData(f"holds a number of {count} digits, more than the {most} any number here may have")
    return int(digits)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadData(f"holds {text[:40]}, which is not a finite number")
    return value


def _none(word: str) -> Any:
    return None


def _no_constant(word: str) -> Any:
    raise BadData(f"holds {word}, which is not a number")


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise BadData(f"has the key {key[:64]!r} twice in one object")
        out[key] = value
    return out


MAX_VALUES = 1_000_000  # values a parsed YAML document may hold, counting each use of an alias


def check_tree(value: Any, depth: int, most: int | None = None) -> None:
    """BadData when `value` (parsed JSON or YAML) has a list or mapping more than `depth` levels
    deep, or (with `most`) holds more than `most` values, counting a YAML alias each time it is used
    (anchors that multiply are refused before anything else walks them). Iterative; it stops at the
    first excess."""
    if not isinstance(value, (dict, list)):
        return
    stack: list[tuple[Any, int]] = [(value, 1)]
    seen = 0
    while stack:
        node, level = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        seen += len(children)
        if most is not None and seen > most:
            raise BadData(f"holds more than {most} values (anchors and aliases that multiply, or simply too many)")
        inner = [child for child in children if isinstance(child, (dict, list))]
        if inner and level >= depth:
            raise BadData(f"nests deeper than {depth} levels")
        stack.extend((child, level + 1) for child in inner)
