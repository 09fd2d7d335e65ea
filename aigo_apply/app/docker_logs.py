"""`aigo-apply logs` on Docker: the output of a project's engine containers (and its router's), found
by the tool's labels and names, never by a name a user typed. Without --follow each container's
last lines are read in turn; with --follow one thread per container feeds one queue, and a watcher
looks for the containers of the asked models every POLL_S, so a replace (a new container beside the
old, or one in its place) is followed from its first line, and the old one until it stops.

Secrets never reach the screen: every value a container was given for a secret reference in the
file (read back from the container itself) and this host's Hugging Face tokens are remembered for
redaction (apply/secrets.redact) before a line is printed."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from aigo_apply.adapters.runtime import Runtime
from aigo_apply.app.platform import LogStream
from aigo_apply.app.requests import LogsRequest
from aigo_apply.apply.secrets import host_hub_tokens, remember
from aigo_apply.desired import labels
from aigo_apply.desired.types import DesiredState, SecretRef
from aigo_apply.errors import DockerUnavailable, UsageProblem
from aigo_apply.observe.label_checks import label_problem, names_of

ROUTER = "router"
POLL_S = 0.5
_END = object()


@dataclass(frozen=True)
class Source:
    """One container whose output is shown, under the name the user asked for."""

    name: str  # the model alias, or "router"
    container: str  # its id
    created: float  # Unix time
    running: bool = True


def sources(runtime: Runtime, project: str, wanted: tuple[str, ...]) -> list[Source]:
    """The project's containers of the asked names (every model's and the router's when none), in
    the order asked, each model's by creation time."""
    found: list[Source] = []
    for c in runtime.list_containers():
        names = c.get("Labels") or {}
        name = (c.get("Names") or ["/"])[0].lstrip("/")
        if names.get(labels.PROJECT) != project or label_problem(name, names, project):
            continue
        alias = names.get(labels.MODEL) if names.get(labels.ROLE) == labels.ROLE_ENGINE else None
        if name not in names_of(project, alias):
            continue
        shown = alias or ROUTER
        if not wanted or shown in wanted:
            found.append(Source(shown, c["Id"], float(c.get("Created") or 0), c.get("State") == "running"))
    order = {n: i for i, n in enumerate(wanted)}
    return sorted(found, key=lambda s: (order.get(s.name, len(order)), s.name == ROUTER, s.name, s.created))


def remember_secrets(runtime: Runtime, desired: DesiredState | None, found: list[Source]) -> None:
    """What redaction hides: the values the containers got for the file's secret references, and
    this host's Hugging Face tokens."""
    host_hub_tokens()
    secret_names: set[str] = set()
    if desired is not None:
        for model in desired.models.values():
            secret_names |= {n for n, v in model.container.env if isinstance(v, SecretRef)}
    for source in found:
        if source.name == ROUTER:
            continue
        env = runtime.container_env(source.container)
        for name in secret_names & set(env):
            remember(env[name])


def read(runtime: Runtime, found: list[Source], tail: int | None, since: float | None) -> Iterator[tuple[str, str]]:
    """(name, line) of each container's output so far, one container after the other."""
    for source in found:
        try:
            for line in runtime.log_lines(source.container, follow=False, tail=tail, since=since):
                yield source.name, line
        except DockerUnavailable:
            continue  # it went away between the list and the read


def follow(
    runtime: Runtime,
    project: str,
    wanted: tuple[str, ...],
    tail: int | None,
    since: float | None,
    stop: threading.Event,
) -> Iterator[tuple[str, str]]:
    """(name, line) as the containers write them, until `stop` is set; containers that appear later
    (a replace) are followed from their first line."""
    lines: queue.Queue[Any] = queue.Queue(maxsize=10000)
    followed: set[str] = set()
    ended: dict[str, float] = {}  # a container whose stream ended (it stopped), and when: a restart goes on from there
    guard = threading.Lock()

    def pump(source: Source, first: bool) -> None:
        if first:
            tail_of, since_of = tail, since
        else:  # new since the start (a replace), or restarted: from its first line, or where it was left
            tail_of, since_of = None, ended.get(source.container, source.created - 1)
        try:
            for line in runtime.log_lines(source.container, follow=True, tail=tail_of, since=since_of):
                if stop.is_set():
                    return
                lines.put((source.name, line))
        except DockerUnavailable:
            pass
        with guard:
            ended[source.container] = time.time()
            followed.discard(source.container)

    def start(found: list[Source], first: bool) -> None:
        for source in found:
            with guard:
                if source.container in followed or not (first or source.running):
                    continue
                followed.add(source.container)
            threading.Thread(target=pump, args=(source, first), name=f"logs-{source.name}", daemon=True).start()

    def watch() -> None:
        while not stop.wait(POLL_S):
            try:
                start(sources(runtime, project, wanted), first=False)
            except DockerUnavailable:
                continue

    start(sources(runtime, project, wanted), first=True)
    threading.Thread(target=watch, name="logs-watch", daemon=True).start()
    while not stop.is_set():
        try:
            yield lines.get(timeout=0.2)  # a timeout, so Ctrl-C reaches the main thread
        except queue.Empty:
            continue


def log_stream(runtime: Runtime, project: str, desired: DesiredState | None, request: LogsRequest) -> LogStream:
    """The asked names checked (models of the file or running, and `router`) before anything is
    read, the secrets to redact remembered, then the lines."""
    running = sources(runtime, project, ())
    known = sorted({*(desired.models if desired else ()), *(s.name for s in running if s.name != ROUTER)})
    unknown = [n for n in request.names if n not in known and n != ROUTER]
    if unknown:
        raise UsageProblem(
            f"logs: no model {', '.join(repr(n) for n in unknown)} in the file or running for project "
            f"'{project}'; models: {', '.join(known) or '(none)'}, or `router`"
        )
    wanted = tuple(dict.fromkeys(request.names))
    found = sources(runtime, project, wanted)
    remember_secrets(runtime, desired, found)
    since = None if request.since_s is None else time.time() - request.since_s
    if request.follow:
        lines = follow(runtime, project, wanted, request.tail, since, threading.Event())
    else:
        lines = read(runtime, found, request.tail, since)
    return LogStream(several=len(wanted) != 1, lines=lines)
