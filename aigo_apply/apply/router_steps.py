"""The router's side of an apply: create, recreate or start the router container alongside the
models, and change routes only once it serves (a gate the model lanes wait on). A route is added
only after its model is ready and removed before its container stops; the last step converges
the routes on exactly the models that run."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from aigo_apply.adapters.runtime import Runtime
from aigo_apply.apply.outcome import Outcome, StepLog
from aigo_apply.desired.types import ContainerSpec, Route, RouterSettings
from aigo_apply.errors import AigoError
from aigo_apply.observe.containers import running_engines
from aigo_apply.plan.types import Action, Plan

GATE_TIMEOUT = 120.0  # seconds a route change waits for a starting router


class Routes(Protocol):
    """The deployed routes (router/deploy.py's Router): staged and checked while an engine loads,
    added once it is ready, removed before its container stops."""

    routes: dict[str, Route]
    settings: RouterSettings
    sockets_dir: str  # the project's engine sockets on this machine (a socket route's engine is there)

    def stage(self, route: Route) -> None: ...
    def add(self, route: Route) -> None: ...
    def remove(self, alias: str) -> None: ...
    def converge(self, routes: dict[str, Route]) -> bool: ...
    def prepare_first(self, routes: list[Route], check: bool = True) -> None: ...
    def remove_files(self) -> None: ...


class RouterSteps:
    def __init__(self, runtime: Runtime, routes: Routes, log: StepLog, wait_router: Callable[[RouterSettings], None]):
        self.runtime, self.routes, self.log, self.wait_router = runtime, routes, log, wait_router
        self.gate = threading.Event()  # set while the router can take route changes
        self.gate.set()
        self.failed = ""  # why the router is not serving, once its step failed

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
        keep = self.routes_to_keep(plan, set(running_engines(plan.project, self.runtime.list_containers())))
        if action.kind == "start":
            self.log.step("router", "start", "", f"starting {name}")
            self.runtime.start(name)
        else:
            assert container is not None
            # the new files are checked with `haproxy -c` before any container changes (a recreate's
            # old router still serves): a failed check shows HAProxy's own words, not a start-up timeout
            self.routes.prepare_first(list(keep.values()), check=True)
            if action.kind == "recreate":
                self.log.step("router", "recreate", "", f"stopping {name}")
                self.runtime.stop(name, timeout=10)
                self.runtime.remove(name)
            self.log.step("router", action.kind, "", f"creating {name} from {container.image}")
            self.runtime.start(self.runtime.create(container, {}))
        try:
            self.wait_router(self.routes.settings)
        except AigoError as exc:
            lines = self.runtime.logs_tail(name, 20)
            if lines:
                self.log.reporter.event("log_tail", address="router", lines=lines)
            raise AigoError(f"router: {exc}") from None
        settings = self.routes.settings
        message = f"router serving on http://{settings.bind}:{settings.port}/v1"
        self.log.step("router", action.kind, "ok", message)
        return Outcome("router", action.kind, True, message)

    # -- routes ----------------------------------------------------------------------------
    def deroute(self, action: Action) -> None:
        self._wait_for_router()
        self.routes.remove(action.model or "")
        self.log.journal.record("route_remove", action.address, "ok")

    def route(self, route: Route) -> None:
        self._wait_for_router()
        self.routes.add(route)
        self.log.journal.record("route_add", f"model.{route.alias}", "ok")

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

    def routes_to_keep(self, plan: Plan, running: set[str]) -> dict[str, Route]:
        """Routes of models that stay as they are and are running: they go into a new router at once."""
        return {
            a.model: Route.of(a.model, a.spec)
            for a in plan.actions
            if a.kind == "noop" and a.model and a.spec and a.model in running
        }

    def converge(self, plan: Plan) -> list[Outcome]:
        """Last step: route exactly the models whose containers run and were routed (ready) or
        left as they were; drop stale routes; pick up template or setting changes."""
        running = set(running_engines(plan.project, self.runtime.list_containers()))
        wanted = {a: r for a, r in self.routes.routes.items() if a in running}
        wanted.update({k: v for k, v in self.routes_to_keep(plan, running).items() if k not in wanted})
        if not self.routes.converge(wanted):
            return []
        message = f"router reloaded: routes {', '.join(sorted(wanted)) or '(none)'}"
        self.log.step("router", "reload_router", "ok", message)
        return [Outcome("router", "reload_router", True, message)]
