"""The one converge use case, for every platform (platforms/platform.py): lock the project, observe, make
the plan (and approve it against a saved one), show it, refuse a blocked one, confirm, hand it to
the platform's executor with a Ctrl-C handler that lets the current step finish cleanly, and report
the outcome with its exit code. `apply` and `destroy` on Docker and on a cluster all run this loop;
what differs between them is the platform's, never a second loop."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

from aigo_apply.errors import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, AigoError, PlanBlocked, visible
from aigo_apply.json_types import JsonObject
from aigo_apply.plan.types import Plan
from aigo_apply.platforms.platform import Platform
from aigo_apply.platforms.requests import ApplyRequest
from aigo_apply.platforms.views import Console

if TYPE_CHECKING:
    from aigo_apply.platforms.outcome import ApplyReport

Observed = TypeVar("Observed")  # what the platform observes, and its plan is made from


def converge(
    platform: Platform[Observed],
    command: str,
    request: ApplyRequest,
    console: Console,
    make: Callable[[Observed], Plan],
    ask: bool,
) -> int:
    """`make`: the plan from what `platform.observe()` found (for apply, approved against a saved
    plan when there is one; for destroy, the platform's destroy plan). `ask`: confirm before acting
    (apply of a saved plan does not ask: the saved plan was the approval); `console.confirm` asks."""
    with platform.lock(command, request.lock_timeout):
        observed = platform.observe()
        plan = make(observed)
        platform.show(console, command, plan)
        if plan.blockers:
            raise PlanBlocked(
                f"{command} refused: the plan is blocked ({len(plan.blockers)} problem"
                f"{'s' if len(plan.blockers) != 1 else ''} above); nothing was changed"
            )
        code = EXIT_OK
        canaries: tuple[JsonObject, ...] = ()  # the canary gates' figures of the engines they let in
        if plan.has_changes:
            if ask and not request.yes:
                if console.confirm is None:
                    raise AigoError(
                        f"{command} needs confirmation, and there is no terminal to ask on; "
                        "pass -y/--yes to go ahead without asking"
                    )
                if not console.confirm(
                    f"Do you want to {command} these changes{platform.where}? Only 'yes' will be accepted"
                ):
                    console.say(f"{command.capitalize()} cancelled; nothing was changed.", err=True)
                    return EXIT_ERROR
            execution = platform.executor(command, plan, observed, request, console)
            with _interrupts(execution.interrupted, console):
                report = execution.run()
            code = finish(report, command, console)
            canaries = tuple(o.canary for o in report.outcomes if o.canary is not None)
        if code == EXIT_OK:
            platform.settled(command, plan, request, console, canaries)
        return code


def finish(report: ApplyReport, command: str, reporter: Console) -> int:
    """The outcome said (a `result` event: the JSON lines' last; human lines show the sentences)."""
    counts: dict[str, int] = {}
    router = []
    for outcome in report.outcomes:
        if outcome.ok and outcome.address == "router":
            router.append(f"router {_PAST.get(outcome.kind, outcome.kind)}")
        elif outcome.ok:
            counts[outcome.kind] = counts.get(outcome.kind, 0) + 1
    done = ", ".join([f"{n} {_PAST.get(k, k)}" for k, n in counts.items()] + router) or "nothing changed"
    failed = report.failed
    reporter.event(
        "result",
        ok=not failed and not report.interrupted,
        interrupted=report.interrupted,
        done=counts,
        failed=[
            {"address": o.address, "message": o.message, "restored": o.restored, "log_tail": o.log_tail} for o in failed
        ],
        canaries=[o.canary for o in report.outcomes if o.canary is not None],
    )
    if report.interrupted:
        reporter.say(
            f"\n{command.capitalize()} interrupted: {done}. Run `aigo-apply {command}` again to converge.", err=True
        )
        return EXIT_INTERRUPTED
    if failed:
        reporter.say(
            f"{done}; {len(failed)} failed:", err=True, head=f"\n{command.capitalize()} failed: ", colour="red"
        )
        for outcome in failed:
            reporter.say(f"  {outcome.address}: {visible(outcome.message)}", err=True)  # one line each
        return EXIT_ERROR
    reporter.say(done + ".", head=f"\n{command.capitalize()} complete: ", colour="green")
    return EXIT_OK


_PAST = {
    "create": "created",
    "recreate": "replaced",
    "start": "started",
    "remove": "removed",
    "reload_router": "reloaded",
    "prune": "pruned",  # Kubernetes: a model's objects the file no longer needs (an old revision's volume)
}


@contextmanager
def _interrupts(event: threading.Event, reporter: Console) -> Iterator[None]:
    """First Ctrl-C, SIGTERM or SIGHUP (a closed terminal, a dropped SSH session): finish the current
    step, undo the model in progress, stop. A second Ctrl-C or SIGTERM: stop at once. After SIGHUP the
    terminal is gone: what apply still prints goes nowhere (a write to a hung-up terminal fails, and
    must not cut the undo short); the journal keeps every step."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        if signum == signal.SIGHUP:
            _detach_output()
            event.set()
            return
        if event.is_set():
            raise KeyboardInterrupt
        event.set()
        reporter.say("\nStopping after the current step (Ctrl-C again to abort at once)...", err=True)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _detach_output() -> None:
    """Point standard output and error at /dev/null (the terminal hung up)."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    for fd in (1, 2):
        try:
            os.dup2(null, fd)
        except OSError:
            pass
    os.close(null)
