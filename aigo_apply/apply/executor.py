"""The executor: the only place with side effects. It never decides; it carries out a Plan's
actions in this fixed order, journals every step, and reports progress:

  1. prepare: render every container from its action's spec (re-checking each value) and resolve
     every secret. If anything is wrong here, nothing on the machine has changed.
  2. pull the images and download the models (into the model store on the host), before any
     container is stopped, so downtime never includes a pull or a download.
  3. remove: take the route away, then stop and remove the container.
  4. start, create and recreate, in lanes: models whose GPUs overlap (`gpus: all` overlaps every
     GPU model) go one after the other, each after the previous one is ready (vLLM instances
     starting together on one GPU mis-measure each other's memory); lanes run in parallel, and a
     `gpus: none` model is a lane of its own. Each model is ready (see readiness.py) before its
     route is added.

recreate = take the route away, stop the old container, rename it to NAME-aigo-previous, create
and start the new one, wait until ready, add the route, remove the old one. If the new one does
not become ready: keep its log tail, remove it, rename the old one back, start it, wait, add its
route again, and report the failure with "previous version restored".

Ctrl-C sets `interrupted`: no new step starts, a wait in progress stops, and the model being
changed is put back the way it was (a new container removed; a renamed old one restored).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from aigo_apply.adapters.hub import download
from aigo_apply.adapters.runtime import Runtime
from aigo_apply.apply.journal import Journal
from aigo_apply.apply.secrets import container_env
from aigo_apply.apply.serving_wait import Engine, NotReady, Waiter
from aigo_apply.config.defaults import DEFAULT_READY_TIMEOUT
from aigo_apply.config.schema import schema
from aigo_apply.desired import engines
from aigo_apply.desired.engines.router import router_container
from aigo_apply.desired.model_store import is_complete, read_marker, repo_dir
from aigo_apply.desired.types import ContainerSpec, Route, RouterSettings
from aigo_apply.errors import AigoError, PlanFileError
from aigo_apply.observe.containers import running_engines
from aigo_apply.plan.lockfile import valid_restore
from aigo_apply.plan.types import Action, Plan
from aigo_apply.router.deploy import wait_serving

BACKUP_SUFFIX = "-aigo-previous"
MODEL_KINDS = ("start", "create", "recreate")


class Routes(Protocol):
    """The router's side of apply (router.Router): a route is added only once a model is ready,
    and removed before its container stops."""

    routes: dict[str, Route]
    settings: RouterSettings

    def stage(self, route: Route) -> None: ...
    def add(self, route: Route) -> None: ...
    def remove(self, alias: str) -> None: ...
    def converge(self, routes: dict[str, Route]) -> bool: ...
    def prepare_first(self, routes: list[Route], check: bool = True) -> None: ...
    def remove_files(self) -> None: ...


@dataclass
class Outcome:
    address: str
    kind: str
    ok: bool
    message: str
    restored: bool = False
    log_tail: list[str] = field(default_factory=list)


@dataclass
class ApplyReport:
    outcomes: list[Outcome]
    interrupted: bool

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.ok]


class Interrupted(AigoError):
    exit_code = 130


@dataclass
class _Prepared:
    action: Action
    container: ContainerSpec | None = None
    env: dict[str, str] = field(default_factory=dict)


class Executor:
    def __init__(
        self,
        runtime: Runtime,
        reporter: Any,
        journal: Journal,
        routes: Routes | None = None,
        interrupted: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
        fetch: Callable[..., dict] | None = None,
        make_waiter: Callable[..., Waiter] = Waiter,
        wait_router: Callable[[RouterSettings], None] = wait_serving,
    ):
        self.runtime, self.reporter, self.journal = runtime, reporter, journal
        self.fetch = fetch  # downloads a model folder (hf.download unless a test passes another)
        self.routes = routes
        self.interrupted = interrupted or threading.Event()
        self._router_gate = threading.Event()  # set while the router can take route changes
        self._router_gate.set()
        self.clock = clock
        self.wait_router = wait_router  # until the router answers on its port: unit tests pass a fake
        self.make_waiter = make_waiter  # Waiter(timeout, should_stop=, on_progress=): unit tests pass a fake

    # -- the fixed order -----------------------------------------------------------------------
    def run(self, plan: Plan, pulls: list[str]) -> ApplyReport:
        models = [a for a in plan.actions if a.address.startswith("model.") or a.address.startswith("container.")]
        prepared = [self._prepare(plan.project, a) for a in models if a.kind in ("remove",) + MODEL_KINDS]
        router_action = next((a for a in plan.actions if a.address == "router"), None)
        router_container = (
            self._prepare(plan.project, router_action).container
            if router_action and router_action.kind in ("create", "recreate")
            else None
        )
        self.journal.record("apply", f"project.{plan.project}", "started", fingerprint=plan.fingerprint)
        outcomes: list[Outcome] = []
        restores = {a.image: a.spec for a in plan.actions if a.kind == "pull" and a.image and a.spec}
        for image in pulls:
            self._check_interrupt()
            self._pull(image, restores.get(image))
        for action in plan.actions:
            if action.kind == "download":
                self._check_interrupt()
                self._download(action)
        # The router starts alongside the models: it is up long before an engine has loaded, and
        # every route change waits for it (the gate), so its start-up adds nothing to the apply.
        router_future = None
        if router_action and router_action.kind in ("create", "recreate", "start"):
            self._check_interrupt()
            self._router_gate.clear()
            router_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aigo-router")
            router_future = router_pool.submit(self._router_step, router_action, router_container, plan)
            router_pool.shutdown(wait=False)
        for item in prepared:
            if item.action.kind == "remove":
                self._check_interrupt()
                outcomes.append(self._remove(item.action))
        lanes = gpu_lanes([p for p in prepared if p.action.kind in MODEL_KINDS])
        if lanes:
            with ThreadPoolExecutor(max_workers=len(lanes), thread_name_prefix="aigo-lane") as pool:
                for lane_outcomes in pool.map(self._run_lane, lanes):
                    outcomes += lane_outcomes
        if router_future is not None:
            outcomes.insert(0, router_future.result())
        if router_action and router_action.kind == "remove":
            outcomes.append(self._remove(router_action))
            if self.routes:
                self.routes.remove_files()
        elif self.routes and not self.interrupted.is_set() and not self._router_failed:
            try:
                outcomes += self._converge_routes(plan)
            except AigoError as exc:  # the router keeps its previous routes; say so and fail the apply
                self._step("router", "reload_router", "failed", str(exc))
                outcomes.append(Outcome("router", "reload_router", False, str(exc)))
        interrupted = self.interrupted.is_set()
        self.journal.record(
            "apply",
            f"project.{plan.project}",
            "interrupted" if interrupted else "finished",
            failed=[o.address for o in outcomes if not o.ok],
        )
        return ApplyReport(outcomes, interrupted)

    def _prepare(self, project: str, action: Action) -> _Prepared:
        if action.kind == "remove":
            return _Prepared(action)
        if action.address == "router":
            return _Prepared(action, router_container(project, action.spec))
        if not action.spec or not action.model:
            raise PlanFileError(f"{action.address}: the plan carries no spec for this {action.kind}; make a new plan")
        container = engines.render(project, action.model, action.spec)
        if action.container and container.name != action.container:
            raise PlanFileError(
                f"{action.address}: the plan names container {action.container} but its spec "
                f"renders {container.name}; the plan was edited, make a new one"
            )
        env = container_env(container, action.model) if action.kind != "start" else {}
        return _Prepared(action, container, env)

    def _run_lane(self, lane: list[_Prepared]) -> list[Outcome]:
        results = []
        for item in lane:
            if self.interrupted.is_set():
                break
            step = {"start": self._start, "create": self._create, "recreate": self._recreate}[item.action.kind]
            try:
                results.append(step(item))
            except AigoError as exc:  # Docker refused something: report it for this model, go on with others
                self._step(item.action.address, item.action.kind, "failed", str(exc))
                results.append(Outcome(item.action.address, item.action.kind, False, str(exc)))
        return results

    # -- steps ---------------------------------------------------------------------------------
    def _pull(self, image: str, restore: dict[str, Any] | None = None) -> None:
        """Pull `image`; with apply --locked (`restore`), point its tag back at the image aigo.lock
        records: re-tag it when it is still here, else pull its digest first. A saved plan's restore
        is checked again, so an edited one cannot tag some other image."""
        if restore is None:
            pull_image(self.runtime, self.reporter, image)
        else:
            locked_id = str(restore.get("locked_id"))
            if not valid_restore(image, restore):
                raise AigoError(
                    f"image.{image}: the plan's restore of aigo.lock's image is not valid (edited by "
                    "hand?); make a new plan (nothing was changed)"
                )
            if restore["how"] == "pull":
                pull_image(self.runtime, self.reporter, restore["digest"])
            self.runtime.tag(locked_id, image)
            if (self.runtime.inspect_image(image) or {}).get("Id") != locked_id:
                raise AigoError(
                    f"image.{image}: after restoring it names another image than aigo.lock's "
                    f"{locked_id[:19]}; nothing else was changed"
                )
            self.reporter.event(
                "image_restored",
                address=f"image.{image}",
                image=image,
                image_id=locked_id,
                message=f"{image} names {locked_id[:19]} again, as aigo.lock records",
            )
        self.journal.record("pull", f"image.{image}", "ok")

    def _download(self, action: Action) -> None:
        """Fetch one model folder from the Hub (skipped when it is complete already: a saved plan
        may be older than the folder). A failure stops the apply before any container changed."""
        marker = download_folder(
            action.address,
            check_download(action),
            self.reporter,
            self.fetch,
            self.clock,
            begin=lambda: self.journal.record("download", action.address, "begin"),
        )
        if marker is None:
            self.journal.record("download", action.address, "ok", message="already on this machine")
        else:
            self.journal.record("download", action.address, "ok", commit=marker.get("commit"))

    def _remove(self, action: Action) -> Outcome:
        if action.model and self.routes:
            self._deroute(action)
        self._step(action.address, "remove", "", f"stopping and removing {action.container}")
        self.runtime.stop(action.container)
        self.runtime.remove(action.container)
        self._step(action.address, "remove", "ok", f"removed {action.container}")
        return Outcome(action.address, "remove", True, f"removed {action.container}")

    def _start(self, item: _Prepared) -> Outcome:
        action = item.action
        if self.routes:
            self._deroute(action)
        self._step(action.address, "start", "", f"starting {action.container}")
        if self.runtime.state(action.container).get("Paused"):
            self.runtime.unpause(action.container)
        else:
            self.runtime.start(action.container)
        return self._await_and_route(item, action.container, "started")

    def _create(self, item: _Prepared) -> Outcome:
        action, container = item.action, item.container
        self._step(action.address, "create", "", f"creating {container.name} from {container.image}")
        cid = self.runtime.create(container, item.env)
        try:
            self.runtime.start(cid)
        except AigoError as exc:  # e.g. its port is taken by a process outside Docker
            self.runtime.remove(cid)
            return self._failed(action, f"{exc}; the container was removed", [])
        try:
            return self._await_and_route(item, cid, "created")
        except NotReady as exc:
            self.runtime.remove(cid)  # never leave an engine that was not verified ready
            if exc.interrupted:
                self._step(
                    action.address, "create", "interrupted", f"interrupted; removed the unready {container.name}"
                )
                return Outcome(action.address, "create", False, "interrupted")
            return self._failed(action, f"{exc}; the container was removed", exc.log_tail)

    def _recreate(self, item: _Prepared) -> Outcome:
        action, container = item.action, item.container
        name, backup = container.name, container.name + BACKUP_SUFFIX
        if self.routes:
            self._deroute(action)
        self._step(action.address, "recreate", "", f"stopping {name} and keeping it as {backup}")
        self.runtime.stop(name)
        self.runtime.rename(name, backup)
        self.journal.record("backup", action.address, "ok", container=backup)
        cid = None
        try:
            self._step(action.address, "recreate", "", f"creating the new {name} from {container.image}")
            cid = self.runtime.create(container, item.env)
            self.runtime.start(cid)
            outcome = self._await_and_route(item, cid, "replaced")
        except (NotReady, AigoError) as exc:
            tail = getattr(exc, "log_tail", [])
            if cid:
                self.runtime.remove(cid)
            self.runtime.rename(backup, name)
            self.runtime.start(name)
            self.journal.record("restore", action.address, "ok", container=name)
            if getattr(exc, "interrupted", False):
                self._step(
                    action.address,
                    "recreate",
                    "interrupted",
                    f"interrupted; the previous {name} is started again (not waited for)",
                )
                return Outcome(action.address, "recreate", False, "interrupted", restored=True)
            if tail:
                self.reporter.event("log_tail", address=action.address, lines=tail)
            self._step(action.address, "recreate", "", f"restoring the previous version of {name}")
            old = self._old_route(action)
            previous = Engine(
                action.model,
                old.port,
                name,
                lambda: self.runtime.state(name),
                lambda n: self.runtime.logs_tail(name, n),
            )
            try:
                self._waiter(action).wait(previous)
                if self.routes:
                    self._route(old)
                message = f"{exc}; the previous version was restored and serves again"
            except NotReady as again:
                message = f"{exc}; the previous version was restarted but is not ready either ({again})"
            self._step(action.address, "recreate", "restored", message)
            return Outcome(action.address, "recreate", False, message, restored=True, log_tail=tail)
        self.runtime.remove(backup)
        self.journal.record("remove_backup", action.address, "ok", container=backup)
        return outcome

    # -- helpers -------------------------------------------------------------------------------
    def _await_and_route(self, item: _Prepared, container_id: str, verb: str) -> Outcome:
        action = item.action
        port = item.container.host_port
        if self.routes:  # check the router's next generation while the engine loads
            threading.Thread(target=self._stage, args=(route_of(action.model, action.spec),), daemon=True).start()
        engine = Engine(
            action.model,
            port,
            container_id,
            lambda: self.runtime.state(container_id),
            lambda n: self.runtime.logs_tail(container_id, n),
        )
        seconds = self._waiter(action).wait(engine)
        if self.routes:
            self._route(route_of(action.model, action.spec))
        message = f"{verb} {action.container}; ready after {seconds:.1f} s on 127.0.0.1:{port}"
        self._step(action.address, action.kind, "ok", message)
        return Outcome(action.address, action.kind, True, message)

    def _old_route(self, action: Action) -> Route:
        """The route of the container a recreate replaces (its port and length before the change)."""
        before = {c.path: c.before for c in action.changes}
        return Route(
            action.model,
            before.get("port") or action.spec["port"],
            before.get("context_length") or action.spec["context_length"],
            action.spec["engine"],
        )

    def _deroute(self, action: Action) -> None:
        self._wait_for_router()
        self.routes.remove(action.model)
        self.journal.record("route_remove", action.address, "ok")

    def _route(self, route: Route) -> None:
        self._wait_for_router()
        self.routes.add(route)
        self.journal.record("route_add", f"model.{route.alias}", "ok")

    def _stage(self, route: Route) -> None:
        try:
            self._wait_for_router()
            self.routes.stage(route)
        except AigoError:
            pass  # staging only saves time; add() does the full, reported reload

    def _wait_for_router(self) -> None:
        if not self._router_gate.wait(timeout=120):
            raise AigoError("the router did not come up; the route was not changed")
        if self._router_failed:
            raise AigoError(f"the router is not serving ({self._router_failed}); the route was not changed")

    # -- the router ----------------------------------------------------------------------------
    _router_failed: str = ""

    def _router_step(self, action: Action, container: ContainerSpec | None, plan: Plan) -> Outcome:
        try:
            return self._router_step_inner(action, container, plan)
        except AigoError as exc:
            self._router_failed = str(exc)
            self._step("router", action.kind, "failed", str(exc))
            return Outcome("router", action.kind, False, str(exc))
        finally:
            self._router_gate.set()

    def _router_step_inner(self, action: Action, container: ContainerSpec | None, plan: Plan) -> Outcome:
        """Create, recreate or start the router; route changes wait until it serves."""

        name = action.container
        keep = self._routes_to_keep(plan, set(running_engines(plan.project, self.runtime.list_containers())))
        if action.kind == "start":
            self._step("router", "start", "", f"starting {name}")
            self.runtime.start(name)
        else:
            # a recreate checks the new files while the old router still serves; a new router's
            # files are checked by its own start-up (a bad config makes it exit, reported below)
            self.routes.prepare_first(list(keep.values()), check=action.kind == "recreate")
            if action.kind == "recreate":
                self._step("router", "recreate", "", f"stopping {name}")
                self.runtime.stop(name, timeout=10)
                self.runtime.remove(name)
            self._step("router", action.kind, "", f"creating {name} from {container.image}")
            self.runtime.start(self.runtime.create(container, {}))
        try:
            self.wait_router(self.routes.settings)
        except AigoError as exc:
            lines = self.runtime.logs_tail(name, 20)
            if lines:
                self.reporter.event("log_tail", address="router", lines=lines)
            raise AigoError(f"router: {exc}") from None
        settings = self.routes.settings
        message = f"router serving on http://{settings.bind}:{settings.port}/v1"
        self._step("router", action.kind, "ok", message)
        return Outcome("router", action.kind, True, message)

    def _routes_to_keep(self, plan: Plan, running: set[str]) -> dict[str, Route]:
        """Routes of models that stay as they are and are running: they go into a new router at once."""
        return {
            a.model: route_of(a.model, a.spec)
            for a in plan.actions
            if a.kind == "noop" and a.model and a.spec and a.model in running
        }

    def _converge_routes(self, plan: Plan) -> list[Outcome]:
        """Last step: route exactly the models whose containers run and were routed (ready) or
        left as they were; drop stale routes; pick up template or setting changes."""
        running = set(running_engines(plan.project, self.runtime.list_containers()))
        wanted = {a: r for a, r in self.routes.routes.items() if a in running}
        wanted.update({k: v for k, v in self._routes_to_keep(plan, running).items() if k not in wanted})
        if not self.routes.converge(wanted):
            return []
        message = f"router reloaded: routes {', '.join(sorted(wanted)) or '(none)'}"
        self._step("router", "reload_router", "ok", message)
        return [Outcome("router", "reload_router", True, message)]

    def _waiter(self, action: Action) -> Waiter:
        def progress(alias: str, elapsed: float, stage: str, log: str) -> None:
            self.reporter.event("waiting", address=f"model.{alias}", elapsed=round(elapsed, 1), stage=stage, log=log)

        timeout = action.ready_timeout or DEFAULT_READY_TIMEOUT
        return self.make_waiter(timeout, should_stop=self.interrupted.is_set, on_progress=progress)

    def _failed(self, action: Action, message: str, tail: list[str]) -> Outcome:
        if tail:
            self.reporter.event("log_tail", address=action.address, lines=tail)
        self._step(action.address, action.kind, "failed", message)
        return Outcome(action.address, action.kind, False, message, log_tail=tail)

    def _step(self, address: str, step: str, outcome: str, message: str) -> None:
        self.journal.record(step, address, outcome or "begin", message=message)
        self.reporter.event("step", address=address, step=step, outcome=outcome, message=message)

    def _check_interrupt(self) -> None:
        if self.interrupted.is_set():
            raise Interrupted("interrupted")


def download_folder(
    address: str,
    spec: dict[str, Any],
    reporter: Any,
    fetch: Callable[..., dict] | None = None,
    clock: Callable[[], float] = time.monotonic,
    begin: Callable[[], None] | None = None,
) -> dict | None:
    """One model folder from the Hub with progress (`apply` and `models pull` alike): None when the
    folder is complete already (at `pin`, when aigo.lock pins it), else the new completion marker."""
    from pathlib import Path

    dest = Path(spec["dest"])
    if is_complete(read_marker(dest), spec.get("file"), spec.get("pin")):
        reporter.event(
            "step", address=address, step="download", outcome="ok", message=f"already on this machine ({dest})"
        )
        return None
    size = f" ({spec['bytes'] / 1e9:.1f} GB)" if spec.get("bytes") else ""
    reporter.event("download_start", address=address, total=spec.get("bytes"), message=f"downloading into {dest}{size}")
    if begin:
        begin()
    last = [0.0]

    def progress(done: int, total: int) -> None:
        now = clock()
        if now - last[0] >= 0.25 or done >= total:
            last[0] = now
            reporter.event("download_progress", address=address, done=done, total=total)

    marker = (fetch or _hub_download)(spec["repo"], spec["revision"], dest, spec.get("file"), progress, spec.get("pin"))
    reporter.event(
        "download_done",
        address=address,
        message=f"downloaded {len(marker.get('files', {}))} files at commit {str(marker.get('commit'))[:12]}",
    )
    return marker


def _hub_download(repo: str, revision: str, dest, file, progress, pin=None) -> dict:

    return download(repo, revision, dest, file, progress, pin)


def check_download(action: Action) -> dict[str, Any]:
    """A download's spec, re-checked like a command line: a hand-edited saved plan must not point a
    download at another folder or smuggle a strange repo, revision or file name in. The repo,
    revision and file must match the very patterns the file's schema allows."""

    allowed = schema()["$defs"]["source"]["properties"]
    spec = action.spec or {}
    repo, revision, file, dest = spec.get("repo"), spec.get("revision"), spec.get("file"), spec.get("dest")
    pin = spec.get("pin")

    def fits(value: Any, key: str) -> bool:
        return isinstance(value, str) and re.search(allowed[key]["pattern"], value) is not None

    ok = (
        fits(repo, "repo")
        and fits(revision, "revision")
        and ".." not in revision.split("/")
        and (file is None or fits(file, "file"))
        and isinstance(dest, str)
        and (pin is None or (isinstance(pin, str) and re.fullmatch(r"[0-9a-f]{40}", pin) is not None))
    )
    if ok:
        from pathlib import PurePosixPath

        layout = repo_dir(PurePosixPath("/"), repo, revision)  # the folder must end as the store lays it out
        ok = PurePosixPath(dest).is_absolute() and PurePosixPath(dest).parts[-2:] == layout.parts[-2:]
    if not ok:
        raise PlanFileError(f"{action.address}: the plan's download is not one aigo-apply makes; make a new plan")
    return spec


def pull_image(runtime: Any, reporter: Any, image: str) -> None:
    """Pull one image, reporting per-layer progress (rich bars on a TTY, JSON lines with -o json)."""
    address = f"image.{image}"
    reporter.event("pull_start", address=address, image=image)

    def progress(event: dict) -> None:
        detail = event.get("progressDetail") or {}
        if event.get("id"):
            reporter.event(
                "pull_progress",
                image=image,
                layer=event["id"],
                status=event.get("status", ""),
                current=detail.get("current"),
                total=detail.get("total"),
            )

    runtime.pull(image, progress)
    reporter.event("pull_done", address=address, image=image)


def route_of(alias: str, spec: dict[str, Any]) -> Route:
    return Route(alias, spec["port"], spec["context_length"], spec["engine"])


def gpu_lanes(items: list[_Prepared]) -> list[list[_Prepared]]:
    """Group models so that any two sharing a GPU are in the same lane (kept in plan order)."""
    lanes: list[tuple[set | str, list[_Prepared]]] = []
    for item in items:
        gpus = item.action.spec.get("gpus", "all") if item.action.spec else "all"
        if gpus == "none":
            lanes.append(("none", [item]))
            continue
        mine: set | str = "all" if gpus == "all" else set(gpus)
        overlapping = [lane for lane in lanes if lane[0] != "none" and _overlap(lane[0], mine)]
        merged_gpus: set | str = mine
        members: list[_Prepared] = []
        for lane in overlapping:
            lanes.remove(lane)
            merged_gpus = "all" if "all" in (lane[0], merged_gpus) else lane[0] | merged_gpus
            members += lane[1]
        order = {id(i): n for n, i in enumerate(items)}
        lanes.append((merged_gpus, sorted(members + [item], key=lambda i: order[id(i)])))
    return [members for _, members in lanes]


def _overlap(a: set | str, b: set | str) -> bool:
    return a == "all" or b == "all" or bool(a & b)
