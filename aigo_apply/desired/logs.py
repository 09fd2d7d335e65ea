"""Bounded logs for every container aigo-apply makes. Without a limit Docker's json-file driver keeps
all a container has printed: an engine writes a line or two per request (vLLM about 229 bytes, some
5.9 GB a month at 10 requests a second) and a chatty one far more, on the disk that holds the model
store. So each engine and the router gets Docker's json-file driver with rotation, from the file's
`logs:` (a model's own keys, then `defaults.logs`, then the built-in 50m x 5; the router reads
`router.logs`, then `defaults.logs`).

The settings are part of each canonical spec (`logs: {max_files, max_size}`), so a change is planned
like any other, and a container made before rotation (no `logs` in its spec) is replaced with the
reason said in words (plan/spec_diff.py). The size is written in the one form Docker reads the same
way (`50M`, `50MB` and `50MiB` are all `50m`), so spelling it otherwise recreates nothing. On a
cluster the kubelet rotates container logs and these settings have no effect (kube/specs.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from aigo_apply.config.defaults import LOG_MAX_FILES, LOG_MAX_SIZE
from aigo_apply.config.document import Document
from aigo_apply.desired.spec import LogSettings
from aigo_apply.desired.types import LogRotation, whole
from aigo_apply.errors import UnsafeSetting

# What schemas/aigo.schema.json takes: Docker reads k, m and g (either case, an optional b or ib after
# it) as powers of 1024; a number alone would be bytes, and no one means 50 bytes of logs
_SIZE = re.compile(r"([1-9][0-9]{0,5})([kmg])(?:i?b)?\Z", re.IGNORECASE | re.ASCII)
_CANONICAL_SIZE = re.compile(r"[1-9][0-9]{0,5}[kmg]\Z", re.ASCII)
MAX_FILES = 100  # the schema's bound too


def log_settings(own: object, defaults: Mapping[str, object]) -> LogSettings:
    """The canonical `logs` of one container: its own keys (`models.ALIAS.logs`, `router.logs`),
    then `defaults.logs`, then the built-in size and count, each key on its own."""
    inherited = defaults.get("logs")
    merged: dict[str, object] = {
        "max_size": LOG_MAX_SIZE,
        "max_files": LOG_MAX_FILES,
        **(inherited if isinstance(inherited, dict) else {}),
        **(own if isinstance(own, dict) else {}),
    }
    return {"max_files": whole(merged["max_files"], "logs.max_files"), "max_size": canonical_size(merged["max_size"])}


def logs_written(data: Document) -> tuple[str, ...]:
    """Where a validated file sets log rotation (`defaults.logs`, `router.logs`, each running model's
    `logs`): the plan on a cluster names them, where they do nothing."""
    models = data.get("models", {})
    places = [("defaults", data.get("defaults", {})), ("router", data.get("router", {}))]
    places += [(f"models.{alias}", m) for alias, m in sorted(models.items()) if m.get("enabled") is not False]
    return tuple(f"{where}.logs" for where, section in places if "logs" in section)


def canonical_size(text: object) -> str:
    """`50M`, `50mb`, `50MiB` -> `50m`: the one spelling of a size Docker reads the same way."""
    match = _SIZE.match(text) if isinstance(text, str) else None
    if match is None:
        raise UnsafeSetting(f"logs.max_size: {text!r} is not a size such as 50m (a whole number and k, m or g)")
    return match[1] + match[2].lower()


def rotation(who: str, spec: Mapping[str, object]) -> LogRotation:
    """The rotation a canonical spec asks for, checked once more where it is used (a hand-edited
    saved plan): the one spelling of the size, and a whole count of files from 1 to MAX_FILES.
    `who`: the container's owner as messages name it (model 'chat', router)."""
    logs = spec.get("logs")
    size, count = (logs.get("max_size"), logs.get("max_files")) if isinstance(logs, dict) else (None, None)
    why = _problem(size, count) if isinstance(logs, dict) else rotation_problem(None)  # each value as written
    if why or not isinstance(size, str) or not isinstance(count, int):
        raise UnsafeSetting(f"{who}: refusing logs {logs!r}: {why}; nothing was changed")
    return LogRotation(size, count)


def rotation_problem(logs: LogRotation | None) -> str | None:
    """Why a container's log settings are none aigo-apply makes, or None."""
    if logs is None:
        return "its logs would grow without bound (every container aigo-apply makes rotates them)"
    return _problem(logs.max_size, logs.max_files)


def _problem(size: object, count: object) -> str | None:
    if not (isinstance(size, str) and _CANONICAL_SIZE.match(size)):
        return f"log size {size!r} is not a whole number and k, m or g, such as 50m"
    if not (type(count) is int and 1 <= count <= MAX_FILES):
        return f"log file count {count!r} is not an integer from 1 to {MAX_FILES}"
    return None
