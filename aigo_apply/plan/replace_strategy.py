"""How a running model is replaced, decided in the plan (models.ALIAS.update, or defaults.update):

  parallel  the new engine starts beside the old one (a second slot: its own container and socket or
            port), is proven ready, takes the route in one router reload; the old one drains (its
            running requests finish) and goes. If the new one never serves, it goes and the old one
            never stopped serving.
  recreate  the old engine stops first (its GPU memory is needed); the router holds the model's new
            requests meanwhile and releases them to the new engine once it serves.
  auto      parallel when the old and the new engine fit on their GPUs at the same time (by their
            memory fractions, and the free memory NVML reports when there is a GPU), else recreate.

Pure: from the desired state, the old container's recorded spec and the ledger rows; the reason is
worded for the plan ("parallel: 0.45 + 0.45 of GPU 0 fit")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aigo_apply.desired.types import DesiredState
from aigo_apply.plan.vram import gib

UPDATES = ("auto", "parallel", "recreate")
DEFAULT_UPDATE = "auto"
ALL = -1  # "every GPU" when NVML did not say how many there are


@dataclass(frozen=True)
class Strategy:
    name: str  # parallel | recreate
    why: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "why": self.why}

    def __str__(self) -> str:
        return f"{self.name}: {self.why}"


def choose(
    alias: str,
    desired: DesiredState,
    old: dict[str, Any] | None,
    update: str = DEFAULT_UPDATE,
    ledger: tuple[dict[str, Any], ...] = (),
) -> Strategy:
    """The strategy of replacing `alias`'s running engine (recorded spec `old`) by the desired one."""
    new = desired.models[alias].spec
    if update == "recreate":
        return Strategy("recreate", f"models.{alias}.update is recreate")
    if new.get("on_demand") or (old or {}).get("on_demand"):
        return Strategy(
            "recreate", "an on-demand model keeps its swap group's rules: the group holds its requests meanwhile"
        )
    if "socket" not in new:
        return Strategy(
            "recreate",
            f"it is published on 127.0.0.1:{new.get('port')}, which one container can hold at a time "
            "(an engine on its Unix socket can be replaced side by side)",
        )
    fit = _fit(alias, desired, old or new, ledger)
    if update == "parallel":
        if fit is None or fit[0]:
            return Strategy("parallel", f"models.{alias}.update is parallel" + (f" ({fit[1]})" if fit else ""))
        return Strategy(
            "parallel",
            f"models.{alias}.update is parallel, although {fit[1]}: the new engine may fail to start, and the "
            "old one keeps serving if it does",
        )
    if fit is None:
        return Strategy("parallel", "no GPU: the old and the new engine run side by side")
    return Strategy("parallel" if fit[0] else "recreate", fit[1])


def _fit(alias: str, desired: DesiredState, old: dict[str, Any], ledger: tuple[dict[str, Any], ...]) -> Any:
    """(whether both fit, why) for the GPUs the new engine uses; None when it uses none."""
    count = len(ledger) or None
    new = desired.models[alias].spec
    new_gpus = _gpus(new, count)
    if not new_gpus:
        return None
    if new["engine"] == "llama.cpp" or old.get("engine") == "llama.cpp":
        return False, "llama.cpp declares no memory fraction, so whether two copies fit on the GPU cannot be known"
    old_gpus = set(_gpus(old, count))
    rows = {row["index"]: row for row in ledger}
    shown = ""
    for gpu in new_gpus:
        mine = _fraction(new)
        held = _fraction(old) if (gpu in old_gpus or ALL in old_gpus or gpu == ALL) else 0.0
        others = sum(
            _fraction(m.spec)
            for a, m in desired.models.items()
            if a != alias and not m.spec.get("on_demand") and _shares(_gpus(m.spec, count), gpu)
        )
        where = "the GPUs" if gpu == ALL else f"GPU {gpu}"
        parts = f"{mine:g} + {held:g}" + (f" + {others:g} of the other models" if others else "")
        if mine + held + others > 1.0 + 1e-9:
            why = f"the new engine needs {mine:g} of {where} while the old holds {held:g}"
            return False, why + (f" and the other models {others:g}" if others else "")
        row = rows.get(gpu)
        if row and row.get("memory_total") and row.get("memory_free") is not None:
            need = int((mine + held + others) * row["memory_total"])
            if need > row["memory_free"]:
                return False, (
                    f"{parts} of {where} take {gib(need)}, but {gib(row['memory_free'])} is free beside other processes"
                )
        shown = shown or f"{parts} of {where}"
    more = f" (and of GPU {', '.join(str(g) for g in new_gpus[1:])})" if len(new_gpus) > 1 else ""
    return True, f"{shown}{more} fit"


def _fraction(spec: dict[str, Any]) -> float:
    settings: dict[str, Any] = spec.get(spec.get("engine", "vllm"), {}) or {}
    value = settings.get("gpu_memory_utilization")
    return float(value) if isinstance(value, (int, float)) else 0.0


def _gpus(spec: dict[str, Any], count: int | None) -> list[int]:
    """The GPUs an engine uses (ALL for `gpus: all` when the count is unknown)."""
    gpus = spec.get("gpus", "all")
    if gpus == "none":
        return []
    if gpus == "all":
        visible = list(range(count)) if count else [ALL]
    else:
        visible = [g for g in gpus if count is None or g < count]
    tp = int((spec.get(spec.get("engine", "vllm"), {}) or {}).get("tensor_parallel_size", 1) or 1)
    return visible if ALL in visible else visible[: max(1, tp)]


def _shares(gpus: list[int], gpu: int) -> bool:
    return gpu in gpus or ALL in gpus or (gpu == ALL and bool(gpus))
