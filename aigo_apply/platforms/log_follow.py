"""What `aigo-apply logs` does the same on Docker and on a cluster: read each source's lines in turn,
or follow them all at once. A source is one container (a Docker container, a pod's container) under
the name the user asked for. Following runs one thread per source into one queue, and looks for
the asked sources again every POLL_S, so a replace (a new container or pod beside the old, or one in
its place) is followed from its first line, a restarted one from where it was left, the old one
until it stops."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from aigo_apply.errors import AigoError, UsageProblem

POLL_S = 0.5
ROUTER = "router"  # the name `logs` shows the router's output under


@dataclass(frozen=True)
class Source:
    """One container whose output is shown, under the name the user asked for."""

    name: str  # the model alias, or "router"
    key: str  # what the platform reads it by (a container id; a pod's name)
    created: float  # Unix time
    running: bool = True


# (source, follow, tail, since) -> its lines; raises an AigoError when it cannot be read
Opener = Callable[[Source, bool, "int | None", "float | None"], Iterator[str]]


def read(found: list[Source], open_lines: Opener, tail: int | None, since: float | None) -> Iterator[tuple[str, str]]:
    """(name, line) of each source's output so far, one source after the other."""
    for source in found:
        try:
            for line in open_lines(source, False, tail, since):
                yield source.name, line
        except AigoError:
            continue  # it went away between the list and the read


def follow(
    list_sources: Callable[[], list[Source]],
    open_lines: Opener,
    tail: int | None,
    since: float | None,
    stop: threading.Event,
) -> Iterator[tuple[str, str]]:
    """(name, line) as the sources write them, until `stop` is set."""
    lines: queue.Queue[tuple[str, str]] = queue.Queue(maxsize=10000)
    followed: set[str] = set()
    ended: dict[str, float] = {}  # a source whose stream ended (it stopped), and when
    guard = threading.Lock()

    def pump(source: Source, first: bool) -> None:
        if first:
            tail_of, since_of = tail, since
        else:  # new since the start (a replace): from its first line; restarted: from where it was left
            tail_of, since_of = None, ended.get(source.key, source.created - 1)
        try:
            for line in open_lines(source, True, tail_of, since_of):
                if stop.is_set():
                    return
                lines.put((source.name, line))
        except AigoError:
            pass
        with guard:
            ended[source.key] = time.time()
            followed.discard(source.key)

    def start(found: list[Source], first: bool) -> None:
        for source in found:
            with guard:
                if source.key in followed or not (first or source.running):
                    continue
                followed.add(source.key)
            threading.Thread(target=pump, args=(source, first), name=f"logs-{source.name}", daemon=True).start()

    def watch() -> None:
        while not stop.wait(POLL_S):
            try:
                start(list_sources(), first=False)
            except AigoError:
                continue

    start(list_sources(), first=True)
    threading.Thread(target=watch, name="logs-watch", daemon=True).start()
    while not stop.is_set():
        try:
            yield lines.get(timeout=0.2)  # a timeout, so Ctrl-C reaches the main thread
        except queue.Empty:
            continue


def check_names(asked: tuple[str, ...], known: list[str], project: str) -> tuple[str, ...]:
    """The asked names, each once in the order asked; refused (before anything is read) when one is
    neither a model of the file or one that runs, nor `router`."""
    unknown = [n for n in asked if n not in known and n != ROUTER]
    if unknown:
        raise UsageProblem(
            f"logs: no model {', '.join(repr(n) for n in unknown)} in the file or running for project "
            f"'{project}'; models: {', '.join(sorted(known)) or '(none)'}, or `router`"
        )
    return tuple(dict.fromkeys(asked))


def ordered(found: list[Source], wanted: tuple[str, ...]) -> list[Source]:
    """The asked names' sources in the order asked (all: models by name, then the router), each
    name's by creation time."""
    order = {n: i for i, n in enumerate(wanted)}
    chosen = [s for s in found if not wanted or s.name in wanted]
    return sorted(chosen, key=lambda s: (order.get(s.name, len(order)), s.name == ROUTER, s.name, s.created))
