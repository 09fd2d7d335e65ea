"""The router's side of an apply: create, recreate or start the router container alongside the
models, and change routes only once it serves (a gate the model lanes wait on). A route is added
only after its model is ready and removed before its container stops; the last step converges
the routes on exactly the models that run."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from aigo_apply.adapters.runtime import Runtime
from aigo_apply.config.names import NEXT_SUFFIX
from aigo_apply.desired.types import ContainerSpec, Route, RouterSettings
from aigo_apply.errors import AigoError
from aigo_apply.observe.containers import running_engines
from aigo_apply.plan.types import Action, Plan
from aigo_apply.platforms.docker.previous import serving_route
from aigo_apply.platforms.outcome import Outcome, StepLog

GATE_TIMEOUT = 120.0  # seconds a route change waits for a starting router
LISTED_TIMEOUT = 10.0  # the longest the last step waits for every routed model to be listed
START_TIMEOUT = 30.0  # the longest a started router may take to answer


class Routes(Protocol):
    """The deployed routes (platforms/docker/router_deploy.py's Router): staged and checked while an engine loads,
    added once it is ready, removed before its container stops."""

    routes: dict[str, Route]
    settings: RouterSettings
    sockets_dir: str  # the project's engine sockets on this machine (a socket route's engine is there)

    def stage(self, route: Route) -> None: ...
    def add(self, route: Route) -> None: ...
    def remove(self, alias: str) -> None: ...
    def converge(self, routes: dict[str, Route]) -> bool: ...
    def wait_listed(self, aliases: set[str], timeout: float) -> set[str]: ...
    def answer(self) -> str: ...
    def prepare_first(self, routes: list[Route], check: bool = True) -> None: ...
    def drain(self) -> float: ...
    def hold(self, alias: str, seconds: float, route: Route | None = None, to: Route | None = None) -> None: ...
    def release(self, alias: str) -> None: ...
    def remove_files(self) -> None: ...


def router_answer(routes: Routes) -> str:
    """The executor's look at who answers on the router's port once its container started: "" when it
    is this project's router (platforms/docker/router_deploy.py Router.answer), else what answered."""
    return routes.answer()


class RouterSteps:
    def __init__(
        self,
        runtime: Runtime,
        routes: Routes,
        log: StepLog,
        wait_router: Callable[[Routes], str | None],
        start_timeout: float = START_TIMEOUT,
    ):
        self.runtime, self.routes, self.log, self.wait_router = runtime, routes, log, wait_router
        self.gate = threading.Event()  # set while the router can take route changes
        self.gate.set()
        self.failed = ""  # why the router is not serving, once its step failed
        self.start_timeout = start_timeout

    # -- the router container --------------------------------------------------------------
    def begin(self) -> None:
        """Route changes wait from now until the router step ends."""
        self.gate.clear()

    def run(self, action: Action, container: ContainerSpec | None, plan: Plan) -> Outcome:
        try:
            return self._run(action, container, plan)
        except AigoError as exc:
            self.failed = str(exc)
            self.log.step("router", action.kind, "failed", str(exc))
            return Outcome("router", action.kind, False, str(exc))
        finally:
            self.gate.set()

    def _run(self, action: Action, container: ContainerSpec | None, plan: Plan) -> Outcome:
        """Create, recreate or start the router; route changes wait until it serves."""
        name = action.container or ""
        keep = self.routes_to_keep(plan, set(running_engines(plan.project, self.runtime.list_containers())), True)
        made = "created"  # what a router that does not come up leaves behind is undone (_undo)
        if action.kind == "start":
            # the files it starts with are this run's (keys, settings): its answer is checked with them
            self.routes.prepare_first(list(keep.values()), check=True)
            self.log.step("router", "start", "", f"starting {name}")
            self.runtime.start(name)
            made = "started"
        else:
            assert container is not None
            # the new files are checked with `haproxy -c` before any container changes (a recreate's
            # old router still serves): a failed check shows HAProxy's own words, not a start-up timeout
            self.routes.prepare_first(list(keep.values()), check=True)
            if action.kind == "recreate" and self.runtime.state(name).get("Running"):
                self._replace_beside(name, container)
                made = "replaced"
            else:
                if action.kind == "recreate":
                    self.log.step("router", "recreate", "", f"removing the stopped {name}")
                    self.runtime.remove(name)
                self.log.step("router", action.kind, "", f"creating {name} from {container.image}")
                self.runtime.start(self.runtime.create(container, {}))
        try:
            self._await_ours(name)
        except AigoError as exc:
            lines = self.runtime.logs_tail(name, 20)
            if lines:
                self.log.reporter.event("log_tail", address="router", lines=lines)
            raise AigoError(f"router: {exc}{self._undo(name, made, lines)}") from None
        settings = self.routes.settings
        message = f"router serving on http://{settings.bind}:{settings.port}/v1"
        self.log.step("router", action.kind, "ok", message)
        return Outcome("router", action.kind, True, message)

    def _await_ours(self, name: str) -> None:
        """Until this project's router answers on its port (`wait_router`: one look, "" or None when it
        is ours, else what answered), never any other program that holds the port and answers in its
        place. A container that exits or restarts (HAProxy could not bind: the port is taken) fails at
        once, not after the timeout."""
        timeout = self.start_timeout
        deadline, started, last = time.monotonic() + timeout, None, "no answer"
        while True:
            state = self.runtime.state(name)
            started = started or state.get("StartedAt")
            if not state.get("Running") or state.get("Restarting") or state.get("StartedAt") != started:
                other = f"; another program answered on its port ({last})" if last.startswith("HTTP") else ""
                raise AigoError(f"its container exited (code {state.get('ExitCode')}) before it answered{other}")
            last = self.wait_router(self.routes) or ""
            if not last:
                return
            if time.monotonic() > deadline:
                raise AigoError(f"it did not answer as this project's router within {timeout:.0f} s ({last})")
            time.sleep(0.05)

    def _undo(self, name: str, made: str, lines: list[str]) -> str:
        """A router that did not come up is not left behind restarting forever (Docker's unless-stopped
        starts it again and again while its port is taken): the one this step created is removed, the
        one it started is stopped again, a replace's new one is stopped unless it runs. Says what was
        done, and why HAProxy could not listen when its log says so."""
        settings = self.routes.settings
        why = ""
        if any("cannot bind socket" in line for line in lines):
            why = (
                f"; HAProxy cannot listen on {settings.bind}:{settings.port}: another program holds the port "
                "(`aigo-apply plan` names it): stop it, or choose another router.port"
            )
        try:
            if made == "created":
                self.runtime.remove(name)
                return f"{why}; the router container {name} was removed"
            state = self.runtime.state(name)
            if made == "started" or not state.get("Running") or state.get("Restarting"):
                self.runtime.stop(name, timeout=5)
                return f"{why}; the router container {name} was stopped"
        except AigoError as exc:
            undone = "removed" if made == "created" else "stopped"
            return f"{why}; the router container {name} could not be {undone} ({exc}): docker rm -f {name}"
        return why

    def _replace_beside(self, name: str, container: ContainerSpec) -> None:
        """The new router starts beside the serving one: HAProxy listens with SO_REUSEPORT, so both
        take connections on the same address (same user) until the old one soft-stops (SIGUSR1: it
        closes its listeners at once, finishes its requests, then exits). No connection is refused.
        A new router that does not start is removed, and the old one never stopped serving."""
        temporary = name + NEXT_SUFFIX
        if self.runtime.state(temporary):
            raise AigoError(
                f"a container named {temporary} exists, and a router replace starts the new router under that "
                f"name; remove it (docker rm -f {temporary}) and apply again (the router was not changed)"
            )
        self.log.step("router", "recreate", "", f"starting the new {name} beside the serving one")
        cid = self.runtime.create(replace(container, name=temporary), {})
        try:
            self.runtime.start(cid)
            self._await_listening(cid)
        except AigoError as exc:
            lines = self.runtime.logs_tail(cid, 20)
            if lines:
                self.log.reporter.event("log_tail", address="router", lines=lines)
            self.runtime.remove(cid)
            raise AigoError(f"the new router did not start ({exc}); the previous one kept serving") from None
        self.runtime.kill(name, "SIGUSR1")
        deadline = time.monotonic() + self.routes.settings.timeout_s + 10
        while self.runtime.state(name).get("Running") and time.monotonic() < deadline:
            time.sleep(0.05)
        self.runtime.remove(name)
        self.runtime.rename(cid, name)
        self.log.step("router", "recreate", "", f"the previous {name} finished its requests and was removed")

    def _await_listening(self, container: str, timeout: float = 30.0) -> None:
        """HAProxy's master binds the listeners, then forks its worker: two processes mean it
        listens; a master that could not bind exits."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.runtime.state(container)
            if not state.get("Running"):
                raise AigoError(f"it exited with code {state.get('ExitCode')}")
            if self.runtime.process_count(container) >= 2:
                return
            time.sleep(0.05)
        raise AigoError(f"it was not listening after {timeout:.0f} s")

    # -- routes ----------------------------------------------------------------------------
    def deroute(self, action: Action) -> None:
        self._wait_for_router()
        self.routes.remove(action.model or "")
        self.log.journal.record("route_remove", action.address, "ok")

    def route(self, route: Route) -> None:
        self._wait_for_router()
        self.routes.add(route)
        self.log.journal.record("route_add", f"model.{route.alias}", "ok")

    def drain(self) -> float:
        """Wait until the requests the router took before its last reload are answered."""
        self._wait_for_router()
        return self.routes.drain()

    def hold(self, action: Action, to: Route | None = None) -> None:
        """The model's new requests wait in the router while its engine is replaced, then go to `to`
        (None: where its engine serves now), the one place the holding worker can send them."""
        self._wait_for_router()
        seconds = (action.ready_timeout or 1800.0) + self.routes.settings.timeout_s + 60
        self.routes.hold(action.model or "", seconds, serving_route(action), to)
        self.log.journal.record("hold", action.address, "ok")

    def release(self, alias: str) -> None:
        """Let the held requests go on; quietly, as much as it can (a failed reload leaves the hold
        to expire in the router's files, where the next apply's routes replace it)."""
        try:
            self.routes.release(alias)
            self.log.journal.record("release", f"model.{alias}", "ok")
        except AigoError as exc:
            self.log.journal.record("release", f"model.{alias}", "failed", error=str(exc))

    def stage(self, route: Route) -> None:
        try:
            self._wait_for_router()
            self.routes.stage(route)
        except AigoError:
            pass  # staging only saves time; add() does the full, reported reload

    def _wait_for_router(self) -> None:
        if not self.gate.wait(timeout=GATE_TIMEOUT):
            raise AigoError("the router did not come up; the route was not changed")
        if self.failed:
            raise AigoError(f"the router is not serving ({self.failed}); the route was not changed")

    def routes_to_keep(self, plan: Plan, running: set[str], replaced: bool = False) -> dict[str, Route]:
        """Routes of running models that stay as they are. With `replaced` (what a new router starts
        with), also each model whose engine this apply replaces, to the engine that serves it now,
        until its own step holds it or moves its route: else a router made anew in the same apply
        would not know it, a 404, from its start to the end of that model's replace."""
        kinds = ("noop", "recreate") if replaced else ("noop",)
        return {
            a.model: Route.of(a.model, a.spec, a.slot) if a.kind == "noop" else serving_route(a)
            for a in plan.actions
            if a.kind in kinds and a.model and a.spec and a.model in running
        }

    def converge(self, plan: Plan) -> list[Outcome]:
        """Last step: route exactly the models whose containers run and were routed (ready) or
        left as they were; drop stale routes; pick up template or setting changes."""
        running = set(running_engines(plan.project, self.runtime.list_containers()))
        wanted = {a: r for a, r in self.routes.routes.items() if a in running}
        wanted.update({k: v for k, v in self.routes_to_keep(plan, running).items() if k not in wanted})
        reloaded = self.routes.converge(wanted)
        # apply is done when every routed model is listed: the router's own health check sees its
        # engine up in the worker that serves now (a worker a reload started checks afresh)
        missing = self.routes.wait_listed(set(wanted), LISTED_TIMEOUT)
        if missing:
            self.log.step(
                "router",
                "reload_router",
                "",
                f"not yet passing the router's health check after {LISTED_TIMEOUT:.0f} s: {', '.join(sorted(missing))} "
                "(/v1/models lists a model once it does)",
            )
        if not reloaded:
            return []
        message = f"router reloaded: routes {', '.join(sorted(wanted)) or '(none)'}"
        self.log.step("router", "reload_router", "ok", message)
        return [Outcome("router", "reload_router", True, message)]
