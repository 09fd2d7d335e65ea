"""Reading the cluster into the planner's input. One LIST per kind with the project's label selector
(six requests for 1 model or 200), then a pure parse: each of the project's Deployments becomes the
record the Docker path makes of a container (ObservedContainer: its labels are the Deployment's
annotations, which are the Docker labels, desired/labels.py; its name the one Docker would give), so
the SAME planner compares the same canonical specs and gives the same field-by-field reasons. The
router's ConfigMap data stands for the router's config folder. Every object is kept (KubeObject,
tied to its model by the alias annotation) for prune and destroy.

The answers are input, checked like Docker labels (observe/label_checks.py, reused): an object with
the project's labels whose labels or annotations the tool could not have written (an unknown
component or role, a missing or malformed alias, a Deployment under another name than config/kube_names.py
derives, oversized annotations) is damaged: one warning each, never acted on. A model has one
Deployment at most: only the name derived from its alias is accepted."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from aigo_apply.config import kube_names as names
from aigo_apply.config.kube_names import COMPONENT, COMPONENTS, INSTANCE, MANAGED_BY, MANAGER, NAME
from aigo_apply.config.names import container_name
from aigo_apply.desired import labels as L
from aigo_apply.json_types import JsonMap, JsonObject, JsonValue
from aigo_apply.json_types import obj as _dict
from aigo_apply.observe.containers import ObservedContainer, ObservedState
from aigo_apply.observe.label_checks import label_problem, router_name, shown
from aigo_apply.platforms.kubernetes.rollout import rollout_status

# the kinds the tool makes, in the order they are applied (deletion goes the other way)
KINDS = ("Secret", "PersistentVolumeClaim", "Job", "ConfigMap", "Service", "Deployment")
ROLE_OF = {"model": L.ROLE_ENGINE, "router": L.ROLE_ROUTER}  # a Deployment's component -> its role


class Lister(Protocol):
    namespace: str

    def list(self, kind: str, labels: Mapping[str, str] | None = None) -> list[JsonObject]: ...


def selector(project: str) -> dict[str, str]:
    """The label selector of this project's objects: only these are ever read, changed or deleted."""
    return {MANAGED_BY: MANAGER, INSTANCE: names.instance(project)}


def is_ours(labels: Mapping[str, object], project: str) -> bool:
    return labels.get(MANAGED_BY) == MANAGER and labels.get(INSTANCE) == names.instance(project)


@dataclass(frozen=True)
class KubeObject:
    kind: str
    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    raw: JsonObject = field(compare=False, repr=False)

    @property
    def key(self) -> tuple[str, str]:
        return self.kind, self.name

    @property
    def component(self) -> str:
        return self.labels.get(COMPONENT, "")

    @property
    def alias(self) -> str | None:
        """The model the object belongs to (None: the router's, or the project's)."""
        return None if self.component == "router" else self.annotations.get(L.MODEL)

    @property
    def address(self) -> str:
        """The plan address the object belongs to: model.ALIAS, router, or project (shared)."""
        if self.alias:
            return f"model.{self.alias}"
        return "router" if self.component == "router" else "project"


@dataclass(frozen=True)
class ClusterState:
    """The planner's ObservedState, and every sound object of the project (prune and destroy act
    on these only; damaged ones are only in `observed.damaged`)."""

    project: str
    namespace: str
    observed: ObservedState
    objects: tuple[KubeObject, ...]

    def of(self, address: str) -> list[KubeObject]:
        return [o for o in self.objects if o.address == address]


def read_cluster(client: Lister, project: str) -> ClusterState:
    """One LIST per kind, whatever the number of models."""
    lists = {kind: client.list(kind, labels=selector(project)) for kind in KINDS}
    return parse_cluster(project, client.namespace, lists)


def parse_cluster(project: str, namespace: str, lists: Mapping[str, list[JsonObject]]) -> ClusterState:
    """Pure: the LIST answers -> ClusterState."""
    found, damaged = [], []
    for kind in KINDS:
        for raw in lists.get(kind) or []:
            obj = as_object(kind, raw)
            if obj is None or not is_ours(obj.labels, project):
                continue  # not ours (a selector the server did not honour): never looked at
            problem = object_problem(obj, project)
            if problem:
                damaged.append(damaged_message(obj, project, namespace, problem))
            else:
                found.append(obj)
    containers = [_container(o, project) for o in found if o.kind == "Deployment"]
    router_maps = sorted((o for o in found if o.kind == "ConfigMap" and o.component == "router"), key=lambda o: o.name)
    router_files = {
        k: v
        for o in router_maps
        for k, v in _dict(o.raw.get("data")).items()
        if isinstance(k, str) and isinstance(v, str)
    }
    observed = ObservedState(
        project,
        tuple(sorted(containers, key=lambda c: c.name)),
        (),
        router_files=router_files,
        damaged=tuple(sorted(damaged)),
    )
    return ClusterState(project, namespace, observed, tuple(found))


def object_problem(obj: KubeObject, project: str) -> str | None:
    """Why an object with the project's labels cannot be one the tool made, or None."""
    component, alias = obj.component, obj.annotations.get(L.MODEL)
    if not L.is_ours(obj.annotations, project):  # the labels select; only these annotations say whose it is
        return f"its annotations {L.MANAGED_BY} and {L.PROJECT} do not name aigo-apply and project '{project}'"
    if component not in COMPONENTS:
        return f"label {COMPONENT} is {shown(component)}, not one of {', '.join(COMPONENTS)}"
    if alias is not None and component == "router":
        return f"it is labelled the router's but names a model in annotation {L.MODEL}"
    if alias is not None and obj.labels.get(NAME) != names.label_value(alias):
        return f"label {NAME} is {shown(obj.labels.get(NAME, ''))}, not the one of model {shown(alias)}"
    if obj.kind != "Deployment":
        return _annotation_problem(obj, project) if alias is not None else None
    if component not in ROLE_OF:
        return f"it is a Deployment labelled {COMPONENT}={component}, which aigo-apply never makes"
    if obj.annotations.get(L.ROLE) != ROLE_OF[component]:
        return f"annotation {L.ROLE} is {shown(obj.annotations.get(L.ROLE, ''))}, not '{ROLE_OF[component]}'"
    if not L.is_ours(obj.annotations, project):
        return f"its annotations {L.MANAGED_BY} and {L.PROJECT} do not name aigo-apply and project '{project}'"
    docker_name = router_name(project) if component == "router" else container_name(project, alias or "")
    problem = label_problem(docker_name, obj.annotations, project)  # role, version, alias, engine, sizes
    if problem:
        return problem.replace("label ", "annotation ")
    expected = names.router_name(project) if component == "router" else names.model_name(project, alias or "")
    if obj.name != expected:
        what = "the router" if component == "router" else f"model '{alias}'"
        return f"it is labelled {what} but is named {shown(obj.name)}, not {expected}"
    return None


def _annotation_problem(obj: KubeObject, project: str) -> str | None:
    """A model's other objects: a sound alias and role (their other annotations are not read)."""
    probe = {L.ROLE: obj.annotations.get(L.ROLE, ""), L.LABELS_VERSION: L.CURRENT_LABELS_VERSION}
    probe[L.MODEL], probe[L.ENGINE] = obj.annotations.get(L.MODEL, ""), "vllm"
    problem = label_problem(container_name(project, probe[L.MODEL]), probe, project)
    return problem.replace("label ", "annotation ") if problem else None


def damaged_message(obj: KubeObject, project: str, namespace: str, problem: str) -> str:
    """The plan's warning for a damaged object: which one, what is wrong, what the tool does."""
    return (
        f"{obj.kind} {shown(obj.name)} carries project '{project}' labels, but {problem}: aigo-apply did not make it "
        f"this way and leaves it alone (remove it with `kubectl delete -n {namespace} "
        f"{obj.kind.lower()} {obj.name}` if it is not needed)"
    )


def as_object(kind: str, raw: JsonValue) -> KubeObject | None:
    """A listed (or rendered) object as a KubeObject; None when it has no name to act on."""
    meta = raw.get("metadata") if isinstance(raw, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(raw, dict) or not isinstance(meta, dict) or not isinstance(name, str):
        return None
    return KubeObject(kind, name, _strings(meta.get("labels")), _strings(meta.get("annotations")), raw)


def _strings(value: JsonValue) -> dict[str, str]:
    return (
        {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)} if isinstance(value, dict) else {}
    )


def _container(obj: KubeObject, project: str) -> ObservedContainer:
    """A Deployment as the planner reads a container: named as on Docker, its annotations as its
    labels, running when its rollout is complete and available."""
    router = obj.component == "router"
    state, status = deployment_state(obj.raw)
    return ObservedContainer(
        id=str(_dict(obj.raw.get("metadata")).get("uid") or obj.name),
        name=router_name(project) if router else container_name(project, obj.alias or obj.name),
        state=state,
        status=status,
        exit_code=None,
        image=_image(obj.raw),
        image_id="",
        labels={k: v for k, v in obj.annotations.items() if k.startswith(L.PREFIX)},
    )


def deployment_state(raw: JsonMap) -> tuple[str, str]:
    """(state, status) of a Deployment in the planner's words: `running` when its rollout is
    complete and it is available, `removing` while it is deleted, `exited` otherwise (the plan then
    applies it again and waits, which says why it does not serve)."""
    meta, spec = _dict(raw.get("metadata")), _dict(raw.get("spec"))
    if meta.get("deletionTimestamp"):
        return "removing", "being deleted"
    if spec.get("replicas") == 0:
        return "exited", "scaled to 0 replicas"
    done, message = rollout_status(raw)
    return ("running", "available") if done else ("exited", message)


def _image(raw: JsonMap) -> str:
    """The first container's image; "" when the Deployment has none where it should be."""
    containers = _dict(_dict(_dict(raw.get("spec")).get("template")).get("spec")).get("containers")
    first = containers[0] if isinstance(containers, list) and containers else None
    return str(_dict(first).get("image") or "")
