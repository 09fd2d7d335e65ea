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
     `gpus: none` model is a lane of its own. Each model is ready (see serving_wait.py) before its
     route is added.

recreate = take the route away, stop the old container, rename it to NAME-aigo-previous, create
and start the new one, wait until ready, add the route, remove the old one. If the new one does
not become ready: keep its log tail, remove it, rename the old one back, start it, wait, add its
route again, and report the failure with "previous version restored".

A remove acts only on a name the tool derives (the model's container, its kept copy, the router's):
a plan is made again before every apply, and this holds even for one that was not.

Ctrl-C sets `interrupted`: no new step starts, a wait in progress stops, and the model being
changed is put back the way it was (a new container removed; a renamed old one restored).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from aigo_apply.adapters.runtime import Runtime
from aigo_apply.desired import engines
from aigo_apply.desired.engines.common import with_slot
from aigo_apply.desired.engines.router import router_container
from aigo_apply.desired.spec import ModelSpec
from aigo_apply.desired.types import ContainerSpec, EngineAddress
from aigo_apply.errors import AigoError, Interrupted, PlanFileError
from aigo_apply.observe.label_checks import names_of
from aigo_apply.plan.lockfile import LockRestore
from aigo_apply.plan.types import Action, Plan
from aigo_apply.platforms.docker.fetch_steps import Fetch, check_download, download_folder, pull_image
from aigo_apply.platforms.docker.model_steps import ModelSteps, Prepared
from aigo_apply.platforms.docker.router_steps import START_TIMEOUT, RouterSteps, Routes, router_answer
from aigo_apply.platforms.docker.serving_wait import Waiter
from aigo_apply.platforms.docker.swap_steps import SwapSteps, engine_call
from aigo_apply.platforms.journal import Journal
from aigo_apply.platforms.outcome import ApplyReport, Outcome, Reporter, StepLog
from aigo_apply.platforms.secrets import container_env

MODEL_KINDS = ("start", "create", "recreate")
__all__ = ["ApplyReport", "Executor", "Outcome"]


class Executor:
    def __init__(
        self,
        runtime: Runtime,
        reporter: Reporter,
        journal: Journal,
        routes: Routes | None = None,
        interrupted: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
        fetch: Fetch | None = None,
        make_waiter: Callable[..., Waiter] = Waiter,
        wait_router: Callable[[Routes], str | None] = router_answer,
        call: Callable[[EngineAddress, str, str], tuple[int, str]] = engine_call,
        router_start_timeout: float = START_TIMEOUT,
    ):
        """Every collaborator is given here, none set afterwards: `call`, the engines' /sleep and
        /wake_up (platforms/docker/model_steps.ModelSteps); `router_start_timeout`, how long a started
        router may take to answer. The swap groups' steps are the run's (made from its plan), and
        the model steps reach them through `_after_ready`."""
        self.runtime, self.reporter, self.journal = runtime, reporter, journal
        self.swaps: SwapSteps | None = None
        self.fetch = fetch  # downloads a model folder (adapters.hub.download unless a test passes another)
        self.interrupted = interrupted or threading.Event()
        self.clock = clock
        self.log = StepLog(journal, reporter)
        self.router = RouterSteps(runtime, routes, self.log, wait_router, router_start_timeout) if routes else None
        self.models = ModelSteps(
            runtime,
            self.log,
            self.router,
            self.interrupted,
            make_waiter,
            evidence=journal.path.parent,
            on_ready=self._after_ready,
            call=call,
        )

    def _after_ready(self, alias: str, spec: ModelSpec | None, address: EngineAddress) -> None:
        """A model proven ready: the run's swap groups put it to sleep when it is not one of the first."""
        if self.swaps is not None:
            self.swaps.after_ready(alias, spec, address)

    # -- the fixed order -----------------------------------------------------------------------
    def run(self, plan: Plan) -> ApplyReport:
        models = [a for a in plan.actions if a.is_container]
        prepared = [self._prepare(plan.project, a) for a in models if a.kind in ("remove",) + MODEL_KINDS]
        router_action = next((a for a in plan.actions if a.is_router), None)
        router_container = (
            self._prepare(plan.project, router_action).container
            if router_action and router_action.kind in ("create", "recreate")
            else None
        )
        if router_action and router_action.kind == "remove":
            _check_remove(plan.project, router_action)
        self.journal.record("apply", f"project.{plan.project}", "started", fingerprint=plan.fingerprint)
        outcomes: list[Outcome] = []
        for action in plan.actions:  # images first: aigo.lock's restores, then what the pull policy chose
            if action.kind == "pull" and action.image:
                self._check_interrupt()
                self._pull(action.image, action.restore)
        for action in plan.actions:
            if action.kind == "download":
                self._check_interrupt()
                self._download(action)
        router_future = self._start_router(router_action, router_container, plan)
        for item in prepared:
            if item.action.kind == "remove":
                self._check_interrupt()
                outcomes.append(self.models.remove(item.action))
        lanes = _lanes(plan, [p for p in prepared if p.action.kind in MODEL_KINDS])
        self.swaps = self._swap_steps(plan)
        try:
            if lanes:
                with ThreadPoolExecutor(max_workers=len(lanes), thread_name_prefix="aigo-lane") as pool:
                    for lane_outcomes in pool.map(self._run_lane, lanes):
                        outcomes += lane_outcomes
        finally:
            self.swaps.finish()  # the first models of each swap group apply touched are awake again
        if router_future is not None:
            outcomes.insert(0, router_future.result())
        outcomes += self._finish_routes(router_action, plan)
        interrupted = self.interrupted.is_set()
        self.journal.record(
            "apply",
            f"project.{plan.project}",
            "interrupted" if interrupted else "finished",
            failed=[o.address for o in outcomes if not o.ok],
        )
        return ApplyReport(outcomes, interrupted)

    def _swap_steps(self, plan: Plan) -> SwapSteps:
        """Swap groups (platforms/docker/swap_steps.py), as the router's settings name them."""
        routes = self.router.routes if self.router else None
        groups = routes.settings.swap_groups if routes is not None else ()
        sockets = routes.sockets_dir if routes is not None else ""
        routed = (
            {alias: EngineAddress.of_route(route, sockets) for alias, route in routes.routes.items()}
            if routes is not None
            else {}
        )
        return SwapSteps(plan, groups, self.log, getattr(routes, "folder", None), routed)

    def _start_router(
        self, action: Action | None, container: ContainerSpec | None, plan: Plan
    ) -> Future[Outcome] | None:
        """The router starts alongside the models: it is up long before an engine has loaded, and
        every route change waits for it (the gate), so its start-up adds nothing to the apply."""
        if not (action and self.router and action.kind in ("create", "recreate", "start")):
            return None
        self._check_interrupt()
        self.router.begin()
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aigo-router")
        future = pool.submit(self.router.run, action, container, plan)
        pool.shutdown(wait=False)
        return future

    def _finish_routes(self, router_action: Action | None, plan: Plan) -> list[Outcome]:
        if router_action and router_action.kind == "remove":
            outcome = self.models.remove(router_action)
            if self.router:
                self.router.routes.remove_files()
            return [outcome]
        if self.router and not self.interrupted.is_set() and not self.router.failed:
            try:
                return self.router.converge(plan)
            except AigoError as exc:  # the router keeps its previous routes; say so and fail the apply
                self.log.step("router", "reload_router", "failed", str(exc))
                return [Outcome("router", "reload_router", False, str(exc))]
        return []

    def _prepare(self, project: str, action: Action) -> Prepared:
        if action.kind == "remove":
            _check_remove(project, action)
            return Prepared(action)
        spec = action.router_spec if action.is_router else action.model_spec
        if spec is None or not (action.model or action.is_router):
            raise PlanFileError(f"{action.address}: the plan carries no spec for this {action.kind}; make a new plan")
        if action.router_spec is not None:
            return Prepared(action, router_container(project, action.router_spec))
        container = with_slot(engines.render(project, action.model or "", action.desired_model()), action.slot)
        if action.container and container.name != action.container:
            raise PlanFileError(
                f"{action.address}: the plan names container {action.container} but its spec "
                f"renders {container.name}; the plan was edited, make a new one"
            )
        env = container_env(container, action.model or "") if action.kind != "start" else {}
        return Prepared(action, container, env)

    def _run_lane(self, lane: list[Prepared]) -> list[Outcome]:
        assert self.swaps is not None  # made by run before any lane
        results = []
        for item in lane:
            if self.interrupted.is_set():
                break
            try:
                self.swaps.before_start(item.action.model or "", item.action.model_spec)
                results.append(self.models.run(item))
            except AigoError as exc:  # Docker refused something: report it for this model, go on with others
                self.log.step(item.action.address, item.action.kind, "failed", str(exc))
                results.append(Outcome(item.action.address, item.action.kind, False, str(exc)))
        return results

    # -- images and model files ----------------------------------------------------------------
    def _pull(self, image: str, restore: LockRestore | None = None) -> None:
        """Pull `image`; with apply --locked (`restore`), point its tag back at the image aigo.lock
        records: re-tag it when it is still here, else pull its digest first. A saved plan's restore
        is checked again, so an edited one cannot tag some other image."""
        if restore is None:
            pull_image(self.runtime, self.reporter, image)
        else:
            checked = LockRestore.from_spec(image, restore.to_spec())  # checked again right before tagging
            if checked is None:
                raise AigoError(
                    f"image.{image}: the plan's restore of aigo.lock's image is not valid (edited by "
                    "hand?); make a new plan (nothing was changed)"
                )
            locked_id = checked.locked_id
            if checked.how == "pull" and checked.digest:
                pull_image(self.runtime, self.reporter, checked.digest)
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

    def _check_interrupt(self) -> None:
        if self.interrupted.is_set():
            raise Interrupted("interrupted")


def _check_remove(project: str, action: Action) -> None:
    """A remove names one of the containers the tool derives for its model (or the router's name)."""
    names = names_of(project, None if action.is_router else action.model or "")
    if not action.model and not action.is_router or action.container not in names:
        raise PlanFileError(
            f"{action.address}: the plan removes container {action.container!r}, which is not a name "
            f"aigo-apply gives {'the router' if action.is_router else 'that model'}; make a new plan"
        )


def _lanes(plan: Plan, items: list[Prepared]) -> list[list[Prepared]]:
    """The plan's start lanes (decided by the planner and shown in the plan JSON); models the lanes
    do not name (a plan made without lanes) start one after the other in one more lane, as models
    sharing a GPU must."""
    by_address = {item.action.address: item for item in items}
    lanes = [[by_address.pop(a) for a in lane if a in by_address] for lane in plan.lanes]
    return [lane for lane in lanes + [list(by_address.values())] if lane]
