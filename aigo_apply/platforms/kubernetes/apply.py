"""The apply engine for a cluster: carries out a plan's actions with server-side apply (field manager
aigo-apply; `--force-conflicts` takes fields over), never deciding. In this order:

  1. prepare: check every rendered object (a kind the tool makes, the project's labels, the client's
     namespace) and read every Secret's values through the resolver. If anything is wrong here,
     nothing on the cluster has changed. The values go only into the copy sent to the API server:
     never into a message, the journal or an annotation.
  2. the project's shared objects (the Hugging Face token's Secret), when any model acts;
  3. remove: delete each removed model's objects (its GPUs are free before others start);
  4. start, create and recreate, models side by side: each model's objects in the renderer's order;
     its download Job completes before its Deployment is applied; then the rollout is awaited
     (platforms/kubernetes/rollout.py) up to the model's ready_timeout plus time to pull its image. A failure
     says why from the pods and their events, and whether the previous pods still serve (strategy
     Recreate: they are gone, and the message says plainly that the model is down);
  5. the router's objects (a rolling update that drops no request), awaited the same way;
     then each model of step 4 that the router routes is awaited until the router itself lists it
     healthy (platforms/kubernetes/router_wait.py, through the API server's service proxy), up to what is left of
     the model's wait (at least ROUTE_GRACE); a model the router does not route in time fails,
     though its Deployment is Available;
  6. prune: the project's objects the desired set no longer has (platforms/kubernetes/prune.py), except those of a
     model that failed, which are kept for the next try.
`destroy` deletes every object of the project. Progress goes through StepLog (journal + reporter)
and the result is the Docker executor's ApplyReport of Outcomes."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from aigo_apply.config.defaults import DEFAULT_READY_TIMEOUT
from aigo_apply.errors import AigoError, Interrupted, NotReady
from aigo_apply.json_types import JsonMap, JsonObject, number
from aigo_apply.json_types import obj as _dict
from aigo_apply.kube.secrets import SecretSlot, slots, with_values
from aigo_apply.plan.types import Action, Plan
from aigo_apply.platforms.kubernetes import prune
from aigo_apply.platforms.kubernetes.observe import KINDS, ClusterState, KubeObject, as_object, is_ours
from aigo_apply.platforms.kubernetes.rollout import RolloutClient, RolloutWait, job_status
from aigo_apply.platforms.kubernetes.router_wait import INTERRUPTED, ROUTED, RouterWait, routes
from aigo_apply.platforms.outcome import ApplyReport, Outcome, StepLog

MODEL_KINDS = ("start", "create", "recreate")
ROUTER_KINDS = ("create", "recreate", "start", "reload_router")
DOWNLOAD_TIMEOUT = 6 * 3600.0  # a download Job's own budget (weights of hundreds of GB take hours)
ROUTER_TIMEOUT = 300.0  # the router's rollout, its image pull included
# A model's wait is its ready_timeout (which the pod's startupProbe enforces on the engine itself) plus
# this, for the node to pull a multi-GB engine image and the scheduler to place the pod first.
PULL_ALLOWANCE = 900.0
# The least time the router is given to list a model once both have rolled out: HAProxy checks each
# engine every 500 ms and resolves a new Service's DNS name within seconds.
ROUTE_GRACE = 30.0
SecretResolver = Callable[[SecretSlot], str | None]  # None: no value (the token of a public repo)


class KubeWriter(RolloutClient, Protocol):
    namespace: str

    def apply(self, obj: JsonObject, force: bool = False) -> JsonObject: ...
    def delete(self, kind: str, name: str) -> bool: ...
    def proxy_get(
        self, service: str, port: str, path: str, headers: dict[str, str] | None = None
    ) -> tuple[int, str]: ...


@dataclass
class KubeApply:
    client: KubeWriter
    log: StepLog
    resolve: SecretResolver
    force_conflicts: bool = False
    interrupted: threading.Event = field(default_factory=threading.Event)
    wait: RolloutWait | None = None  # a template: each model waits with its own copy
    workers: int = 4
    download_timeout: float = DOWNLOAD_TIMEOUT
    clock: Callable[[], float] = time.monotonic
    route_grace: float = ROUTE_GRACE
    router_key: str | None = None  # one of the router's API keys: the route wait reads its /metrics with it
    _deadlines: dict[str, float] = field(default_factory=dict, init=False, repr=False)
    _filled: dict[tuple[str, str], JsonObject | None] = field(default_factory=dict, init=False, repr=False)

    def run(self, plan: Plan, rendered: Sequence[JsonObject], cluster: ClusterState) -> ApplyReport:
        groups = self._groups(plan.project, rendered)
        acting = [a for a in plan.actions if a.is_container and a.kind in MODEL_KINDS]
        removing = [a for a in plan.actions if a.is_container and a.kind == "remove"]
        router = next((a for a in plan.actions if a.is_router and a.kind in ROUTER_KINDS), None)
        for action in acting + ([router] if router else []):
            if not groups.get(action.address):
                raise AigoError(f"{action.address}: no objects were rendered for this {action.kind}; make a new plan")
        addresses = [a.address for a in acting] + (["router"] if router else [])
        shared = groups.get("project", []) if acting else []
        router_wait = self._router_wait(plan.project, groups.get("router", []))
        routed = {a.address for a in acting if router_wait and a.model in router_wait.routes}
        for obj in shared + [o for a in addresses for o in groups[a]]:
            if obj["kind"] == "Secret":
                self._filled[_key(obj)] = self._fill(obj)
        self.log.journal.record("apply", f"project.{plan.project}", "started", fingerprint=plan.fingerprint)
        outcomes: list[Outcome] = []
        try:
            if shared:
                outcomes += self._shared(shared)
            for action in removing:
                self._check_interrupt()
                outcomes.append(self._delete(action.address, cluster.of(action.address), "remove"))
            if acting:
                with ThreadPoolExecutor(
                    max_workers=min(self.workers, len(acting)), thread_name_prefix="aigo-kube"
                ) as pool:
                    outcomes += pool.map(lambda a: self._model(a, groups[a.address], a.address in routed), acting)
            if router and not self.interrupted.is_set():
                outcomes.insert(0, self._model(router, groups["router"]))
            if router_wait and routed:
                outcomes = self._await_routes(router_wait, acting, routed, outcomes)
            if not self.interrupted.is_set():
                outcomes += self._prune(plan, rendered, cluster, outcomes)
        except Interrupted:
            pass
        finally:
            self._filled.clear()  # the values live no longer than the run
            self._deadlines.clear()
        interrupted = self.interrupted.is_set()
        self.log.journal.record(
            "apply",
            f"project.{plan.project}",
            "interrupted" if interrupted else "finished",
            failed=[o.address for o in outcomes if not o.ok],
        )
        return ApplyReport(outcomes, interrupted)

    # -- preparing ------------------------------------------------------------------------------
    def _groups(self, project: str, rendered: Sequence[JsonObject]) -> dict[str, list[JsonObject]]:
        """address -> its objects in apply order; every object checked before anything is sent."""
        groups: dict[str, list[JsonObject]] = {}
        for raw in rendered:
            kind = raw.get("kind") if isinstance(raw, dict) else None
            obj = as_object(str(kind), raw) if kind in KINDS else None
            if obj is None:
                raise AigoError(
                    f"refusing to apply {str(kind)[:40]!r}: not an object aigo-apply makes (nothing was changed)"
                )
            if not is_ours(obj.labels, project):
                raise AigoError(
                    f"refusing to apply {obj.kind} {obj.name}: it lacks project '{project}''s labels, so no later "
                    "plan or prune would see it (nothing was changed)"
                )
            namespace = _dict(raw.get("metadata")).get("namespace")  # a mapping: as_object checked it
            if namespace not in (None, self.client.namespace):
                raise AigoError(
                    f"refusing to apply {obj.kind} {obj.name} to namespace {namespace!r}: this run works in "
                    f"{self.client.namespace!r} (nothing was changed)"
                )
            groups.setdefault(obj.address, []).append(raw)
        for objs in groups.values():
            objs.sort(key=lambda o: KINDS.index(o["kind"]))  # stable: the renderer's order within a kind
        return groups

    def _fill(self, obj: JsonObject) -> JsonObject | None:
        """The Secret with its values, or None when a value is absent (a public repo's token)."""
        values = {}
        for slot in slots(obj):
            value = self.resolve(slot)
            if value is None:
                return None
            values[slot.key] = value
        return with_values(obj, values)

    # -- acting -----------------------------------------------------------------------------------
    def _apply(self, obj: JsonObject) -> JsonObject | None:
        """Server-side apply one object (a Secret with its values); None when it is skipped."""
        body = self._filled.get(_key(obj), obj) if obj["kind"] == "Secret" else obj
        if body is None:
            return None
        try:
            return self.client.apply(body, force=self.force_conflicts)
        except AigoError as exc:
            if obj["kind"] != "Job" or getattr(exc, "code", None) != 422:
                raise
        # a Job's pod template is immutable: one that finished its download stays; another is redone
        name = _key(obj)[1]
        existing = self.client.get("Job", name)
        if existing is not None and job_status(existing)[0] == "complete":
            return existing
        self.client.delete("Job", name)
        return self.client.apply(body, force=self.force_conflicts)

    def _shared(self, objs: list[JsonObject]) -> list[Outcome]:
        """The project-wide objects; a refusal is reported, and the models still go ahead (a public
        repo's download needs no token)."""
        for obj in objs:
            self._check_interrupt()
            try:
                self._apply(obj)
            except AigoError as exc:
                self.log.step("project", "apply", "failed", str(exc))
                return [Outcome("project", "apply", False, str(exc))]
        return []

    def _model(self, action: Action, objs: list[JsonObject], routed: bool = False) -> Outcome:
        """Apply one model's (or the router's) objects and await its rollout; `routed`: the router's
        check follows, and says the final ok."""
        address, kind = action.address, action.kind
        self.log.step(address, kind, "", "applying " + ", ".join(f"{k} {n}" for k, n in map(_key, objs)))
        waiter = self._waiter(address)
        deployment, generation = "", None
        start = self.clock()
        try:
            for obj in objs:
                self._check_interrupt()
                stored = self._apply(obj)
                if obj["kind"] == "Job":
                    waiter.job(_key(obj)[1], self.download_timeout)
                if obj["kind"] == "Deployment":
                    deployment = _key(obj)[1]
                    generation = number(_dict(_dict(stored).get("metadata")).get("generation"))
            timeout = (
                max(action.ready_timeout or 0.0, ROUTER_TIMEOUT)
                if action.is_router
                else (action.ready_timeout or DEFAULT_READY_TIMEOUT) + PULL_ALLOWANCE
            )
            self._deadlines[address] = start + timeout
            waiter.deployment(deployment, generation, timeout)
        except (NotReady, Interrupted) as exc:
            if isinstance(exc, Interrupted) or exc.interrupted:
                self.log.step(address, kind, "interrupted", f"interrupted; {self._serving(action, deployment)}")
                return Outcome(address, kind, False, "interrupted")
            return self.log.failed(address, kind, f"{exc}; {self._serving(action, deployment)}", exc.log_tail)
        except AigoError as exc:  # refused: a conflict, RBAC, an invalid object; the other models go on
            self.log.step(address, kind, "failed", str(exc))
            return Outcome(address, kind, False, str(exc))
        message = f"Deployment {deployment} rolled out; available after {self.clock() - start:.1f} s"
        self.log.step(address, kind, "" if routed else "ok", message)
        return Outcome(address, kind, True, message)

    # -- the router's view ------------------------------------------------------------------------
    def _router_wait(self, project: str, objs: list[JsonObject]) -> RouterWait | None:
        """A wait on the router the rendered objects describe; None without a router or routes."""
        config = next((o for o in objs if o["kind"] == "ConfigMap"), None)
        table = routes(_dict(config.get("data"))) if config else {}
        if not table:
            return None
        template = self.wait or RolloutWait(self.client)

        def progress(alias: str, elapsed: float, stage: str) -> None:
            self.log.reporter.event("waiting", address=f"model.{alias}", elapsed=round(elapsed, 1), stage=stage)

        return RouterWait(
            self.client,
            project,
            table,
            api_keys=any(o["kind"] == "Secret" for o in objs),
            key=self.router_key,
            clock=template.clock,
            sleep=template.sleep,
            interrupted=self.interrupted,
            on_progress=progress,
        )

    def _await_routes(
        self, wait: RouterWait, acting: list[Action], routed: set[str], outcomes: list[Outcome]
    ) -> list[Outcome]:
        """Each routed model that rolled out, once the router lists it (or failed, saying why)."""
        actions = {a.address: a for a in acting}
        ready = [o for o in outcomes if o.ok and o.address in routed]
        if not ready:
            return outcomes
        router_failed = any(o.address == "router" and not o.ok for o in outcomes)
        now = wait.clock()
        done: dict[str, tuple[str, float, str]] = {}
        error = ""
        if router_failed or self.interrupted.is_set():
            skipped = "the router did not roll out" if router_failed else "interrupted"
        else:
            skipped = ""
            deadlines = {
                str(actions[o.address].model): max(self._deadlines.get(o.address, now), now + self.route_grace)
                for o in ready
            }
            try:
                done = wait.wait(deadlines)
            except AigoError as exc:  # RBAC (get services/proxy), credentials, an unreachable API server
                error = str(exc)
        out = list(outcomes)
        for i, outcome in enumerate(out):
            if outcome not in ready:
                continue
            alias = str(actions[outcome.address].model)
            state, waited, answer = done.get(alias, (INTERRUPTED, 0.0, ""))
            if skipped:
                state, message = ROUTED, f"{outcome.message}; not checked with the router ({skipped})"
            elif error:
                message = f"{outcome.message}, but whether the router routes it could not be read: {error}"
            elif state == ROUTED:
                message = f"{outcome.message}; the router routes it after {waited:.1f} s"
            elif state == INTERRUPTED:
                message = f"{outcome.message}; interrupted while waiting for the router to route it"
            else:
                message = f"{outcome.message}, but {wait.failure(alias, waited, answer)}"
            step = (
                "failed" if error else "ok" if state == ROUTED else "interrupted" if state == INTERRUPTED else "failed"
            )
            self.log.step(outcome.address, outcome.kind, step, message)
            out[i] = dataclasses.replace(outcome, ok=step == "ok", message=message)
        return out

    def _serving(self, action: Action, deployment: str) -> str:
        """Whether anything still serves after a failed rollout, in plain words."""
        what = "the router" if action.is_router else f"model '{action.model}'"
        if action.kind == "create":
            return f"{what} does not serve (nothing served it before)"
        if action.kind == "start":
            return f"{what} does not serve (it did not before this apply either)"
        try:
            found = self.client.get("Deployment", deployment) if deployment else None
        except AigoError:
            found = None
        spec, status = _dict(_dict(found).get("spec")), _dict(_dict(found).get("status"))
        if _dict(spec.get("strategy")).get("type") == "Recreate":
            return (
                f"{what} is down: its strategy Recreate stopped the previous pod before the new one started (a "
                "rolling update would need a spare GPU); fix the cause above and apply again"
            )
        available = status.get("availableReplicas")
        if isinstance(available, int) and available > 0:
            return f"the previous pods still serve {what}: the rolling update keeps them until a new pod is ready"
        return f"{what} is down: no pod of it is available"

    def _waiter(self, address: str) -> RolloutWait:
        def progress(elapsed: float, stage: str) -> None:
            self.log.reporter.event("waiting", address=address, elapsed=round(elapsed, 1), stage=stage)

        template = self.wait or RolloutWait(self.client)
        return dataclasses.replace(template, interrupted=self.interrupted, on_progress=progress)

    def _delete(self, address: str, objects: Sequence[KubeObject], kind: str) -> Outcome:
        return delete_objects(self.client, self.log, address, objects, kind)

    def _prune(
        self, plan: Plan, rendered: Sequence[JsonObject], cluster: ClusterState, outcomes: list[Outcome]
    ) -> list[Outcome]:
        failed = {o.address for o in outcomes if not o.ok}
        done = {o.address for o in outcomes if o.kind == "remove"}
        candidates = prune.stale(plan.project, cluster.objects, rendered, plan.request.target)
        gone = [o for o in candidates if o.address not in failed | done]
        by_address: dict[str, list[KubeObject]] = {}
        for obj in gone:
            by_address.setdefault(obj.address, []).append(obj)
        return [self._delete(address, objs, "prune") for address, objs in by_address.items()]

    def _check_interrupt(self) -> None:
        if self.interrupted.is_set():
            raise Interrupted("interrupted")


def delete_objects(client: KubeWriter, log: StepLog, address: str, objects: Sequence[KubeObject], kind: str) -> Outcome:
    """Delete objects of one address (models' Deployments first); an error is this address's failure."""
    ordered = prune.deletion_order(objects)
    shown = ", ".join(f"{o.kind} {o.name}" for o in ordered) or "nothing (already gone)"
    log.step(address, kind, "", f"deleting {shown}")
    try:
        for obj in ordered:
            client.delete(obj.kind, obj.name)
    except AigoError as exc:
        log.step(address, kind, "failed", str(exc))
        return Outcome(address, kind, False, str(exc))
    log.step(address, kind, "ok", f"deleted {shown}")
    return Outcome(address, kind, True, f"deleted {shown}")


def destroy(client: KubeWriter, cluster: ClusterState, log: StepLog) -> ApplyReport:
    """Delete every sound object of the project (damaged ones are left, and were warned about)."""
    log.journal.record("destroy", f"project.{cluster.project}", "started")
    by_address: dict[str, list[KubeObject]] = {}
    for obj in prune.everything(cluster.project, cluster.objects):
        by_address.setdefault(obj.address, []).append(obj)
    outcomes = [delete_objects(client, log, address, objs, "remove") for address, objs in by_address.items()]
    log.journal.record(
        "destroy", f"project.{cluster.project}", "finished", failed=[o.address for o in outcomes if not o.ok]
    )
    return ApplyReport(outcomes, False)


def _key(obj: JsonMap) -> tuple[str, str]:
    """An object's kind and name (a checked one: its metadata is a mapping)."""
    return str(obj["kind"]), str(_dict(obj["metadata"])["name"])
