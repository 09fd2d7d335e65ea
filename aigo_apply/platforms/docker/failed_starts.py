"""The evidence of a failed engine start, kept before the failed container is removed.

apply removes an engine that did not become ready (and, for a replace, puts the old one back), so
its container and its log would be gone with it; vLLM's start-up errors (CUDA, NCCL, an out-of-memory
in the profiling run) are routinely longer than the lines a report can show. So the whole log, as
far as the bounds below go and with every secret redacted (platforms/secrets.redact), is written to the
project's state folder with what it was: when, which container, image and command line, why apply
gave up and the line that says what went wrong (observe/engine_log.root_cause).

Layout: STATE/PROJECT/failed-starts/ALIAS/STAMP.log (the log) and STAMP.json (what it was), STAMP
a UTC time that sorts; the newest KEEP per model are kept. `aigo-apply logs ALIAS --failed` prints
the newest, `status` names it. Files are written 0600 (a log may hold what redaction cannot know)
and read back without following links, at most MAX_LOG_BYTES."""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypedDict

from aigo_apply.adapters.runtime import Runtime
from aigo_apply.config.names import ALIAS_RE
from aigo_apply.desired.types import ContainerSpec
from aigo_apply.errors import AigoError, NotReady
from aigo_apply.observe.engine_log import root_cause
from aigo_apply.plan.types import Action
from aigo_apply.platforms.journal import Journal
from aigo_apply.platforms.secrets import redact
from aigo_apply.platforms.state_dir import FAILED_STARTS
from aigo_apply.safe_read import read_checked

FOLDER = FAILED_STARTS
KEEP = 5  # per model
MAX_LINES = 20_000  # the log's last lines fetched from Docker
MAX_LINE_CHARS = 8192  # a longer line is cut (a progress bar redrawn without a line feed)
MAX_LOG_BYTES = 4 * 1024 * 1024  # of the kept log: its end, where start-up errors are
MAX_META_BYTES = 64 * 1024


class FailedStartRecord(TypedDict):
    """A failed start as its STAMP.json holds it (FailedStart.to_dict)."""

    alias: str
    at: str
    container: str
    image: str
    command: list[str]
    why: str
    error: str | None
    exit_code: int | None
    lines: int
    log: str


@dataclass(frozen=True)
class FailedStart:
    """What the state folder keeps of one failed start (STAMP.json), and where its log is."""

    alias: str
    at: str  # ISO 8601, UTC
    container: str
    image: str
    command: tuple[str, ...]
    why: str
    error: str | None  # the root cause line, if the log has one
    exit_code: int | None
    lines: int
    log: Path

    def to_dict(self) -> FailedStartRecord:
        return {
            "alias": self.alias,
            "at": self.at,
            "container": self.container,
            "image": self.image,
            "command": list(self.command),
            "why": self.why,
            "error": self.error,
            "exit_code": self.exit_code,
            "lines": self.lines,
            "log": str(self.log),
        }


def model_folder(state: Path, alias: str) -> Path:
    if not ALIAS_RE.match(alias):  # aliases are validated; this keeps a name from leaving the folder
        raise AigoError(f"refusing to keep a failed start under the name {alias!r}")
    return state / FOLDER / alias


def keep(
    state: Path,
    alias: str,
    *,
    container: str,
    image: str,
    command: Iterable[str],
    why: str,
    exit_code: int | None,
    log_lines: Iterable[str],
    now: datetime | None = None,
) -> FailedStart:
    """Write the failed start's log and record, prune the model's oldest beyond KEEP; the record."""
    lines = _bounded([redact(line) for line in _last(log_lines)])
    at = (now or datetime.now(UTC)).astimezone(UTC)
    stamp = at.strftime("%Y%m%dT%H%M%S.%fZ")
    folder = model_folder(state, alias)
    record = FailedStart(
        alias=alias,
        at=at.isoformat(timespec="seconds").replace("+00:00", "Z"),
        container=container,
        image=image,
        command=tuple(redact(part) for part in command),
        why=redact(why),
        error=root_cause(lines),
        exit_code=exit_code,
        lines=len(lines),
        log=folder / f"{stamp}.log",
    )
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        _write_private(record.log, "".join(line + "\n" for line in lines))
        _write_private(folder / f"{stamp}.json", json.dumps(record.to_dict(), ensure_ascii=False, indent=1) + "\n")
    except OSError as exc:
        raise AigoError(f"cannot keep the failed start's log in {folder}: {exc.strerror or exc}") from None
    _prune(folder)
    return record


def kept(
    runtime: Runtime,
    journal: Journal,
    state: Path,
    action: Action,
    container_id: str,
    container: ContainerSpec | None,
    exc: NotReady,
) -> NotReady:
    """Keep the failed engine's log (before apply removes it) and journal where; the same failure,
    its message saying what the log says went wrong and how to read the whole log. `container`:
    what apply created (None for a start of an existing container: its command line is asked)."""
    if exc.interrupted or not action.model:
        return exc
    alias = action.model
    try:
        if container is not None:
            name, image, command = container.name, container.image, (container.entrypoint or ()) + container.command
        else:
            config = runtime.container_config(container_id)
            name, image, command = action.container or container_id, action.image or "", tuple(config.get("cmd") or ())
        record = keep(
            state,
            alias,
            container=name,
            image=image,
            command=command,
            why=str(exc),
            exit_code=exc.container_exit_code,
            log_lines=runtime.log_lines(container_id, False, MAX_LINES, None),
        )
    except AigoError as again:
        return _noted(exc, f"; its log could not be kept ({again})")
    journal.record("failed_start", action.address, "kept", log=str(record.log), error=record.error)
    said = f"; the engine's log says: {record.error}" if record.error else ""
    return _noted(exc, f"{said}; its whole log ({record.lines} lines) is kept: aigo-apply logs {alias} --failed")


def _noted(exc: NotReady, words: str) -> NotReady:
    """`exc` with `words` added to its message."""
    return NotReady(str(exc) + words, exc.log_tail, exc.container_exit_code, exc.interrupted)


def newest(state: Path, alias: str) -> FailedStart | None:
    """The model's newest kept failed start; None when there is none (or its record is unreadable)."""
    try:
        folder = model_folder(state, alias)
        names = sorted((n for n in os.listdir(folder) if n.endswith(".json")), reverse=True)
    except (OSError, AigoError):
        return None
    for name in names:
        found = _read_record(folder / name)
        if found is not None:
            return found
    return None


def read_log(record: FailedStart) -> str:
    """The kept log's text (bounded; a regular file in the model's folder only)."""
    try:
        data = read_checked(record.log, _regular, MAX_LOG_BYTES + MAX_LINE_CHARS)
    except OSError as exc:
        raise AigoError(f"cannot read the kept log {record.log}: {exc.strerror or exc}") from None
    return data.decode("utf-8", errors="replace")


def remove_all(state: Path) -> None:
    """destroy: the project's kept failed starts go with it."""
    shutil.rmtree(state / FOLDER, ignore_errors=True)


def _last(log_lines: Iterable[str]) -> list[str]:
    out: list[str] = []
    for line in log_lines:
        out.append(line[:MAX_LINE_CHARS])
        if len(out) > 2 * MAX_LINES:
            del out[:-MAX_LINES]
    return out[-MAX_LINES:]


def _bounded(lines: list[str]) -> list[str]:
    """The last lines that fit MAX_LOG_BYTES (the end of a log is where a start-up error is)."""
    size, first = 0, len(lines)
    while first > 0 and size + len(lines[first - 1].encode("utf-8", "replace")) + 1 <= MAX_LOG_BYTES:
        first -= 1
        size += len(lines[first].encode("utf-8", "replace")) + 1
    return lines[first:]


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
    with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as f:
        f.write(text)


def _prune(folder: Path) -> None:
    try:
        stamps = sorted({n.rsplit(".", 1)[0] for n in os.listdir(folder) if n.endswith((".json", ".log"))})
    except OSError:
        return
    for stamp in stamps[:-KEEP]:
        for suffix in (".json", ".log"):
            try:
                os.unlink(folder / f"{stamp}{suffix}")
            except OSError:
                pass


def _regular(info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise OSError("not a regular file")


def _read_record(path: Path) -> FailedStart | None:
    try:
        raw = json.loads(read_checked(path, _regular, MAX_META_BYTES)[: MAX_META_BYTES + 1])
        log = path.with_suffix(".log")
        return FailedStart(
            alias=str(raw["alias"]),
            at=str(raw["at"]),
            container=str(raw["container"]),
            image=str(raw["image"]),
            command=tuple(str(p) for p in raw.get("command") or ()),
            why=str(raw["why"]),
            error=None if raw.get("error") is None else str(raw["error"]),
            exit_code=raw["exit_code"] if type(raw.get("exit_code")) is int else None,  # `true` is no exit code
            lines=raw["lines"] if type(raw.get("lines")) is int else 0,
            log=log,
        )
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None
