"""The lanes models start in: models whose GPUs overlap (`gpus: all` overlaps every GPU model) go
one after the other, each once the previous one is ready (vLLM instances starting together on one
GPU mis-measure each other's free memory); lanes run in parallel, and a `gpus: none` model is a lane
of its own. Decided by the planner, so the plan shows them before anything runs."""

from __future__ import annotations

from collections.abc import Mapping

from aigo_apply.desired.spec import gpu_indices
from aigo_apply.plan.types import Action

STARTING = ("start", "create", "recreate")
GpuSet = frozenset[int] | str  # "all", "none", or device indices


def start_lanes(actions: list[Action], groups: Mapping[str, str] | None = None) -> tuple[tuple[str, ...], ...]:
    """Group the starting models' addresses so that any two sharing a GPU are in the same lane
    (kept in plan order), and so are the models of one swap group (`groups`: alias -> group; apply
    puts a group's models to sleep around each start, config/swap_groups.py), whatever their GPUs."""
    groups = groups or {}
    items = [a for a in actions if a.kind in STARTING and a.model]
    order = {a.address: n for n, a in enumerate(items)}
    lanes: list[tuple[GpuSet, list[str], set[str]]] = []
    for action in items:
        gpus = (action.spec or {}).get("gpus", "all")
        tags = {groups[action.model or ""]} if action.model in groups else set()
        mine: GpuSet = "none" if gpus == "none" else "all" if gpus == "all" else frozenset(gpu_indices(gpus))
        merged: GpuSet = mine
        members: list[str] = []
        for lane in [lane for lane in lanes if _overlap(lane[0], mine) or lane[2] & tags]:
            lanes.remove(lane)
            merged = _union(lane[0], merged)
            members += lane[1]
            tags |= lane[2]
        lanes.append((merged, sorted(members + [action.address], key=order.__getitem__), tags))
    return tuple(tuple(members) for _, members, _ in lanes)


def _union(a: GpuSet, b: GpuSet) -> GpuSet:
    if a == "none":
        return b
    if b == "none":
        return a
    return a | b if isinstance(a, frozenset) and isinstance(b, frozenset) else "all"


def _overlap(a: GpuSet, b: GpuSet) -> bool:
    if a == "none" or b == "none":  # a `gpus: none` model shares no GPU
        return False
    return a == "all" or b == "all" or bool(frozenset(a) & frozenset(b))
