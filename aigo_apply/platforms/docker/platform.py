"""This machine's Docker as a platform (platforms/platform.py): the project's lock in its state folder, the
machine read with three calls (platforms/docker/planning.observe), the plan made with the host's facts, the Hub
and aigo.lock (platforms/docker/planning.plan_for), the executor with the router's adapter (platforms/docker/executor.py),
and after a good run aigo.lock written and the cache volumes of images no model uses removed (apply),
or the router's files and every cache volume removed (destroy)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from aigo_apply.adapters.docker_engine import DockerRuntime
from aigo_apply.adapters.runtime import Runtime
from aigo_apply.config.load import Config
from aigo_apply.desired.adapters import adapter_downloads
from aigo_apply.desired.engines.router import settings_of
from aigo_apply.desired.spec import RouterSpec
from aigo_apply.desired.types import SOCKETS_FOLDER, DesiredState, HostContext
from aigo_apply.errors import AigoError, PlanFileError
from aigo_apply.json_types import JsonObject, obj
from aigo_apply.observe.containers import ObservedState
from aigo_apply.observe.hub_answer import HubAnswer, HubKey
from aigo_apply.observe.markers import markers_of, read_markers
from aigo_apply.plan import lockfile
from aigo_apply.plan.facts import PlanRequest
from aigo_apply.plan.planner import destroy_plan
from aigo_apply.plan.text import shown
from aigo_apply.plan.types import Plan
from aigo_apply.platforms import lock_file
from aigo_apply.platforms.capabilities import LACKS
from aigo_apply.platforms.docker import cache_volumes
from aigo_apply.platforms.docker.live_router import live_key
from aigo_apply.platforms.docker.planning import observe, plan_for
from aigo_apply.platforms.docker.router_deploy import Router
from aigo_apply.platforms.host_context import desired_state
from aigo_apply.platforms.hub_facts import adapter_answers, remote_answers, remote_info
from aigo_apply.platforms.platform import LogStream, Run
from aigo_apply.platforms.project_lock import ProjectLock
from aigo_apply.platforms.router_keys import digest_of, read_keys
from aigo_apply.platforms.state_dir import FAILED_STARTS, STARTS, state_dir, state_path
from aigo_apply.router.render_key import rendered_elsewhere

if TYPE_CHECKING:
    from aigo_apply.platforms.platform import Execution
    from aigo_apply.platforms.requests import ApplyRequest, LogsRequest
    from aigo_apply.platforms.views import Console


class _Asked(NamedTuple):
    """What a run that plans read and asked before its build: whether pinned to aigo.lock, the Hub's
    answers, and the adapters' download markers they were asked for (by folder)."""

    locked: bool
    answers: Mapping[HubKey, HubAnswer]
    markers: Mapping[str, Mapping[str, object]]


class DockerPlatform:
    name = "docker"
    lacks = LACKS["docker"]
    where = ""

    def __init__(
        self,
        project: str,
        file: str,
        desired: DesiredState | None,
        runtime: Runtime | None = None,
        plans: bool = False,
        state_root: Path | None = None,
    ):
        """`desired` None: destroy --project, which reads no file. `plans`: this run makes a plan from
        the file, so observe reads the model folders' download markers too, and asks GET /info on a
        connection of its own while the lists are read (the plan's host checks read it after them).
        `state_root`: the run's (its HostContext's; None: read now, for destroy --project). A run that
        plans is opened by `planning`, which builds the desired state."""
        self.project, self.file, self.desired = project, file, desired
        self.state = state_path(project, state_root)  # the project's state folder, for the whole run
        self._runtime = runtime
        self._plans = plans
        self._lock_data: JsonObject | None = None
        self._lock_read = False  # aigo.lock is read once per run, on first use
        self._asked = _Asked(False, {}, {})
        self._gather: Callable[[bool], None] | None = None  # a run that plans: build the desired state

    @classmethod
    def planning(
        cls, config: Config, host: HostContext, runtime: Runtime | None = None, locked: bool = False
    ) -> DockerPlatform:
        """A run that makes a plan (plan, apply), its desired state built once, here, before the project
        is locked (so that a file the build refuses changes nothing, not even the lock file): with what
        the Hub says of the file's repo LoRA adapters not complete in the model store, asked first
        (pinned to aigo.lock's commits when `locked`, as the plan pins), so that the one build sizes
        each engine's --max-lora-rank by its adapters' rank. The plan keeps these answers and asks the
        Hub only about the rest."""
        platform = cls(config.data["project"], config.file, None, runtime, True, host.state_root)
        platform._gather = partial(platform._build, config, host)
        platform._gather(locked)
        return platform

    def _build(self, config: Config, host: HostContext, locked: bool) -> None:
        """The desired state, with the adapters' download markers read and the Hub asked about those
        not complete (nothing is asked for --locked without an aigo.lock to pin by: admit refuses it)."""
        needs = adapter_downloads(config, host)
        lock = self.aigo_lock if locked and needs else None  # else read when admitted or planned, as before
        markers = markers_of(needs)
        asks = bool(needs) and (lock is not None or not locked)
        answers = remote_answers(needs, markers, lock) if asks else {}
        self.desired = desired_state(config, host, adapter_answers(needs, answers) or None)
        self._asked = _Asked(locked, answers, markers)

    @property
    def runtime(self) -> Runtime:
        """The Docker runtime, made on first use: nothing before the file and the options are checked
        (admit) reaches for Docker."""
        if self._runtime is None:
            self._runtime = _docker()
        return self._runtime

    @classmethod
    def of_project(cls, project: str, file: str | None = None, runtime: Runtime | None = None) -> DockerPlatform:
        """destroy --project NAME: the project's containers, without a config file."""
        return cls(project, file or "(--project)", None, runtime)

    def _desired(self) -> DesiredState:
        if self.desired is None:
            raise AigoError(f"project '{self.project}': this needs its config file (-f)")
        return self.desired

    @property
    def aigo_lock(self) -> JsonObject | None:
        """aigo.lock beside the file (None: there is none), read once per run."""
        if not self._lock_read:
            if self._gather is None:
                self._desired()  # destroy --project has no file, so no lock beside it
            self._lock_data = lock_file.read(lock_file.path_for(self.file))
            self._lock_read = True
        return self._lock_data

    def admit(self, request: PlanRequest, saved: Plan | None) -> None:
        desired = self._desired()
        lock = self.aigo_lock  # read (and refused when unreadable) before the project is locked
        if saved and desired.project != saved.project:
            raise PlanFileError(
                f"the plan is for project '{saved.project}', but {shown(desired.file)} is project "
                f"'{desired.project}'; pass the plan's config file with -f (nothing was changed)"
            )
        if request.locked and lock is None:
            raise AigoError(
                f"apply --locked needs {lock_file.path_for(desired.file)}; run `aigo-apply apply` once "
                "without --locked to write it (nothing was changed)"
            )

    def lock(self, command: str, timeout: float) -> AbstractContextManager[object]:
        return ProjectLock(state_dir(self.project, self.state.parent), self.project, command, timeout)

    def observe(self) -> ObservedState:
        if not self._plans:
            return observe(self.project, self.runtime, state_root=self.state.parent)
        ask_ahead = getattr(self.runtime, "prefetch_info", None)  # Docker's own runtime asks GET /info ahead
        if ask_ahead is not None:
            ask_ahead()
        return observe(self.project, self.runtime, self.desired, self.state.parent)

    def plan(self, observed: ObservedState, request: PlanRequest) -> Plan:
        """The plan, made once, from the desired state built once (`planning`): the Hub is asked about
        the downloads not complete in the store that it was not asked about before the build. The one
        second build: when an adapter's folder changed between its read before the build and the
        machine's read under the project lock (another run downloaded or removed it while this one
        waited), or when the plan pins otherwise than the run was opened with, the adapters are asked
        again and the state built again from what is there now, never planned from a stale answer."""
        asked = self._asked
        moved = any(observed.model_files.get(folder, {}) != marker for folder, marker in asked.markers.items())
        if self._gather is not None and (moved or asked.locked != request.locked):
            self._gather(request.locked)
            asked = self._asked
        desired, lock = self._desired(), self.aigo_lock
        remote = remote_info(desired, observed, lock if request.locked else None, asked=asked.answers)
        return plan_for(desired, observed, self.runtime, request, lock, remote, self.state)

    def destroy_plan(self, observed: ObservedState) -> Plan:
        return destroy_plan(self.project, self.file, observed)

    def show(self, console: Console, command: str, plan: Plan) -> None:
        console.show_plan(plan)

    def executor(
        self, command: str, plan: Plan, observed: ObservedState, request: ApplyRequest, console: Console
    ) -> Execution:
        from aigo_apply.platforms.docker.executor import Executor  # with its steps and waits: only changes need them
        from aigo_apply.platforms.journal import Journal

        routes = router_for(
            plan, observed, self.runtime, self.desired if command == "apply" else None, self.state.parent
        )
        executor = Executor(self.runtime, console, Journal(state_dir(self.project, self.state.parent)), routes=routes)
        return Run(executor.interrupted, lambda: executor.run(plan))

    def settled(
        self,
        command: str,
        plan: Plan,
        request: ApplyRequest,
        console: Console,
        canaries: tuple[JsonObject, ...] = (),
    ) -> None:
        """After a run that ended well (nothing to do, or done): an apply of the whole file records
        what is installed in aigo.lock (with the canary gates' figures of the engines they let in) and
        removes the socket folders of models the file no longer has and the cache volumes of images
        no model uses (platforms/docker/cache_volumes.py); destroy removes the router's files, the engines' socket
        folders, the start records and every cache volume."""
        if command == "apply" and self.desired is not None and not request.target:
            record_lock(self.desired, self.runtime, canaries, self.aigo_lock)
            _prune_sockets(self.state / SOCKETS_FOLDER, set(self.desired.models))
            cache_volumes.prune(self.desired, self.runtime, console)
            _rekey_router(plan, self.runtime, self.desired, self.state)
        elif command == "destroy":
            for folder in ("router", SOCKETS_FOLDER, FAILED_STARTS, STARTS):  # rmtree refuses a link, follows none
                shutil.rmtree(self.state / folder, ignore_errors=True)
            cache_volumes.remove_all(self.project, self.runtime, console)

    def status(self) -> JsonObject:
        from aigo_apply.platforms.docker.status import collect  # with its parallel probes: only status needs it

        desired = self._desired()
        try:
            keys = read_keys(desired.router.spec)
        except AigoError:
            keys = None  # the router's /metrics then answers only without a key (metrics_without_key)
        observed = observe(self.project, self.runtime, state_root=self.state.parent)
        return collect(desired, observed, self.runtime, keys[0] if keys else None, self.state)

    def status_text(self, report: JsonObject) -> str:
        from aigo_apply.platforms.docker.status import render

        return render(report)

    def logs(self, request: LogsRequest) -> LogStream:
        from aigo_apply.platforms.docker.logs import log_stream

        if request.failed:
            from aigo_apply.platforms.docker.logs import failed_stream

            return failed_stream(self.runtime, self.project, self.desired, request, self.state)
        return log_stream(self.runtime, self.project, self.desired, request)


def _docker() -> Runtime:
    return DockerRuntime()


def record_lock(
    desired: DesiredState,
    runtime: Runtime,
    canaries: tuple[JsonObject, ...] = (),
    previous: JsonObject | None = None,
) -> None:
    """After a successful apply: aigo.lock records the images and model commits now installed, and
    the last canary measurement of each model (this run's, else the one the lock held)."""

    data = lockfile.build(desired, runtime.list_images(), read_markers(desired.specs()))
    data = lockfile.with_canaries(data, desired, canaries, obj((previous or {}).get("canary")))
    lock_file.write(lock_file.path_for(desired.file), data)


def router_for(
    plan: Plan,
    observed: ObservedState,
    runtime: Runtime,
    desired: DesiredState | None = None,
    state_root: Path | None = None,
) -> Router | None:
    """The router adapter for this run, from the plan's router spec or (a targeted apply, watch) the
    desired one; None when the project has no router (yet). Nothing is taken from the running
    router's labels: its files live in this tool's own state folder, whatever a label says."""

    action = next((a for a in plan.actions if a.is_router), None)
    if action and action.kind == "remove":
        # destroy: the router goes last and takes its routes with it, so no reload is needed (one
        # would need the API keys to verify, and a destroy must work without them); the router's
        # files go afterwards, from this tool's own state folder (never a folder a label names)
        return None
    spec = action.router_spec if action else None
    if spec is None and desired is not None and observed.router is not None:
        spec = desired.router.spec
    return router_of(plan.project, spec, runtime, desired, state_root) if spec else None


def router_of(
    project: str,
    spec: RouterSpec,
    runtime: Runtime,
    desired: DesiredState | None = None,
    state_root: Path | None = None,
) -> Router:
    """The router adapter for the router `spec` (the planned one, or the file's): its folders must be
    the ones in this tool's state folder for the project (below the run's `state_root`)."""
    folder = state_path(project, state_root) / "router"
    for key, wanted in (("config_dir", folder), ("sockets_dir", folder.parent / SOCKETS_FOLDER)):
        if spec.get(key) != str(wanted):
            raise AigoError(
                f"the router's {key} {spec.get(key)!r} is not {wanted}, in this tool's state folder for the "
                "project (nothing was changed)"
            )
    keys = read_keys(spec)
    settings = settings_of(project, spec, digest_of(project, keys))
    if desired is not None:  # swap groups and adapters shape the router's files, not its container
        settings = replace(settings, swap_groups=desired.swap_groups, adapters=desired.router.settings.adapters)
    return Router(
        runtime,
        folder,
        settings,
        f"aigo-{project}-router",
        spec["image"],
        keys,
        spec.get("user"),
    )


def _rekey_router(plan: Plan, runtime: Runtime, desired: DesiredState, state: Path) -> None:
    """After an apply that left the router as it was: when another version of this tool rendered the
    files in service (the same files: else the plan reloads it), this version's render key is written
    over theirs (Router.rekey), so that each later plan trusts the key instead of rendering the files.
    The cheap read (the live files' key) comes first; only a stale key reads the API keys. A key that
    cannot be written changes nothing but the next plan's speed: it is not an error of the apply."""
    action = next((a for a in plan.actions if a.is_router), None)
    if action is None or action.kind != "noop" or action.router_spec is None:
        return
    if not rendered_elsewhere(live_key(state / "router")):
        return
    try:
        router_of(plan.project, action.router_spec, runtime, desired, state.parent).rekey()
    except (AigoError, OSError):
        pass


def _prune_sockets(folder: Path, models: set[str]) -> None:
    """Remove the socket folder of each model the file no longer names (its engine is gone, and only
    its dead socket was left); never follows a link."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if entry.name not in models and entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
