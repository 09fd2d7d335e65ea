"""In-memory collaborators for driving the executor without Docker, a router or real engines.

Every fake appends to one shared `Log`, so a test can assert the order of everything that happened
across the runtime, the waits and the router (`log.ops()`, `log.index(...)`), and, for the waits,
where in that order each began and ended (`log.intervals`: positions, never wall-clock times, so
what a test concludes from them does not depend on how busy the machine is)."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from aigo_apply.desired import labels
from aigo_apply.desired.engines.common import CACHE_DIR
from aigo_apply.desired.types import ContainerSpec, Route, RouterSettings
from aigo_apply.errors import AigoError, DockerUnavailable, NotReady
from aigo_apply.platforms.docker.serving_wait import Engine


class Log:
    """Calls in the order they happened, from every thread: (op, subject, time.monotonic())."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[tuple[str, str, float]] = []

    def add(self, op: str, subject: str) -> None:
        with self._lock:
            self._entries.append((op, subject, time.monotonic()))

    @property
    def entries(self) -> list[tuple[str, str, float]]:
        with self._lock:
            return list(self._entries)

    def ops(self, *kinds: str) -> list[tuple[str, str]]:
        """(op, subject) pairs, only of the given kinds when some are named. `route_stage` is left
        out unless asked for: the executor stages from a background thread, at no fixed point."""
        return [(op, s) for op, s, _ in self.entries if (op in kinds if kinds else op != "route_stage")]

    def index(self, op: str, subject: str, nth: int = 0) -> int:
        """Position of the nth (op, subject) among `ops()`; fails the test when it never happened."""
        found = [n for n, entry in enumerate(self.ops()) if entry == (op, subject)]
        assert len(found) > nth, f"{(op, subject)} happened {len(found)} times; calls: {self.ops()}"
        return found[nth]

    def count(self, op: str, subject: str) -> int:
        return self.ops().count((op, subject))

    def intervals(self, alias: str) -> list[tuple[int, int]]:
        """(began, ended) of every wait for `alias` as positions in the log (ended: returned or raised)."""
        entries = self.entries
        begins = [n for n, (op, s, _) in enumerate(entries) if op == "wait_begin" and s == alias]
        ends = [n for n, (op, s, _) in enumerate(entries) if op in ("wait_end", "wait_failed") and s == alias]
        assert len(begins) == len(ends), f"unfinished wait for {alias}: {self.ops()}"
        return list(zip(begins, ends, strict=True))


def overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Two waits were in progress at once: each began before the other ended."""
    return max(a[0], b[0]) < min(a[1], b[1])


# -- the runtime --------------------------------------------------------------------------------


class _NoEvents:
    def __iter__(self):
        return iter(())

    def close(self) -> None:
        pass


class FakeRuntime:
    """aigo_apply.adapters.runtime.Runtime in memory. Containers are docker-list-API-shaped dicts
    (so `list_containers()` feeds observe.parse_state as Docker's would), keyed by their current
    name; calls that address a container by id or name are logged with its name at the time."""

    def __init__(self, log: Log | None = None, project: str = "lab"):
        self.log = log or Log()
        self.project = project
        self.containers: dict[str, dict[str, Any]] = {}
        self.specs: dict[str, ContainerSpec] = {}  # container id -> the spec it was created from
        self.envs: dict[str, dict[str, str]] = {}
        self.fail_start: dict[str, AigoError] = {}  # container name -> what start raises
        self.fail_create: dict[str, AigoError] = {}
        self.fail_stop: dict[str, AigoError] = {}
        self.fail_rename: dict[str, AigoError] = {}
        self.logs: dict[str, list[str]] = {}  # container name -> its log lines
        self.volumes: dict[str, dict[str, str]] = {}  # named volume -> its labels
        self.volume_created: dict[str, str] = {}  # named volume -> Docker's CreatedAt
        self.images: list[dict[str, Any]] = [{"Id": "sha256:img", "RepoTags": ["local/engine:1", "haproxy:3.2"]}]
        self._ids = itertools.count(1)
        self._lock = threading.RLock()

    # setting up ----------------------------------------------------------------------------------
    def add_existing(self, spec: ContainerSpec, state: str = "running", cid: str | None = None) -> str:
        """A container as an earlier apply left it (not logged as a call)."""
        cid = cid or f"old-{spec.name}"
        with self._lock:
            self._put(spec, cid, state)
        return cid

    def _put(self, spec: ContainerSpec, cid: str, state: str) -> None:
        ports = (
            [{"IP": spec.host_ip, "PrivatePort": spec.container_port, "PublicPort": spec.host_port, "Type": "tcp"}]
            if spec.host_port
            else []
        )
        self.containers[spec.name] = {
            "Id": cid,
            "Names": [f"/{spec.name}"],
            "State": state,
            "Status": "Up 1 minute" if state == "running" else "Exited (0) 1 minute ago",
            "Image": spec.image,
            "ImageID": "sha256:img",
            "Labels": dict(spec.labels),
            "Ports": ports,
            "Mounts": [{"Type": "volume", "Name": m.source} for m in spec.mounts if not m.source.startswith("/")],
        }
        self.specs[cid] = spec

    def _find(self, container: str) -> tuple[str, dict[str, Any]]:
        """name, entry of a container given by name or id; Docker's 404 as an AigoError."""
        for name, entry in self.containers.items():
            if container in (name, entry["Id"]):
                return name, entry
        raise DockerUnavailable(f"no such container: {container}")

    def _call(self, op: str, container: str) -> tuple[str, dict[str, Any]]:
        with self._lock:
            try:
                name, entry = self._find(container)
            except DockerUnavailable:
                self.log.add(op, container)
                raise
            self.log.add(op, name)
            return name, entry

    def _set_state(self, entry: dict[str, Any], state: str) -> None:
        entry["State"] = state
        entry["Status"] = "Up 1 second" if state == "running" else "Exited (0) 1 second ago"

    # reads -------------------------------------------------------------------------------------
    def list_containers(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(entry, Labels=dict(entry["Labels"])) for entry in self.containers.values()]

    def list_images(self) -> list[dict[str, Any]]:
        return list(self.images)

    def state(self, container: str) -> dict[str, Any]:
        with self._lock:
            try:
                _, entry = self._find(container)
            except DockerUnavailable:
                return {}
            running = entry["State"] == "running"
            return {
                "Status": entry["State"],
                "Running": running,
                "Paused": entry["State"] == "paused",
                "Restarting": False,
                "ExitCode": 0,
            }

    def logs_tail(self, container: str, lines: int = 20) -> list[str]:
        with self._lock:
            try:
                name, _ = self._find(container)
            except DockerUnavailable:
                return []
            return self.logs.get(name, [])[-lines:]

    def log_lines(self, container: str, follow: bool, tail: int | None, since: float | None) -> Iterator[str]:
        lines = self.logs_tail(container, 10**9)
        yield from lines if tail is None else lines[len(lines) - tail :]

    def container_config(self, container: str) -> dict[str, Any]:
        with self._lock:
            try:
                _, entry = self._find(container)
            except DockerUnavailable:
                return {}
            spec = self.specs.get(entry["Id"])
            return {"env": dict(self.envs.get(entry["Id"], {})), "cmd": list(spec.command) if spec else []}

    def info(self) -> dict[str, Any]:
        return {"ServerVersion": "fake"}

    def inspect_image(self, reference: str) -> dict[str, Any] | None:
        return next((i for i in self.images if reference in i.get("RepoTags", [])), None)

    def engine_events(self, project: str) -> _NoEvents:
        return _NoEvents()

    # images --------------------------------------------------------------------------------------
    def pull(self, reference: str, on_event: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.log.add("pull", reference)
        if on_event:
            on_event({"id": "layer1", "status": "Downloading", "progressDetail": {"current": 1, "total": 2}})

    def tag(self, source: str, reference: str) -> None:
        self.log.add("tag", reference)

    # containers ----------------------------------------------------------------------------------
    def create(self, spec: ContainerSpec, env: Mapping[str, str]) -> str:
        with self._lock:
            self.log.add("create", spec.name)
            if spec.name in self.fail_create:
                raise self.fail_create[spec.name]
            if spec.name in self.containers:
                raise DockerUnavailable(f"Conflict: the container name /{spec.name} is already in use")
            cid = f"new-{spec.name}-{next(self._ids)}"
            self._make_volumes(spec)
            self._put(spec, cid, "created")
            self.envs[cid] = dict(env)
            return cid

    def _make_volumes(self, spec: ContainerSpec) -> None:
        """Each named volume a container of ours mounts, made with our labels, as the Docker adapter does."""
        project = spec.labels.get(labels.PROJECT, "")
        if not labels.is_ours(dict(spec.labels), project):
            return
        for mount in spec.mounts:
            if not mount.source.startswith("/") and mount.source not in self.volumes:
                image = spec.image if mount.target == CACHE_DIR else None
                self.volumes[mount.source] = labels.for_volume(project, image)

    def start(self, container: str) -> None:
        with self._lock:
            name, entry = self._call("start", container)
            if name in self.fail_start:
                raise self.fail_start[name]
            self._set_state(entry, "running")

    def unpause(self, container: str) -> None:
        with self._lock:
            _, entry = self._call("unpause", container)
            self._set_state(entry, "running")

    def stop(self, container: str, timeout: int = 30) -> None:
        with self._lock:
            if container in self.fail_stop:
                self.log.add("stop_refused", container)
                raise self.fail_stop[container]
            _, entry = self._call("stop", container)
            self._set_state(entry, "exited")

    def remove(self, container: str, force: bool = True) -> None:
        with self._lock:
            name, _ = self._call("remove", container)
            del self.containers[name]

    def rename(self, container: str, name: str) -> None:
        with self._lock:
            old, entry = self._find(container)
            self.log.add("rename", f"{old}->{name}")
            if old in self.fail_rename:
                raise self.fail_rename[old]
            if name in self.containers:
                raise DockerUnavailable(f"Conflict: the container name /{name} is already in use")
            del self.containers[old]
            entry["Names"] = [f"/{name}"]
            self.containers[name] = entry

    def kill(self, container: str, signal: str) -> None:
        with self._lock:
            _, entry = self._call("kill", container)
            if signal in ("SIGUSR1", "SIGTERM", "SIGKILL"):  # HAProxy soft-stops on SIGUSR1: it exits
                self._set_state(entry, "exited")

    def exec(self, container: str, command: list[str]) -> tuple[int, str]:
        self._call("exec", container)
        return 0, ""

    def process_count(self, container: str) -> int:
        return 2  # the router's master and its worker: no old worker left

    def run_once(
        self, image: str, command: list[str], entrypoint: list[str], binds: dict[str, str], user: str | None = None
    ) -> tuple[int, str]:
        self.log.add("run_once", image)
        return 0, ""

    def volume_labels(self, name: str) -> dict[str, str] | None:
        """The labels of a named volume; None when there is none. Tests put volumes in `volumes`."""
        return self.volumes.get(name)

    def list_volumes(self, project: str) -> list[dict[str, Any]]:
        """The volumes labelled as this project's aigo-apply ones, in Docker's shape (each was made at
        the volume's `volume_created` time, else the Unix epoch)."""
        return [
            {"Name": name, "Labels": found, "CreatedAt": self.volume_created.get(name, "1970-01-01T00:00:00Z")}
            for name, found in self.volumes.items()
            if isinstance(found, dict) and labels.is_ours(found, project)
        ]

    def remove_volume(self, name: str) -> bool:
        self.log.add("remove_volume", name)
        if any(m.get("Name") == name for entry in self.containers.values() for m in entry.get("Mounts", ())):
            raise DockerUnavailable(f"the Docker engine refused the request: remove {name}: volume is in use")
        return self.volumes.pop(name, None) is not None

    # for assertions ------------------------------------------------------------------------------
    def id_of(self, name: str) -> str:
        return self.containers[name]["Id"]

    def state_of(self, name: str) -> str:
        return self.containers[name]["State"]


# -- the waits ----------------------------------------------------------------------------------


class FakeWaits:
    """The executor's `make_waiter`: `FakeWaits(...)(timeout, should_stop=, on_progress=)` gives a
    waiter whose `wait(engine)` logs wait_begin / wait_end (or wait_failed) for the engine's alias,
    sleeps `seconds` of real time (in short steps, stopping early when should_stop says so, as
    the real Waiter does), and raises NotReady for the aliases in `fail` (alias -> how many of its
    waits fail; the later ones succeed). The waits of the aliases in `together` return only once all
    of them have begun: a test of models that must load at the same time proves it by the order of
    the log, whatever the machine's load (run one after the other, the first would never see the
    others: after `apart_after` seconds it gives up and logs `wait_apart`)."""

    def __init__(
        self,
        log: Log,
        seconds: float = 0.0,
        fail: Mapping[str, int] | None = None,
        log_tail: Iterable[str] = ("engine: out of memory",),
        on_begin: Callable[[Engine], None] | None = None,
        together: Iterable[str] = (),
        apart_after: float = 30.0,
    ):
        self.log, self.seconds = log, seconds
        self.together = frozenset(together)
        self._met = threading.Barrier(len(self.together), timeout=apart_after) if self.together else None
        self.fail = dict(fail or {})
        self.log_tail = list(log_tail)
        self.on_begin = on_begin
        self.timeouts: list[float] = []
        self.engines: list[Engine] = []
        self.states: list[dict] = []  # engine.state() as seen when each wait began
        self._lock = threading.Lock()

    def __call__(
        self,
        timeout: float,
        should_stop: Callable[[], bool] = lambda: False,
        on_progress: Callable[..., None] | None = None,
    ) -> _FakeWaiter:
        with self._lock:
            self.timeouts.append(timeout)
        return _FakeWaiter(self, should_stop)


class _FakeWaiter:
    def __init__(self, waits: FakeWaits, should_stop: Callable[[], bool]):
        self.waits, self.should_stop = waits, should_stop

    def wait(self, engine: Engine) -> float:
        waits = self.waits
        with waits._lock:
            waits.engines.append(engine)
            waits.states.append(engine.state())
        waits.log.add("wait_begin", engine.alias)
        try:
            if waits.on_begin:
                waits.on_begin(engine)
            if waits._met is not None and engine.alias in waits.together:
                try:
                    waits._met.wait()
                except threading.BrokenBarrierError:
                    waits.log.add("wait_apart", engine.alias)
            deadline = time.monotonic() + waits.seconds
            while True:
                if self.should_stop():
                    raise NotReady(f"interrupted while waiting for model '{engine.alias}'", interrupted=True)
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                time.sleep(min(left, 0.01))
            with waits._lock:
                failing = waits.fail.get(engine.alias, 0) > 0
                if failing:
                    waits.fail[engine.alias] -= 1
            if failing:
                raise NotReady(f"model '{engine.alias}' was not ready after 1 s", log_tail=list(waits.log_tail))
        except NotReady:
            waits.log.add("wait_failed", engine.alias)
            raise
        waits.log.add("wait_end", engine.alias)
        return waits.seconds


# -- the router, the reporter -------------------------------------------------------------------


class FakeRoutes:
    """The executor's Routes (router.Router) in memory."""

    def __init__(self, log: Log, settings: RouterSettings, routes: Mapping[str, Route] | None = None):
        self.log, self.settings = log, settings
        self.sockets_dir = "/state/sockets"
        self.held: set[str] = set()
        self.routes: dict[str, Route] = dict(routes or {})
        self.added: list[Route] = []
        self.converged: list[dict[str, Route]] = []
        self.fail_add: dict[tuple[str, int | None], str] = {}  # (alias, port or None) -> why the router refuses it
        self.stage_seconds = 0.0  # how long a staging check takes
        self.staged_done: list[str] = []
        self._lock = threading.Lock()

    def stage(self, route: Route) -> None:
        self.log.add("route_stage", route.alias)
        time.sleep(self.stage_seconds)
        self.staged_done.append(route.alias)

    def add(self, route: Route) -> None:
        with self._lock:
            if (route.alias, route.port) in self.fail_add:
                self.log.add("route_refused", route.alias)
                raise AigoError(self.fail_add[route.alias, route.port])
            self.log.add("route_add", route.alias)
            self.routes[route.alias] = route
            self.added.append(route)

    def remove(self, alias: str) -> None:
        with self._lock:
            self.log.add("route_remove", alias)
            self.routes.pop(alias, None)

    def converge(self, routes: dict[str, Route]) -> bool:
        with self._lock:
            self.log.add("converge", ",".join(sorted(routes)))
            self.converged.append(dict(routes))
            changed = routes != self.routes
            self.routes = dict(routes)
            return changed

    def wait_listed(self, aliases: set[str], timeout: float) -> set[str]:
        return set()  # the in-memory router lists what it routes

    def answer(self) -> str:
        self.log.add("wait_router", str(self.settings.port))
        return ""  # the in-memory router is this project's

    def prepare_first(self, routes: list[Route], check: bool = True) -> None:
        self.log.add("prepare_first", ",".join(sorted(r.alias for r in routes)))

    def drain(self) -> float:
        self.log.add("drain", "router")
        return 0.0

    def hold(self, alias: str, seconds: float, route: Route | None = None, to: Route | None = None) -> None:
        self.log.add("hold", alias if to is None else f"{alias}->{to.slot}")
        self.held.add(alias)
        if route is not None:
            self.routes.setdefault(alias, route)
        if to is not None:
            self.routes[alias] = to

    def release(self, alias: str) -> None:
        self.log.add("release", alias)
        self.held.discard(alias)

    def remove_files(self) -> None:
        self.log.add("remove_files", "router")


class FakeReporter:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()

    def event(self, kind: str, **fields: Any) -> None:
        with self._lock:
            self.events.append((kind, fields))

    def steps(self, address: str) -> list[tuple[str, str]]:
        """(step, outcome) of the step events for one address, in order."""
        with self._lock:
            return [(f["step"], f["outcome"]) for k, f in self.events if k == "step" and f["address"] == address]


def no_router_wait(log: Log) -> Callable[[FakeRoutes], None]:
    def wait(routes: FakeRoutes) -> None:
        log.add("wait_router", str(routes.settings.port))

    return wait
