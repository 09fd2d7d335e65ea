"""The lanes models start in: models whose GPUs overlap (`gpus: all` overlaps every GPU model) go
one after the other, each once the previous one is ready (vLLM instances starting together on one
GPU mis-measure each other's free memory); lanes run in parallel, and a `gpus: none` model is a lane
of its own. Decided by the planner, so the plan shows them before anything runs."""

from __future__ import annotations

from aigo_apply.plan.types import Action

STARTING = ("start", "create", "recreate")
GpuSet = frozenset[int] | str  # "all", "none", or device indices


def start_lanes(actions: list[Action]) -> tuple[tuple[str, ...], ...]:
    """Group the starting models' addresses so that any two sharing a GPU are in the same lane
    (kept in plan order)."""
    items = [a for a in actions if a.kind in STARTING and a.model]
    order = {a.address: n for n, a in enumerate(items)}
    lanes: list[tuple[GpuSet, list[str]]] = []
    for action in items:
        gpus = (action.spec or {}).get("gpus", "all")
        if gpus == "none":
            lanes.append(("none", [action.address]))
            continue
        mine: GpuSet = "all" if gpus == "all" else frozenset(gpus)
        merged: GpuSet = mine
        members: list[str] = []
        for lane in [lane for lane in lanes if lane[0] != "none" and _overlap(lane[0], mine)]:
            lanes.remove(lane)
            held = lane[0]  # neither is "none" here: a GpuSet that is not "all" is a frozenset
            merged = held | merged if isinstance(held, frozenset) and isinstance(merged, frozenset) else "all"
            members += lane[1]
        lanes.append((merged, sorted(members + [action.address], key=order.__getitem__)))
    return tuple(tuple(members) for _, members in lanes)


def _overlap(a: GpuSet, b: GpuSet) -> bool:
    return a == "all" or b == "all" or bool(frozenset(a) & frozenset(b))
