"""`apply` and `destroy` end to end: lock the project, observe, plan (or read a saved plan, bounded
and strict, and check it against the plan made now), show the plan, confirm, and hand the plan to
the executor with a Ctrl-C handler that lets the current step finish cleanly."""

from __future__ import annotations

import shutil
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from aigo_apply.adapters.docker_engine import DockerRuntime
from aigo_apply.app.planning import load_desired, observe, plan_for, plan_runtime
from aigo_apply.app.router_keys import digest_of, read_keys
from aigo_apply.app.saved_plan import approved, config_of, confirm_waivers, read_plan
from aigo_apply.apply.project_lock import ProjectLock
from aigo_apply.apply.state_dir import state_dir, state_path
from aigo_apply.desired import labels
from aigo_apply.desired.engines.common import cache_volume
from aigo_apply.desired.engines.router import settings_of
from aigo_apply.desired.model_store import read_markers
from aigo_apply.errors import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, AigoError, PlanBlocked, PlanFileError
from aigo_apply.plan import lockfile
from aigo_apply.plan.facts import PlanRequest
from aigo_apply.plan.planner import destroy_plan
from aigo_apply.plan.text import shown
from aigo_apply.plan.types import Plan
from aigo_apply.router.deploy import Router

if TYPE_CHECKING:
    from aigo_apply.apply.outcome import ApplyReport


class Console(Protocol):
    """How apply and destroy talk to the user (cli/reporter.py: human lines, or JSON lines with -o json)."""

    def event(self, kind: str, **fields: Any) -> None: ...
    def show_plan(self, plan: Plan) -> None: ...
    def say(self, message: str, err: bool = False, head: str = "", colour: str | None = None) -> None: ...


@dataclass
class ApplyOptions:
    console: Console
    file: str | None = None
    planfile: Path | None = None
    yes: bool = False
    pull: str = "missing"
    output: str = "text"
    lock_timeout: float = 0.0
    replace: tuple[str, ...] = ()
    target: tuple[str, ...] = ()
    confirm: Callable[[str], bool] | None = None  # asks the user; None when there is no terminal
    ignore: tuple[str, ...] = ()  # readiness check ids the user chose to ignore
    locked: bool = False  # install exactly what aigo.lock records
    platform: str | None = None  # --platform; None: the file's own (Docker unless it says kubernetes)


def run_apply(opts: ApplyOptions, runtime=None) -> int:
    # the file (or saved plan) is read and checked before Docker is touched at all
    # A saved plan is an approval, not an instruction: the plan is made again from the config file
    # and this machine, with the options the saved one records, and carried out only when its
    # actions equal the saved ones. Nothing else is read from the plan file.
    saved = read_plan(opts.planfile) if opts.planfile else None
    if saved:
        confirm_waivers(saved, opts.ignore)
    desired = load_desired(opts.file or (config_of(saved) if saved else None), opts.platform)
    if saved and desired.project != saved.project:
        raise PlanFileError(
            f"the plan is for project '{saved.project}', but {shown(desired.file)} is project '{desired.project}'; "
            "pass the plan's config file with -f (nothing was changed)"
        )
    request = (
        saved.request
        if saved
        else PlanRequest(
            frozenset(opts.replace), frozenset(opts.target), frozenset(opts.ignore), opts.pull, opts.locked
        )
    )
    lock = lockfile.read(lockfile.path_for(desired.file))
    if request.locked and lock is None:
        raise AigoError(
            f"apply --locked needs {lockfile.path_for(desired.file)}; run `aigo-apply apply` once "
            "without --locked to write it (nothing was changed)"
        )
    runtime = plan_runtime(runtime or _docker())

    def make(observed: Any) -> Plan:
        fresh = plan_for(desired, observed, runtime, request, lock)
        return approved(saved, fresh) if saved else fresh

    return _converge(desired.project, "apply", make, opts, runtime, ask=saved is None, desired=desired)


def record_lock(desired, runtime) -> None:
    """After a successful apply: aigo.lock records the images and model commits now installed."""

    data = lockfile.build(desired, runtime.list_images(), read_markers(desired.specs()))
    lockfile.write(lockfile.path_for(desired.file), data)


def run_destroy(opts: ApplyOptions, project: str | None = None, runtime=None) -> int:
    if project is None:
        desired = load_desired(opts.file, opts.platform)
        project, file = desired.project, desired.file
    else:
        file = opts.file or "(--project)"
    runtime = runtime or _docker()
    code = _converge(
        project, "destroy", lambda observed: destroy_plan(project, file, observed), opts, runtime, ask=True
    )
    if code == EXIT_OK:
        shutil.rmtree(state_path(project) / "router", ignore_errors=True)
        _remove_cache_volume(project, runtime, opts.console)
    return code


def _remove_cache_volume(project: str, runtime, console: Console) -> None:
    """The project's cache volume goes only when its labels say aigo-apply made it for this project:
    a volume of that name without them (the user's own, or one an older aigo-apply let Docker make)
    is kept, and destroy says so."""
    volume = cache_volume(project)
    found = runtime.volume_labels(volume)
    if found is None:
        return
    if labels.owns_volume(found, project):
        if runtime.remove_volume(volume):
            console.say(f"removed the cache volume {volume}")
        return
    console.say(
        f"kept the volume {volume}: it does not carry aigo-apply's labels for project '{project}', so "
        f"aigo-apply did not make it (or an older version did); remove it with `docker volume rm {volume}` "
        "if it is not needed",
        err=True,
    )


def _converge(project: str, command: str, make: Callable, opts: ApplyOptions, runtime, ask: bool, desired=None) -> int:
    reporter = opts.console
    directory = state_dir(project)
    with ProjectLock(directory, project, command, opts.lock_timeout):
        observed = observe(project, runtime, desired)
        plan: Plan = make(observed)
        reporter.show_plan(plan)
        if plan.blockers:
            raise PlanBlocked(
                f"{command} refused: the plan is blocked ({len(plan.blockers)} problem"
                f"{'s' if len(plan.blockers) != 1 else ''} above); nothing was changed"
            )
        if not plan.has_changes:
            if desired is not None and command == "apply" and not opts.target:
                record_lock(desired, runtime)
            return EXIT_OK
        if ask and not opts.yes:
            if opts.confirm is None:
                raise AigoError(
                    f"{command} needs confirmation, and there is no terminal to ask on; "
                    "pass -y/--yes to go ahead without asking"
                )
            if not opts.confirm(f"Do you want to {command} these changes? Only 'yes' will be accepted"):
                reporter.say(f"{command.capitalize()} cancelled; nothing was changed.", err=True)
                return EXIT_ERROR
        from aigo_apply.apply.executor import Executor  # with its steps and waits: only changes need them
        from aigo_apply.apply.journal import Journal

        routes = router_for(plan, observed, runtime, desired)
        executor = Executor(runtime, reporter, Journal(directory), routes=routes)
        with _interrupts(executor.interrupted, reporter):
            report = executor.run(plan)
        code = _finish(report, command, reporter, opts.output)
        if code == EXIT_OK and desired is not None and command == "apply" and not opts.target:
            record_lock(desired, runtime)
        return code


def router_for(plan: Plan, observed, runtime, desired=None):
    """The router adapter for this run, from the plan's router spec or (a targeted apply, watch) the
    desired one; None when the project has no router (yet). Nothing is taken from the running
    router's labels: its files live in this tool's own state folder, whatever a label says."""

    action = next((a for a in plan.actions if a.is_router), None)
    if action and action.kind == "remove":
        # destroy: the router goes last and takes its routes with it, so no reload is needed (one
        # would need the API keys to verify, and a destroy must work without them); the router's
        # files go afterwards, from this tool's own state folder (never a folder a label names)
        return None
    spec = action.spec if action and action.spec else None
    if spec is None and desired is not None and observed.router is not None:
        spec = desired.router.spec
    if not spec:
        return None
    folder = state_path(plan.project) / "router"
    if spec.get("config_dir") != str(folder):
        raise AigoError(
            f"the router's config folder {spec.get('config_dir')!r} is not {folder}, this tool's state "
            "folder for the project (nothing was changed)"
        )
    keys = read_keys(spec)
    settings = settings_of(plan.project, spec, digest_of(plan.project, keys))
    if desired is not None:  # swap groups shape the router's files, not its container (config/swap_groups.py)
        settings = replace(settings, swap_groups=desired.swap_groups)
    return Router(
        runtime,
        folder,
        settings,
        f"aigo-{plan.project}-router",
        spec["image"],
        keys,
        spec.get("user"),
    )


def _finish(report: ApplyReport, command: str, reporter: Console, output: str) -> int:
    counts: dict[str, int] = {}
    router = []
    for outcome in report.outcomes:
        if outcome.ok and outcome.address == "router":
            router.append(f"router {_PAST.get(outcome.kind, outcome.kind)}")
        elif outcome.ok:
            counts[outcome.kind] = counts.get(outcome.kind, 0) + 1
    done = ", ".join([f"{n} {_PAST.get(k, k)}" for k, n in counts.items()] + router) or "nothing changed"
    failed = report.failed
    if output == "json":
        reporter.event(
            "result",
            ok=not failed and not report.interrupted,
            interrupted=report.interrupted,
            done=counts,
            failed=[
                {"address": o.address, "message": o.message, "restored": o.restored, "log_tail": o.log_tail}
                for o in failed
            ],
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
            reporter.say(f"  {outcome.address}: {outcome.message}", err=True)
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
    """First Ctrl-C (or SIGTERM): finish the current step, undo the model in progress, stop.
    A second Ctrl-C: stop at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        if event.is_set():
            raise KeyboardInterrupt
        event.set()
        reporter.say("\nStopping after the current step (Ctrl-C again to abort at once)...", err=True)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _docker():

    return DockerRuntime()
