"""A replace that puts the old engine to sleep instead of stopping it (the plan's "sleep" way,
plan/replace_strategy.py), in its own module because its order and its way back are its own:

  1. the router holds the model's requests and the old engine finishes the ones it has (as a recreate);
  2. the old engine sleeps (vLLM sleep level 1: its weights to host memory, its KV cache freed), keeping
     its container, its name and its socket;
  3. the new engine starts on the model's other socket (as NAME-aigo-next) in the GPU memory the old one
     freed; once it serves, the route moves to it, the held requests go on to it, and the old one goes;
  4. a new engine that fails (or an apply interrupted meanwhile) is removed, and the old one wakes
     (seconds: its weights back from host memory, not a whole start), is proven serving and takes its
     route back. One that cannot be woken is restarted as a recreate's old engine would be.

The router's worker that holds the requests sends them, once free, where its own configuration
says, and a worker keeps its configuration until its last request is answered: so the hold names the
new engine's socket (the way things usually end), and a way back, where the route did not move, links
that socket's path to the old engine's until the held requests are answered (`_bridge`), so no held
request meets an engine that is asleep, stopped or gone.

An old engine that cannot be put to sleep changes nothing: it serves on, and the step fails saying so.
Engines are reached at their own socket, as swap groups reach them (platforms/docker/swap_steps.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from aigo_apply.adapters.runtime import Runtime
from aigo_apply.config.names import NEXT_SUFFIX
from aigo_apply.desired.types import ContainerSpec, EngineAddress, Route
from aigo_apply.errors import AigoError, NotReady
from aigo_apply.plan.types import Action
from aigo_apply.platforms.docker.previous import old_address, old_route
from aigo_apply.platforms.docker.router_steps import RouterSteps
from aigo_apply.platforms.docker.serving_wait import Engine, Waiter
from aigo_apply.platforms.outcome import Outcome, StepLog

SLEEP = "/sleep?level=1&mode=wait"  # level 1 keeps the weights in host memory; `wait`: running requests finish


class Steps(Protocol):
    """What this way uses of platforms/docker/model_steps.ModelSteps (which calls it: it is not imported here)."""

    runtime: Runtime
    log: StepLog
    router: RouterSteps | None
    call: Callable[[EngineAddress, str, str], tuple[int, str]]

    def _hold(self, action: Action, to: Route | None = None) -> bool: ...
    def _await_and_route(self, item: Item, container_id: str, verb: str) -> Outcome: ...
    def _keep_evidence(
        self, action: Action, container_id: str, container: ContainerSpec | None, exc: NotReady
    ) -> NotReady: ...
    def _route_quietly(self, route: Route) -> bool: ...
    def _serve_previous(self, action: Action, name: str, exc: AigoError) -> Outcome: ...
    def _waiter(self, action: Action) -> Waiter: ...


class Item(Protocol):
    """platforms/docker/model_steps.Prepared: the action, with its container rendered and secrets resolved."""

    action: Action
    container: ContainerSpec | None
    env: dict[str, str]


def replace_asleep(steps: Steps, item: Item, container: ContainerSpec) -> Outcome:
    """Replace `item`'s model with its old engine asleep meanwhile (see the module's docstring)."""
    action = item.action
    name, temporary = container.name, container.name + NEXT_SUFFIX
    if steps.runtime.state(temporary):  # made after the plan: nothing is touched
        return steps.log.failed(
            action.address,
            action.kind,
            f"a container named {temporary} exists, and this replace starts the new {name} under that name "
            f"while the old one sleeps; aigo-apply did not touch it: remove it (docker rm -f {temporary}), then "
            "apply again",
            [],
        )
    run = _Run(
        steps, item, container, steps._hold(action, Route.of(action.model or "", action.spec or {}, action.slot))
    )
    try:
        return run.replace_beside(temporary)
    finally:
        run.release()


class _Run:
    def __init__(self, steps: Steps, item: Item, container: ContainerSpec, held: bool):
        self.steps, self.item, self.container, self.held = steps, item, container, held
        self.action = item.action
        self.name = container.name
        self.moved = False  # whether the route moved to the new engine

    def release(self) -> None:
        """The held requests go on (once): to the new engine after the route moved; else, through the
        new engine's socket path linked to the old one's, to the old one, whose worker then drains."""
        if not (self.held and self.steps.router):
            self.held = False
            return
        self.held = False
        unlink = None
        if not self.moved:  # the hold routed the model to the new engine: back to the old one
            self.steps._route_quietly(old_route(self.action))
            unlink = _bridge(self.action)
        try:
            self.steps.router.release(self.action.model or "")
            if unlink is not None:
                self.steps.router.drain()  # the holding worker's requests, answered by the old engine
        except AigoError:
            pass  # a router that cannot be reached: its hold lapses to the engine's /health (platforms/docker/hold_lease.py)
        finally:
            if unlink is not None:
                unlink()

    def replace_beside(self, temporary: str) -> Outcome:
        steps, action, name = self.steps, self.action, self.name
        began = time.monotonic()
        status, text = steps.call(old_address(action), "POST", SLEEP)
        if status != 200:
            return self._not_asleep(status, text)
        steps.log.journal.record("sleep", action.address, "ok", container=name)
        steps.log.step(
            action.address,
            "recreate",
            "",
            f"{name} sleeps (its weights in host memory; {time.monotonic() - began:.1f} s); "
            f"starting the new {name} beside it",
        )
        cid = None
        try:
            cid = steps.runtime.create(replace(self.container, name=temporary), self.item.env)
            steps.runtime.start(cid)
            outcome = steps._await_and_route(self.item, cid, "replaced")
        except BaseException as exc:  # the route did not move: the new engine goes, the old one wakes
            if cid and isinstance(exc, NotReady):
                exc = steps._keep_evidence(action, cid, self.container, exc)
            if cid:
                steps.runtime.remove(cid)
            woken = self._wake(exc)
            if not isinstance(exc, AigoError):
                raise
            return woken
        steps.log.journal.record("route_moved", action.address, "ok", container=temporary)
        self.moved = True
        self.release()  # the held requests go on to the new engine, before the old one's stop
        steps.runtime.stop(name)
        steps.runtime.remove(name)
        steps.runtime.rename(cid, name)
        steps.log.journal.record("remove_previous", action.address, "ok", container=name)
        steps.log.step(action.address, action.kind, "ok", f"the previous {name}, asleep, was removed")
        return Outcome(action.address, action.kind, True, f"{outcome.message}; the previous one, asleep, was removed")

    def _not_asleep(self, status: int, text: str) -> Outcome:
        """The old engine refused to sleep: it was awake, so nothing changed; its route is put back
        where the router could not hold it."""
        steps, action = self.steps, self.action
        if not self.held:
            steps._route_quietly(old_route(action))
        message = (
            f"the previous {self.name} could not be put to sleep (it answered {status} {text.strip()[:200]}); "
            f"nothing was changed and it serves on: apply again, or set models.{action.model}.update: recreate "
            "to replace it by stopping it"
        )
        steps.log.step(action.address, "recreate", "failed", message)
        return Outcome(action.address, "recreate", False, message, restored=True)

    def _wake(self, exc: BaseException) -> Outcome:
        """The new engine is gone: the old one wakes, is proven serving and takes its route back."""
        steps, action, name = self.steps, self.action, self.name
        began = time.monotonic()
        status, text = steps.call(old_address(action), "POST", "/wake_up")
        if status != 200:  # a whole start, as a recreate's way back
            steps.log.step(
                action.address, "recreate", "", f"the previous {name} could not be woken ({status}); restarting it"
            )
            try:
                steps.runtime.stop(name)
            except AigoError:
                pass  # _serve_previous starts it if it is not running, and says so if it cannot
            return steps._serve_previous(action, name, exc if isinstance(exc, AigoError) else AigoError(str(exc)))
        steps.log.journal.record("wake", action.address, "ok", container=name)
        tail = list(getattr(exc, "log_tail", []))
        if getattr(exc, "interrupted", False) or not isinstance(exc, AigoError):
            routed = steps._route_quietly(old_route(action))
            message = f"interrupted; the previous {name} was woken{'' if routed else ', not routed'}"
            steps.log.step(action.address, "recreate", "interrupted", message)
            return Outcome(action.address, "recreate", False, "interrupted", restored=True)
        if tail:
            steps.log.reporter.event("log_tail", address=action.address, lines=tail)
        previous = Engine(
            action.model or "",
            old_address(action),
            name,
            lambda: steps.runtime.state(name),
            lambda n: steps.runtime.logs_tail(name, n),
        )
        try:
            steps._waiter(action).wait(previous)
            if steps.router:
                steps.router.route(old_route(action))
            message = (
                f"{exc}; the new engine was removed, and the previous {name} woke in "
                f"{time.monotonic() - began:.1f} s and serves again"
            )
        except NotReady as again:
            message = f"{exc}; the new engine was removed, and the previous {name} woke but does not serve ({again})"
        except AigoError as again:  # it serves, but the router refused its route
            message = f"{exc}; the previous {name} woke and serves, but is not routed ({again})"
        steps.log.step(action.address, "recreate", "restored", message)
        return Outcome(action.address, "recreate", False, message, restored=True, log_tail=tail)


def _bridge(action: Action) -> Callable[[], None] | None:
    """The new engine's socket path made a link to the old engine's (both in the model's sockets
    folder), so that requests the router held for the new one reach the old one; the function that
    takes the link away (only while it is still this link). None when there is nothing to link."""
    new, old = EngineAddress.of(action.spec or {}, action.slot).socket, old_address(action).socket
    if not new or not old or new == old or os.path.dirname(new) != os.path.dirname(old):
        return None
    target, staged = os.path.basename(old), new + ".aigo-link"
    try:
        if os.path.lexists(staged):
            os.unlink(staged)
        os.symlink(target, staged)
        os.replace(staged, new)  # in one step: the path is never missing while a request connects
    except OSError:
        return None

    def unlink() -> None:
        try:
            if os.path.islink(new) and os.readlink(new) == target:
                os.unlink(new)
        except OSError:
            pass

    return unlink
