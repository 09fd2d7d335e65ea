"""Every engine start apply saw through to serving, measured and kept: how long it took, what it spent
the time on (observe/start_log.measure, from the engine's own log lines), whether the compile cache
served it, on which image and when. The plan predicts how long a change takes a model away from
these (plan/downtime.py), and `status` shows each model's last start.

Labels cannot hold them (a container's labels are fixed when it is made, and a start is measured
after), so they live in the project's state folder, as failed starts do (platforms/docker/failed_starts.py):
STATE/PROJECT/starts/ALIAS.jsonl, one JSON line per start, oldest first, the newest KEEP kept, the
folder 0700 and the file 0600, written only by apply (the one safe write, aigo_apply/safe_write.py)
and read without following a link, at most MAX_FILE_BYTES (aigo_apply/safe_read.py). A line that is
not a record apply writes is skipped; `destroy` removes the folder with the project's cache volumes,
whose compiled graphs made the warm starts."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from aigo_apply import safe_write
from aigo_apply.adapters.runtime import Runtime
from aigo_apply.config.names import ALIAS_RE
from aigo_apply.desired import labels
from aigo_apply.desired.types import ContainerSpec
from aigo_apply.errors import AigoError
from aigo_apply.observe.start_log import StartRecord, measure
from aigo_apply.plan.types import Action
from aigo_apply.platforms.state_dir import STARTS
from aigo_apply.safe_read import BadData, json_value, read_checked

if TYPE_CHECKING:  # plan reads the records; only apply, which has a journal, writes them
    from aigo_apply.platforms.journal import Journal

FOLDER = STARTS
KEEP = 5  # per model: the plan needs the last start on an image, warm and cold
MAX_LINES = 20_000  # of the engine's log read for its phases (vLLM writes about 110 lines to serving)
MAX_FILE_BYTES = 64 * 1024  # a record is about 400 bytes
_STARTED = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z")


def path_of(state: Path, alias: str) -> Path:
    if not ALIAS_RE.match(alias):  # aliases are validated; this keeps a name from leaving the folder
        raise AigoError(f"refusing to keep a start record under the name {alias!r}")
    return state / FOLDER / f"{alias}.jsonl"


def take(
    runtime: Runtime,
    action: Action,
    container_id: str,
    container: ContainerSpec | None,
    seconds: float,
    now: datetime | None = None,
) -> StartRecord:
    """The record of the start that just ended serving in `seconds`: its log since its container
    started (a container started again keeps its earlier runs' lines before that), the image the
    reference names (a start is planned only for a container made from the image it names now)."""
    spec = action.spec or {}
    engine = str(spec.get("engine") or "vllm")
    started = _unix(runtime.state(container_id).get("StartedAt"))
    lines = runtime.log_lines(container_id, False, MAX_LINES, started)
    phases, cache = measure(lines, engine, seconds)
    image = action.image or (container.image if container else "")
    found = runtime.inspect_image(image) if image else None
    at = (now or datetime.now(UTC)).astimezone(UTC)
    return StartRecord(
        at=at.isoformat(timespec="seconds").replace("+00:00", "Z"),
        seconds=round(seconds, 2),
        phases=phases,
        cache=cache,
        image_id=str((found or {}).get("Id") or ""),
        image=image,
        engine=engine,
        spec_hash=container.labels.get(labels.SPEC_HASH) if container else None,
        kind=action.kind,
    )


def kept(
    runtime: Runtime,
    journal: Journal,
    state: Path,
    action: Action,
    container_id: str,
    container: ContainerSpec | None,
    seconds: float,
) -> StartRecord | None:
    """platforms/docker/model_steps.py, once an engine serves: its start taken and kept; one that cannot be is
    journaled (None), and the apply goes on."""
    if not action.model:
        return None
    try:
        record = take(runtime, action, container_id, container, seconds)
        keep(state, action.model, record)
    except (AigoError, OSError, ValueError) as exc:
        journal.record("start_record", action.address, "not kept", why=str(exc))
        return None
    return record


def keep(state: Path, alias: str, record: StartRecord) -> Path:
    """Add `record` to the model's file, keeping the newest KEEP; the file's path."""
    path = path_of(state, alias)
    lines = [r.to_dict() for r in reversed(read(state, alias))] + [record.to_dict()]
    text = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in lines[-KEEP:])
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise AigoError(f"cannot keep the start record in {path.parent}: {exc.strerror or exc}") from None
    safe_write.write(path, text, expect=safe_write.ANY, new_mode=0o600, what="start record")
    return path


def read(state: Path, alias: str) -> tuple[StartRecord, ...]:
    """The model's kept starts, newest first; () when there are none or the file cannot be read."""
    try:
        raw = read_checked(path_of(state, alias), _small_regular, MAX_FILE_BYTES)
    except (OSError, AigoError):
        return ()
    if len(raw) > MAX_FILE_BYTES:  # it grew while it was read: not a file apply wrote
        return ()
    out = []
    for line in raw.decode("utf-8", errors="replace").splitlines():
        try:
            record = StartRecord.from_dict(json_value(line, depth=4))
        except BadData:
            continue
        if record is not None:
            out.append(record)
    return tuple(reversed(out[-KEEP:]))


def read_all(state: Path, aliases: Iterable[str]) -> dict[str, tuple[StartRecord, ...]]:
    """The kept starts of each of `aliases` that has any: one small file read per model."""
    found = {alias: read(state, alias) for alias in sorted(set(aliases))}
    return {alias: records for alias, records in found.items() if records}


def newest(state: Path, alias: str) -> StartRecord | None:
    records = read(state, alias)
    return records[0] if records else None


def remove_all(state: Path) -> None:
    """destroy: the project's start records go with its cache volume."""
    shutil.rmtree(state / FOLDER, ignore_errors=True)


def _small_regular(info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
        raise OSError("not a start record file")


def _unix(text: object) -> float | None:
    """Docker's StartedAt (RFC 3339 in UTC, to the nanosecond) as a Unix time; None when it says
    nothing usable (a container never started says the year 1)."""
    found = _STARTED.fullmatch(text) if isinstance(text, str) else None
    if not found or found.group(1).startswith("0001-"):
        return None
    try:
        moment = datetime.fromisoformat(found.group(1) + "+00:00")
    except ValueError:
        return None
    return moment.timestamp() + float("0." + (found.group(2) or "0"))
