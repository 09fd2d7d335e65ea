"""The plan for a cluster, made by the one planner (plan/planner.py) from what platforms/kubernetes/observe.py read.
Three things differ from Docker, and are settled here rather than in the planner:

- the spec hash a Deployment records is of the model's objects as rendered (kube/manifests.py), not
  of a Docker container definition: when it equals the rendered one, the planner is shown the
  desired container's own hash (so "same settings" reads as same), otherwise the recorded one (so
  it reports the model as defined differently);
- nothing is pulled or downloaded by this machine: the nodes pull images and each model's download
  Job fetches its weights, so `pull` and `download` actions are left out;
- the router's files are a ConfigMap: they are compared as rendered for the cluster, a change is a
  `reload_router` (a rolling update of the router pod, which drops no request) with the routes added
  and removed as reasons, and a stale route is no reason (HAProxy's health checks take a route out
  while its engine does not serve)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from aigo_apply.config.kube_names import model_name, router_name
from aigo_apply.desired import labels as L
from aigo_apply.desired.types import DesiredState
from aigo_apply.json_types import JsonObject
from aigo_apply.json_types import obj as _dict
from aigo_apply.kube.engine_pod import rollout_strategy
from aigo_apply.kube.specs import desired_for_kubernetes
from aigo_apply.observe.containers import ObservedState
from aigo_apply.plan.facts import PlanFacts, PlanRequest
from aigo_apply.plan.planner import build_plan
from aigo_apply.plan.replace_strategy import Strategy
from aigo_apply.plan.router_plan import unified_diff
from aigo_apply.plan.types import Action, Plan
from aigo_apply.platforms.kubernetes.observe import ClusterState, as_object
from aigo_apply.router.haproxy import routes_from_models_json

HOST_ONLY = ("pull", "download")


def plan_for_cluster(
    desired: DesiredState,
    cluster: ClusterState,
    rendered: Sequence[JsonObject],
    facts: PlanFacts | None = None,
    request: PlanRequest | None = None,
) -> Plan:
    """The plan that turns what `cluster` holds into `rendered` (kube/manifests.objects(desired, ...))."""
    desired = desired_for_kubernetes(desired)
    observed = planner_view(desired, cluster, rendered)
    plan = build_plan(desired, observed, facts, request)
    actions = []
    for action in plan.actions:
        if action.kind in HOST_ONLY:
            continue
        action = _router(action, desired, observed, rendered) if action.is_router else action
        actions.append(in_cluster_words(_rollout(action, desired), desired.project))
    return dataclasses.replace(plan, actions=tuple(actions))


def _rollout(action: Action, desired: DesiredState) -> Action:
    """On a cluster a model's replace is its Deployment's rollout (kube/engine_pod.rollout_strategy),
    and there are no sockets to alternate: say which rollout, and why."""
    if action.strategy is None or action.model not in desired.models:
        return dataclasses.replace(action, slot="a")
    rolling = rollout_strategy(desired.models[action.model])["type"] == "RollingUpdate"
    strategy = (
        Strategy("parallel", "no GPU: a rolling update, the new pod takes the Service's traffic once ready")
        if rolling
        else Strategy(
            "recreate",
            "on a cluster the GPU ledger cannot see the free GPUs, so the Deployment's strategy is Recreate "
            "(a surge pod would wait for the GPU the old one holds)",
        )
    )
    return dataclasses.replace(action, strategy=strategy, slot="a")


def in_cluster_words(action: Action, project: str) -> Action:
    """The planner speaks of Docker containers; on a cluster the thing made or replaced is the
    model's (or the router's) Deployment, named as config/kube_names.py names it."""
    if action.is_router:
        name = router_name(project)
    elif action.model is not None and action.address.startswith("model."):
        name = model_name(project, action.model)
    else:
        return action
    old = action.container
    reasons = []
    for reason in action.reasons:
        if old and reason == f"no container {old} exists":
            reason = f"no Deployment {name} exists"
        elif old and reason == f"no router container {old} exists":
            reason = f"no router Deployment {name} exists"
        elif reason.startswith("container is "):  # exited: its rollout is not complete, or it has no ready pod
            reason = "its Deployment is not available"
        reasons.append(reason)
    return dataclasses.replace(action, container=name, reasons=tuple(reasons))


def planner_view(desired: DesiredState, cluster: ClusterState, rendered: Sequence[JsonObject]) -> ObservedState:
    """The observed state with each recorded spec hash that equals the rendered one shown as the
    desired container's hash (a Deployment's hash is of its objects; the planner compares
    container hashes)."""
    digests: dict[str | None, str] = {}
    for raw in rendered:
        obj = as_object(str(raw.get("kind")), raw)
        if obj is not None and obj.kind == "Deployment" and L.SPEC_HASH in obj.annotations:
            digests[obj.alias] = obj.annotations[L.SPEC_HASH]
    wanted: dict[str | None, str] = {a: m.container.definition_hash() for a, m in desired.models.items()}
    wanted[None] = desired.router.container.definition_hash()
    ours = []
    for container in cluster.observed.ours:
        key = container.alias if container.role != L.ROLE_ROUTER else None
        if key in wanted and container.spec_hash is not None and container.spec_hash == digests.get(key):
            labels = {**container.labels, L.SPEC_HASH: wanted[key]}
            container = dataclasses.replace(container, labels=labels)
        ours.append(container)
    return dataclasses.replace(cluster.observed, ours=tuple(ours))


def _router(action: Action, desired: DesiredState, observed: ObservedState, rendered: Sequence[JsonObject]) -> Action:
    """The router's action, with its files compared as the cluster holds them."""
    have = observed.router
    if have is None or action.kind in ("create", "start") or have.spec != desired.router.spec:
        return action
    want = _router_files(rendered)
    if observed.router_files == want:
        if action.kind == "recreate":  # files equal, other router objects differ: keep the planner's word
            return action
        return dataclasses.replace(action, kind="noop", reasons=("routes match the running models",), diff=None)
    before = set(routes_from_models_json(observed.router_files.get("models.json", "")))
    after = set(routes_from_models_json(want.get("models.json", "")))
    reasons = [f"route for model {a} to be added" for a in sorted(after - before)]
    reasons += [
        f"route for model {a} to be removed" + (" (disabled)" if a in desired.disabled else "")
        for a in sorted(before - after)
    ]
    reasons = reasons or ["the router configuration differs from what this file renders for the cluster"]
    return dataclasses.replace(
        action, kind="reload_router", reasons=tuple(reasons), changes=(), diff=unified_diff(observed.router_files, want)
    )


def _router_files(rendered: Sequence[JsonObject]) -> dict[str, str]:
    """The data of the router's rendered ConfigMap: its files, as observe reads them back."""
    for raw in rendered:
        obj = as_object(str(raw.get("kind")), raw)
        if obj is not None and obj.kind == "ConfigMap" and obj.component == "router":
            return {k: v for k, v in _dict(raw.get("data")).items() if isinstance(v, str)}
    return {}
