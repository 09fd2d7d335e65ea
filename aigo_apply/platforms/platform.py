"""The platform seam of the use cases: where plan, apply, destroy and status act, chosen once from
the file's `platform:` or `--platform` (app/choose_platform.py) and then handed to the one converge
loop (app/converge.py), with the request of a run (platforms/requests.ApplyRequest) and how it talks
(platforms/views.Console). Docker (platforms/docker/platform.py) and Kubernetes (platforms/kubernetes/platform.py) implement
the same typed Protocol; the planner never knows which one it plans for.

What a platform does, in the loop's order: `lock` the project, `observe` what runs, make the `plan`
from it (the facts only this platform has: Docker's host checks, the Hub and aigo.lock; the cluster's
rendered objects), `show` it, run it through its `executor`, and, once a run ended well, `settled`
(Docker's aigo.lock, destroy's leftovers). `status` is its one-screen report."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from aigo_apply.desired.types import DesiredState
from aigo_apply.json_types import JsonObject
from aigo_apply.plan.facts import PlanRequest
from aigo_apply.plan.types import Plan
from aigo_apply.platforms.capabilities import Capability
from aigo_apply.platforms.views import Console

if TYPE_CHECKING:
    from aigo_apply.platforms.outcome import ApplyReport
    from aigo_apply.platforms.requests import ApplyRequest, LogsRequest

Observed = TypeVar("Observed")


class Execution(Protocol):
    """One run of a plan: `interrupted` is set by the first Ctrl-C (the current step finishes)."""

    @property
    def interrupted(self) -> threading.Event: ...
    def run(self) -> ApplyReport: ...


@dataclass(frozen=True)
class Run:
    """An Execution: the executor's interrupt flag and how to run the plan with it."""

    interrupted: threading.Event
    go: Callable[[], ApplyReport]

    def run(self) -> ApplyReport:
        return self.go()


@dataclass(frozen=True)
class LogStream:
    """What `logs` prints: (name, line) pairs, and whether several names share the screen (each
    line is prefixed with its name then)."""

    several: bool
    lines: Iterator[tuple[str, str]]


class Platform(Protocol[Observed]):
    name: str  # "docker" or "kubernetes"
    lacks: frozenset[Capability]  # what it cannot do (platforms/capabilities.py refuses it)
    where: str  # how the confirmation names the target: "" (this machine) or " on the cluster"
    project: str
    file: str

    @property
    def desired(self) -> DesiredState | None:
        """The file's desired state; None for destroy --project, which reads no file."""

    def admit(self, request: PlanRequest, saved: Plan | None) -> None:
        """Refuse, before anything is observed, what this platform cannot do for this request."""

    def lock(self, command: str, timeout: float) -> AbstractContextManager[object]: ...
    def observe(self) -> Observed: ...
    def plan(self, observed: Observed, request: PlanRequest) -> Plan: ...
    def destroy_plan(self, observed: Observed) -> Plan: ...
    def show(self, console: Console, command: str, plan: Plan) -> None: ...
    def executor(
        self, command: str, plan: Plan, observed: Observed, request: ApplyRequest, console: Console
    ) -> Execution: ...
    def settled(
        self,
        command: str,
        plan: Plan,
        request: ApplyRequest,
        console: Console,
        canaries: tuple[JsonObject, ...] = (),
    ) -> None: ...
    def status(self) -> JsonObject: ...
    def status_text(self, report: JsonObject) -> str: ...
    def logs(self, request: LogsRequest) -> LogStream:
        """The output of the asked models' engines (and the router's), checked names first."""
