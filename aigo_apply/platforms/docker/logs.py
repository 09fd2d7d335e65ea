"""`aigo-apply logs` on Docker: the output of a project's engine containers (and its router's), found
by the tool's labels and names, never by a name a user typed; read or followed by platforms/log_follow.py.

Secrets never reach the screen: every value a container was given for a secret reference in the
file (read back from the container itself) and this host's Hugging Face tokens are remembered for
redaction (platforms/secrets.redact) before a line is printed."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

from aigo_apply.adapters.runtime import Runtime
from aigo_apply.desired import labels
from aigo_apply.desired.types import DesiredState, SecretRef
from aigo_apply.errors import UsageProblem
from aigo_apply.json_types import arr, number, obj, text
from aigo_apply.observe.label_checks import label_problem, names_of
from aigo_apply.platforms import log_follow
from aigo_apply.platforms.docker import failed_starts
from aigo_apply.platforms.log_follow import ROUTER, Source
from aigo_apply.platforms.platform import LogStream
from aigo_apply.platforms.requests import LogsRequest
from aigo_apply.platforms.secrets import host_hub_tokens, remember


def sources(runtime: Runtime, project: str) -> list[Source]:
    """Every container of the project the tool made: each engine under its model's alias, the router."""
    found: list[Source] = []
    for c in runtime.list_containers():
        marks = {k: v for k, v in obj(c.get("Labels")).items() if isinstance(v, str)}  # docker_answers: all text
        name = text((arr(c.get("Names")) or ["/"])[0]).lstrip("/")
        if marks.get(labels.PROJECT) != project or label_problem(name, marks, project):
            continue
        alias = marks.get(labels.MODEL) if marks.get(labels.ROLE) == labels.ROLE_ENGINE else None
        if name in names_of(project, alias):
            created = float(number(c.get("Created")) or 0)
            found.append(Source(alias or ROUTER, text(c["Id"]), created, c.get("State") == "running"))
    return found


def remember_secrets(runtime: Runtime, desired: DesiredState | None, found: list[Source]) -> None:
    """What redaction hides: the values the containers got for the file's secret references, and
    this host's Hugging Face tokens."""
    host_hub_tokens()
    secret_names: set[str] = set()
    if desired is not None:
        for model in desired.models.values():
            secret_names |= {n for n, v in model.container.env if isinstance(v, SecretRef)}
    for source in found:
        if source.name != ROUTER:
            env = runtime.container_config(source.key).get("env") or {}
            for name in secret_names & set(env):
                remember(env[name])


def log_stream(runtime: Runtime, project: str, desired: DesiredState | None, request: LogsRequest) -> LogStream:
    """The asked names checked (models of the file or running, and `router`) before anything is
    read, the secrets to redact remembered, then the lines."""
    running = sources(runtime, project)
    known = sorted({*(desired.models if desired else ()), *(s.name for s in running if s.name != ROUTER)})
    wanted = log_follow.check_names(request.names, known, project)
    found = log_follow.ordered(running, wanted)
    remember_secrets(runtime, desired, found)
    since = None if request.since_s is None else time.time() - request.since_s

    def open_lines(source: Source, follow: bool, tail: int | None, since: float | None) -> Iterator[str]:
        return runtime.log_lines(source.key, follow=follow, tail=tail, since=since)

    if request.follow:
        lines = log_follow.follow(
            lambda: log_follow.ordered(sources(runtime, project), wanted),
            open_lines,
            request.tail,
            since,
            threading.Event(),
        )
    else:
        lines = log_follow.read(found, open_lines, request.tail, since)
    return LogStream(several=len(wanted) != 1, lines=lines)


def failed_stream(
    runtime: Runtime, project: str, desired: DesiredState | None, request: LogsRequest, state: Path
) -> LogStream:
    """`logs --failed`: the log apply kept of each asked model's newest failed start
    (platforms/docker/failed_starts.py), after a line saying when it failed, what and why; the last --tail
    lines of it. Its container is gone, so --follow and --since have nothing to read."""
    if request.follow or request.since_s is not None:
        raise UsageProblem("logs --failed prints a kept log, whole: it takes neither --follow nor --since")
    if ROUTER in request.names:
        raise UsageProblem("logs --failed: the router's starts are not kept; give models' aliases")
    running = sources(runtime, project)
    known = sorted({*(desired.models if desired else ()), *(s.name for s in running if s.name != ROUTER)})
    asked = log_follow.check_names(request.names, known, project) or tuple(known)
    kept = {alias: failed_starts.newest(state, alias) for alias in asked}
    found = {alias: record for alias, record in kept.items() if record is not None}
    if not found:
        where = state / failed_starts.FOLDER
        raise UsageProblem(
            f"logs --failed: no failed start of {', '.join(asked) or 'any model'} is kept in {where}; "
            "`aigo-apply logs ALIAS` shows a running engine's log"
        )

    def lines() -> Iterator[tuple[str, str]]:
        for alias, record in found.items():
            exit_code = "" if record.exit_code is None else f", exit code {record.exit_code}"
            yield (
                alias,
                f"== the start of {alias} failed at {record.at} ({record.container}, {record.image}{exit_code})",
            )
            yield alias, f"== why: {record.why}"
            if record.error:
                yield alias, f"== the log says: {record.error}"
            yield alias, f"== command: {' '.join(record.command)}"
            yield alias, f"== log ({record.lines} lines, secrets redacted): {record.log}"
            text = failed_starts.read_log(record).splitlines()
            for line in text if request.tail is None else text[-request.tail :] if request.tail else []:
                yield alias, line

    return LogStream(several=len(found) != 1, lines=lines())
