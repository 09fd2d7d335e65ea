"""One model's steps: remove, start, create and replace, each waiting until the engine really
serves before its route is added. A parallel replace starts the new engine beside the serving one
(as NAME-aigo-next, on the model's other socket), moves the route to it once it serves, lets the old
one drain and then removes it; the old one never stops serving if the new one fails. A recreate
keeps the old container (renamed NAME-aigo-previous) until the new one is ready, and puts it back
when the new one fails or the user interrupts. The plan
refuses a foreign container at that name; a recreate checks again, right before it stops anything,
that the name is free, so a container made since is never stopped around, renamed or removed."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from aigo_apply.adapters.runtime import Runtime
from aigo_apply.config.defaults import DEFAULT_READY_TIMEOUT
from aigo_apply.config.names import NEXT_SUFFIX
from aigo_apply.desired.spec import ModelSpec
from aigo_apply.desired.types import ContainerSpec, EngineAddress, Route
from aigo_apply.errors import AigoError, CanaryRefused, NotReady
from aigo_apply.json_types import JsonObject, json_object
from aigo_apply.plan.types import Action
from aigo_apply.platforms.docker import failed_starts, start_records
from aigo_apply.platforms.docker.canary_run import replace_gate
from aigo_apply.platforms.docker.engine_drain import wait_idle
from aigo_apply.platforms.docker.previous import old_address, old_route, old_slot, old_spec
from aigo_apply.platforms.docker.router_steps import RouterSteps
from aigo_apply.platforms.docker.serving_wait import Engine, Waiter
from aigo_apply.platforms.docker.sleep_replace import Item, replace_asleep
from aigo_apply.platforms.docker.swap_steps import engine_call
from aigo_apply.platforms.outcome import Outcome, StepLog

BACKUP_SUFFIX = "-aigo-previous"
DRAIN_BUDGET_S = 600.0  # no router to say its timeout: the router's default
STAGE_JOIN_TIMEOUT = 30.0  # seconds a step waits for its staging check (`haproxy -c` takes well under one)


@dataclass
class Prepared:
    """An action with its container rendered (and re-checked) and its secrets resolved."""

    action: Action
    container: ContainerSpec | None = None
    env: dict[str, str] = field(default_factory=dict)


class ModelSteps:
    def __init__(
        self,
        runtime: Runtime,
        log: StepLog,
        router: RouterSteps | None,
        interrupted: threading.Event,
        make_waiter: Callable[..., Waiter],
        evidence: Path | None = None,
        on_ready: Callable[[str, ModelSpec | None, EngineAddress], None] | None = None,
        call: Callable[[EngineAddress, str, str], tuple[int, str]] = engine_call,
    ):
        """`on_ready`: called once a model is proven ready, before its route is added
        (platforms/docker/swap_steps.py: an on-demand model goes to sleep then); an AigoError from it
        fails the step like a refused route. `call`: the engine's /sleep and /wake_up (a sleep replace)."""
        self.runtime, self.log, self.router = runtime, log, router
        self.interrupted, self.make_waiter = interrupted, make_waiter
        self.evidence = evidence  # the project's state folder, where a failed start's log is kept
        self.on_ready, self.call = on_ready, call

    def run(self, item: Prepared) -> Outcome:
        way = item.action.strategy.name if item.action.kind == "recreate" and item.action.strategy else ""
        if way == "parallel":
            return self.replace_parallel(item)
        if way == "sleep":  # the old engine sleeps while the new one starts (platforms/docker/sleep_replace.py)
            return replace_asleep(self, item, _container(item))
        step = {"start": self.start, "create": self.create, "recreate": self.recreate}[item.action.kind]
        return step(item)

    def remove(self, action: Action) -> Outcome:
        container = action.container or ""
        if action.model and self.router:
            self.router.deroute(action)
        self.log.step(action.address, "remove", "", f"stopping and removing {container}")
        self.runtime.stop(container)
        self.runtime.remove(container)
        self.log.step(action.address, "remove", "ok", f"removed {container}")
        return Outcome(action.address, "remove", True, f"removed {container}")

    def start(self, item: Prepared) -> Outcome:
        action, name = item.action, item.action.container or ""
        if self.router:
            self.router.deroute(action)
        self.log.step(action.address, "start", "", f"starting {name}")
        paused = bool(self.runtime.state(name).get("Paused"))
        if paused:
            self.runtime.unpause(name)
        else:
            self.runtime.start(name)
        try:
            return self._await_and_route(item, name, "started", timed=not paused)
        except NotReady as exc:  # it stays as Docker keeps it (its restart policy), without a route
            if exc.interrupted:
                self.log.step(action.address, "start", "interrupted", f"interrupted; {name} was started, not routed")
                return Outcome(action.address, "start", False, "interrupted")
            exc = self._keep_evidence(action, name, None, exc)
            return self.log.failed(action.address, action.kind, f"{exc}; no route was added", exc.log_tail)
        except AigoError as exc:  # ready, but the router refused the route
            return self.log.failed(action.address, action.kind, f"{name} serves but is not routed: {exc}", [])

    def create(self, item: Prepared) -> Outcome:
        action, container = item.action, _container(item)
        self.log.step(action.address, "create", "", f"creating {container.name} from {container.image}")
        cid = self.runtime.create(container, item.env)
        try:
            self.runtime.start(cid)
        except AigoError as exc:  # e.g. its port is taken by a process outside Docker
            self.runtime.remove(cid)
            return self.log.failed(action.address, action.kind, f"{exc}; the container was removed", [])
        try:
            return self._await_and_route(item, cid, "created")
        except AigoError as exc:  # not ready, or ready but its route could not be added
            if isinstance(exc, NotReady):
                exc = self._keep_evidence(action, cid, container, exc)
            self.runtime.remove(cid)  # never leave an engine that was not verified ready and routed
            if not isinstance(exc, NotReady):
                return self.log.failed(action.address, action.kind, f"{exc}; the container was removed", [])
            if exc.interrupted:
                self.log.step(
                    action.address, "create", "interrupted", f"interrupted; removed the unready {container.name}"
                )
                return Outcome(action.address, "create", False, "interrupted")
            return self.log.failed(action.address, action.kind, f"{exc}; the container was removed", exc.log_tail)

    def recreate(self, item: Prepared) -> Outcome:
        action, container = item.action, _container(item)
        name, backup = container.name, container.name + BACKUP_SUFFIX
        if self.runtime.state(backup):  # made after the plan: nothing is touched, the model keeps serving
            return self.log.failed(
                action.address,
                action.kind,
                f"a container named {backup} exists, and a replace keeps the previous {name} under that name; "
                f"aigo-apply did not touch either: remove or rename {backup} (docker rm -f {backup}), then "
                "apply again",
                [],
            )
        held = self._hold(action)
        try:
            return self._recreate(item, container, name, backup)
        finally:
            if held and self.router:
                self.router.release(action.model or "")

    def _hold(self, action: Action, to: Route | None = None) -> bool:
        """Before an engine stops: the router holds the model's new requests (to pass them to the new
        one, at `to`: None for the same socket) and the requests it already forwarded finish. A
        router that cannot hold (its reload refused) takes the route away instead, as a recreate did
        before holds."""
        if not self.router:
            return False
        try:
            self.router.hold(action, to)
            held = True
        except AigoError:
            self.router.deroute(action)
            held = False
        waited = self.router.drain()
        idle = self._engine_drain(action, old_address(action))
        self.log.step(
            action.address,
            "recreate",
            "",
            f"requests held by the router; the running ones finished in {waited:.1f} s{idle}",
        )
        return held

    def _engine_drain(self, action: Action, address: EngineAddress) -> str:
        """Until the engine about to stop has no request in hand (platforms/docker/engine_drain.py), at most
        router.timeout; what to add to the step's words."""
        budget = self.router.routes.settings.timeout_s if self.router else DRAIN_BUDGET_S
        engine = str((action.spec or {}).get("engine") or "vllm")
        seconds, left = wait_idle(address, engine, budget, self.interrupted.is_set)
        if left is None:
            return ""
        if left > 0:
            return f"; the engine still had {left:.0f} request(s) after {seconds:.0f} s (router.timeout)"
        return f", the engine's own in {seconds:.1f} s"

    def _recreate(self, item: Prepared, container: ContainerSpec, name: str, backup: str) -> Outcome:
        action = item.action
        self.log.step(action.address, "recreate", "", f"stopping {name} and keeping it as {backup}")
        try:
            self.runtime.stop(name)
            self.runtime.rename(name, backup)
        except AigoError as exc:  # the previous container keeps its name: bring it back as it was
            return self._serve_previous(action, name, exc)
        self.log.journal.record("backup", action.address, "ok", container=backup)
        cid = None
        try:
            self.log.step(action.address, "recreate", "", f"creating the new {name} from {container.image}")
            cid = self.runtime.create(container, item.env)
            self.runtime.start(cid)
            outcome = self._await_and_route(item, cid, "replaced")
        except (NotReady, AigoError) as exc:
            if cid:
                if isinstance(exc, NotReady):
                    exc = self._keep_evidence(action, cid, container, exc)
                self.runtime.remove(cid)
            return self._restore(action, name, backup, exc)
        self.runtime.remove(backup)
        self.log.journal.record("remove_backup", action.address, "ok", container=backup)
        return outcome

    def replace_parallel(self, item: Prepared) -> Outcome:
        """The new engine beside the serving one; the route moves to it once it serves (one reload),
        the old one drains (every request it took is answered) and goes, and the new one takes the
        model's name. Until the route moves nothing of the old one changed: a new engine that does not
        serve is removed, and the model served throughout."""
        action, container = item.action, _container(item)
        name, temporary = container.name, container.name + NEXT_SUFFIX
        if self.runtime.state(temporary):  # made after the plan: nothing is touched
            return self.log.failed(
                action.address,
                action.kind,
                f"a container named {temporary} exists, and a parallel replace starts the new {name} under that "
                f"name; aigo-apply did not touch it: remove it (docker rm -f {temporary}), then apply again",
                [],
            )
        self.log.step(action.address, "recreate", "", f"starting the new {name} beside the serving one")
        cid = None
        gate = self._gate(action)
        try:
            cid = self.runtime.create(replace(container, name=temporary), item.env)
            self.runtime.start(cid)
            outcome = self._await_and_route(item, cid, "replaced", gate)
        except BaseException as exc:  # the route did not move: the new engine goes, whatever stopped it
            if cid and isinstance(exc, NotReady):
                exc = self._keep_evidence(action, cid, container, exc)
            if cid:
                self.runtime.remove(cid)
            if not isinstance(exc, AigoError):
                raise
            if isinstance(exc, CanaryRefused):
                message = f"{exc}; the new engine was removed, and the previous {name} served throughout"
                self.log.step(action.address, "recreate", "restored", message)
                return Outcome(
                    action.address, "recreate", False, message, restored=True, canary=json_object(exc.result)
                )
            tail = getattr(exc, "log_tail", [])
            if getattr(exc, "interrupted", False):
                self.log.step(action.address, "recreate", "interrupted", f"interrupted; {name} kept serving")
                return Outcome(action.address, "recreate", False, "interrupted", restored=True)
            if tail:
                self.log.reporter.event("log_tail", address=action.address, lines=tail)
            message = f"{exc}; the new engine was removed, and the previous {name} served throughout"
            self.log.step(action.address, "recreate", "restored", message)
            return Outcome(action.address, "recreate", False, message, restored=True, log_tail=tail)
        self.log.journal.record("route_moved", action.address, "ok", container=temporary)
        waited = self.router.drain() if self.router else 0.0
        idle = self._engine_drain(action, EngineAddress.of(old_spec(action), old_slot(action)))
        self.runtime.stop(name)
        self.runtime.remove(name)
        self.runtime.rename(cid, name)
        self.log.journal.record("remove_previous", action.address, "ok", container=name)
        drained = f"drained in {waited:.1f} s{idle} and was removed"
        message = f"{outcome.message}; the previous one {drained}"
        self.log.step(action.address, action.kind, "ok", f"the previous {name} {drained}")
        return Outcome(action.address, action.kind, True, message, canary=outcome.canary)

    def _keep_evidence(
        self, action: Action, container_id: str, container: ContainerSpec | None, exc: NotReady
    ) -> NotReady:
        """Before a failed engine is removed: its whole log kept (platforms/docker/failed_starts.py)."""
        if self.evidence is None:
            return exc
        return failed_starts.kept(self.runtime, self.log.journal, self.evidence, action, container_id, container, exc)

    def _gate(self, action: Action) -> Callable[[EngineAddress], JsonObject | None] | None:
        return replace_gate(action, old_spec(action), self.log, self.interrupted.is_set)

    def _restore(self, action: Action, name: str, backup: str, exc: AigoError) -> Outcome:
        """The new container failed or was interrupted: the previous one takes its name back."""
        try:
            self.runtime.rename(backup, name)
        except AigoError as again:
            message = f"{exc}; the previous version could not take its name back ({again}): it is kept as {backup}"
            self.log.step(action.address, "recreate", "failed", message)
            return Outcome(action.address, "recreate", False, message)
        return self._serve_previous(action, name, exc)

    def _serve_previous(self, action: Action, name: str, exc: AigoError) -> Outcome:
        """Start the previous container (under its own name) again, wait for it and route it: a
        failed replacement must not leave a model that served before without its route."""
        tail = getattr(exc, "log_tail", [])
        try:
            if not self.runtime.state(name).get("Running"):
                self.runtime.start(name)
        except AigoError as again:
            message = f"{exc}; the previous {name} could not be started again ({again})"
            self.log.step(action.address, "recreate", "failed", message)
            return Outcome(action.address, "recreate", False, message)
        self.log.journal.record("restore", action.address, "ok", container=name)
        if getattr(exc, "interrupted", False):
            # not waited for, but routed again: the router's health check keeps it out until it
            # answers, and an apply that is interrupted must not leave a serving model unrouted
            routed = self._route_quietly(old_route(action))
            message = (
                f"interrupted; the previous {name} is started again (not waited for{'' if routed else ', not routed'})"
            )
            self.log.step(action.address, "recreate", "interrupted", message)
            return Outcome(action.address, "recreate", False, "interrupted", restored=True)
        if tail:
            self.log.reporter.event("log_tail", address=action.address, lines=tail)
        self.log.step(action.address, "recreate", "", f"restoring the previous version of {name}")
        old, where = old_route(action), old_address(action)
        previous = Engine(
            action.model or "",
            where,
            name,
            lambda: self.runtime.state(name),
            lambda n: self.runtime.logs_tail(name, n),
        )
        try:
            self._waiter(action).wait(previous)
            if self.router:
                self.router.route(old)
            message = f"{exc}; the previous version was restored and serves again"
        except NotReady as again:
            message = f"{exc}; the previous version was restarted but is not ready either ({again})"
        except AigoError as again:  # ready, but the router refused its route
            message = f"{exc}; the previous version was restored and serves, but is not routed ({again})"
        self.log.step(action.address, "recreate", "restored", message)
        return Outcome(action.address, "recreate", False, message, restored=True, log_tail=tail)

    def _route_quietly(self, route: Route) -> bool:
        if not self.router:
            return False
        try:
            self.router.route(route)
            return True
        except AigoError:
            return False

    def _await_and_route(
        self,
        item: Item,
        container_id: str,
        verb: str,
        gate: Callable[[EngineAddress], JsonObject | None] | None = None,
        timed: bool = True,
    ) -> Outcome:
        """Wait until the engine serves, run the replace's gate, add its route; then keep the start's
        record (`timed`: a start, not an unpause), after the route: reading its log adds nothing to
        the time the model is away."""
        action, alias = item.action, item.action.model or ""
        address = EngineAddress.of(action.spec or {}, action.slot)
        route = Route.of(alias, action.spec or {}, action.slot)
        stager = None
        if self.router:  # check the router's next generation while the engine loads
            stager = threading.Thread(target=self.router.stage, args=(route,), daemon=True, name=f"aigo-stage-{alias}")
            stager.start()
        engine = Engine(
            alias,
            address,
            container_id,
            lambda: self.runtime.state(container_id),
            lambda n: self.runtime.logs_tail(container_id, n),
        )
        try:
            seconds = self._waiter(action).wait(engine)
        finally:  # the staging never outlives its step (nor writes the router's folder after it)
            if stager is not None:
                stager.join(timeout=STAGE_JOIN_TIMEOUT)
        measured = gate(address) if gate is not None else None  # refuses by raising CanaryRefused
        if self.on_ready:
            self.on_ready(alias, action.model_spec, address)
        if self.router:
            self.router.route(route)
        if timed and self.evidence is not None:  # a record that cannot be kept is journaled: the engine serves
            start_records.kept(
                self.runtime, self.log.journal, self.evidence, action, container_id, item.container, seconds
            )
        message = f"{verb} {action.container}; ready after {seconds:.1f} s on {address}"
        if measured is not None:
            message += f"; canary passed: {measured['reason']}"
        self.log.step(action.address, action.kind, "ok", message)
        return Outcome(action.address, action.kind, True, message, canary=measured)

    def _waiter(self, action: Action) -> Waiter:
        def progress(alias: str, elapsed: float, stage: str, log: str) -> None:
            self.log.reporter.event(
                "waiting", address=f"model.{alias}", elapsed=round(elapsed, 1), stage=stage, log=log
            )

        timeout = action.ready_timeout or DEFAULT_READY_TIMEOUT
        return self.make_waiter(timeout, should_stop=self.interrupted.is_set, on_progress=progress)


def _container(item: Prepared) -> ContainerSpec:
    if item.container is None:
        raise AigoError(f"{item.action.address}: no container was rendered for this {item.action.kind}")
    return item.container
