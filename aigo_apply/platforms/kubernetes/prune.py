"""Which of the project's objects go, and in which order (pure). Prune: objects read with the project's
label selector (and checked sound by platforms/kubernetes/observe.py) that the desired set no longer has; with
--target only those of the targeted models. Destroy: all of them. Nothing without the project's labels
is ever a candidate (the objects come only from the selector's LISTs, and are checked again here),
nor a damaged one (observe never hands those on). Deletion runs against the apply order: Deployments
first (the router's last of them, so routes outlive their engines), volumes and Secrets last."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from aigo_apply.json_types import JsonMap, obj
from aigo_apply.platforms.kubernetes.observe import KINDS, KubeObject, is_ours

DELETE_ORDER = ("Deployment", "Service", "ConfigMap", "Job", "PersistentVolumeClaim", "Secret")
assert sorted(DELETE_ORDER) == sorted(KINDS)


def desired_keys(objects: Iterable[JsonMap]) -> set[tuple[str, str]]:
    return {(str(o.get("kind")), str(obj(o.get("metadata")).get("name"))) for o in objects}


def stale(
    project: str,
    objects: Sequence[KubeObject],
    desired: Iterable[JsonMap],
    target: Iterable[str] = (),
) -> list[KubeObject]:
    """The project's objects the desired set no longer has (only the targeted models' when `target`)."""
    keep, scope = desired_keys(desired), set(target)
    out = [
        o
        for o in objects
        if is_ours(o.labels, project)
        and o.key not in keep
        and (not scope or (o.alias is not None and o.alias in scope))
    ]
    return deletion_order(out)


def everything(project: str, objects: Sequence[KubeObject]) -> list[KubeObject]:
    """What destroy removes: every sound object of the project."""
    return deletion_order([o for o in objects if is_ours(o.labels, project)])


def deletion_order(objects: Iterable[KubeObject]) -> list[KubeObject]:
    """Models before the router, the router before project-wide objects; by kind within each."""
    rank = {"model": 0, "router": 1, "project": 2}

    def key(o: KubeObject) -> tuple[int, int, int, str]:
        return (o.kind != "Deployment", rank[o.address.split(".")[0]], DELETE_ORDER.index(o.kind), o.name)

    return sorted(objects, key=key)
