"""How a running model is replaced, decided in the plan (models.ALIAS.update, or defaults.update):

  parallel  the new engine starts beside the old one (a second slot: its own container and socket or
            port), is proven ready, takes the route in one router reload; the old one drains (its
            running requests finish) and goes. If the new one never serves, it goes and the old one
            never stopped serving.
  recreate  the old engine stops first (its GPU memory is needed); the router holds the model's new
            requests meanwhile and releases them to the new engine once it serves.
  sleep     the router holds the model's requests, the old engine sleeps (vLLM sleep level 1: its weights
            move to host memory, its KV cache is freed) and the new one starts on the other slot in the
            GPU memory it freed; once the new one serves the route moves to it and the old one goes.
            If the new one fails, the old one wakes (seconds, not a whole start) and serves again.
            Possible where the running engine is vLLM on its socket started with sleep mode (a model
            with `update: sleep` starts with it), the host's free memory (MemAvailable) holds its
            weights with a tenth to spare, and the new engine fits beside what a sleeping one keeps.
  auto      parallel when the old and the new engine fit on their GPUs at the same time (by their
            memory fractions, and the free memory NVML reports when there is a GPU), else sleep where
            possible, else recreate.

Pure: from the desired state, the old container's recorded spec, the ledger rows and the host's free
memory; the reason is worded for the plan ("parallel: 0.45 + 0.45 of GPU 0 fit")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aigo_apply.config.engine_kinds import DEFAULT_ENGINE, ENGINES, in_layers
from aigo_apply.desired.spec import engine_settings, gpu_indices
from aigo_apply.desired.types import DesiredState, whole
from aigo_apply.plan.swap_ledger import ASLEEP_BYTES
from aigo_apply.plan.vram import gib

UPDATES = ("auto", "parallel", "recreate", "sleep")
BESIDE = ("parallel", "sleep")  # the ways that start the new engine on the model's other socket
HOST_SHARE = 0.9  # of the host's free memory a sleeping engine's weights may take (the rest: its processes, the OS)
DEFAULT_UPDATE = "auto"
ALL = -1  # "every GPU" when NVML did not say how many there are


@dataclass(frozen=True)
class Strategy:
    name: str  # parallel | recreate | sleep
    why: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "why": self.why}

    def __str__(self) -> str:
        return f"{self.name}: {self.why}"


def choose(
    alias: str,
    desired: DesiredState,
    old: Mapping[str, object] | None,
    update: str = DEFAULT_UPDATE,
    ledger: tuple[dict[str, Any], ...] = (),
    host_free: int | None = None,
) -> Strategy:
    """The strategy of replacing `alias`'s running engine (recorded spec `old`) by the desired one;
    `host_free`: the host's free memory in bytes (MemAvailable; None when unknown)."""
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
    if update == "sleep":
        can, why = _sleep_way(alias, desired, old, ledger, host_free)
        if can:
            return Strategy("sleep", f"models.{alias}.update is sleep: {why}")
        return Strategy("recreate", f"models.{alias}.update is sleep, but {why}")
    if fit is None:
        return Strategy("parallel", "no GPU: the old and the new engine run side by side")
    if fit[0]:
        return Strategy("parallel", fit[1])
    if not _has_sleep_mode(old):  # the usual case says nothing of a sleep it never could do
        return Strategy("recreate", fit[1])
    can, why = _sleep_way(alias, desired, old, ledger, host_free)
    return Strategy("sleep", f"{fit[1]}; {why}") if can else Strategy("recreate", f"{fit[1]}, and {why}")


def _has_sleep_mode(old: Mapping[str, object] | None) -> bool:
    return bool(old and (old.get("sleep_mode") or old.get("on_demand")))


def _sleep_way(
    alias: str,
    desired: DesiredState,
    old: Mapping[str, object] | None,
    ledger: tuple[dict[str, Any], ...],
    host_free: int | None,
) -> tuple[bool, str]:
    """(whether the old engine can sleep through the new one's start, why), worded to follow "but" or
    "and" when it cannot and to stand alone when it can."""
    new = desired.models[alias].spec
    if old is None:
        return False, "the running engine's settings are not recorded"
    engine = old.get("engine", DEFAULT_ENGINE)
    if not all(_sleeps(e) for e in (engine, new.get("engine"))):
        return False, f"the running engine is {engine}, and only vLLM has a sleep mode aigo-apply drives"
    if not _gpus(new, len(ledger) or None):
        return False, "it uses no GPU, and vLLM's sleep mode needs one"
    if "socket" not in old:
        return False, "the running engine is published on a port, which the new one needs while the old one sleeps"
    if not _has_sleep_mode(old):
        return False, (
            "the running engine was started without sleep mode (with models."
            f"{alias}.update: sleep the new one starts with it, so the next replace can sleep it)"
        )
    weights = _weights(alias, ledger) if old.get("source") == new.get("source") else None
    if weights is None:
        why = (
            "the size of its weights is unknown"
            if old.get("source") == new.get("source")
            else ("the running engine serves another checkpoint, whose size the plan does not know")
        )
        return False, f"{why}, so whether host memory holds them while it sleeps cannot be known"
    if host_free is None:
        return (
            False,
            f"this host's free memory is unknown, so whether it holds its {gib(weights)} of weights cannot be known",
        )
    if weights > HOST_SHARE * host_free:
        return False, (
            f"its {gib(weights)} of weights would not fit in host memory while it sleeps "
            f"(the host has {gib(host_free)} free; aigo-apply leaves a tenth of it)"
        )
    beside = _fit(alias, desired, old, ledger, asleep=True)
    if beside is not None and not beside[0]:
        return False, f"even beside a sleeping engine {beside[1]}"
    return True, (
        f"the old engine sleeps (its {gib(weights)} of weights fit in the host's {gib(host_free)} free memory), "
        "so a failed start wakes it in seconds"
    )


def _weights(alias: str, ledger: tuple[dict[str, Any], ...]) -> int | None:
    """A model's whole weights: the ledger's per-GPU share added over the GPUs it is on (None: unknown)."""
    total, seen = 0, False
    for row in ledger:
        for m in row.get("models", ()):
            if m.get("alias") != alias:
                continue
            share = (m.get("estimate") or {}).get("weights")
            if not isinstance(share, int):
                return None
            total, seen = total + share, True
    return total if seen else None


def _fit(
    alias: str,
    desired: DesiredState,
    old: Mapping[str, object],
    ledger: tuple[dict[str, Any], ...],
    asleep: bool = False,
) -> tuple[bool, str] | None:
    """(whether both fit, why) for the GPUs the new engine uses; None when it uses none. `asleep`: the
    old engine sleeps, keeping ASLEEP_BYTES of each GPU it is on (counted where the GPU's size is known)."""
    count = len(ledger) or None
    new = desired.models[alias].spec
    new_gpus = _gpus(new, count)
    if not new_gpus:
        return None
    layers = next((e for e in (new["engine"], old.get("engine")) if in_layers(e)), None)
    if layers is not None:
        return False, f"{layers} declares no memory fraction, so whether two copies fit on the GPU cannot be known"
    old_gpus = set(_gpus(old, count))
    rows = {row["index"]: row for row in ledger}
    shown = ""
    for gpu in new_gpus:
        mine = _fraction(new)
        held = _fraction(old) if (gpu in old_gpus or ALL in old_gpus or gpu == ALL) else 0.0
        if asleep:
            size = rows.get(gpu, {}).get("memory_total")
            held = round(ASLEEP_BYTES / size, 3) if held and size else 0.0
        others = sum(
            _fraction(m.spec)
            for a, m in desired.models.items()
            if a != alias and not m.spec.get("on_demand") and _shares(_gpus(m.spec, count), gpu)
        )
        where = "the GPUs" if gpu == ALL else f"GPU {gpu}"
        parts = f"{mine:g} + {held:g}" + (f" + {others:g} of the other models" if others else "")
        if mine + held + others > 1.0 + 1e-9:
            why = f"the new engine needs {mine:g} of {where} while the old holds {held:g}"
            why += " asleep" if asleep else ""
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


def _sleeps(engine: Any) -> bool:
    """The engine kind has a sleep mode aigo-apply drives (config/engine_kinds.py); False for no kind."""
    kind = ENGINES.get(engine) if isinstance(engine, str) else None
    return kind is not None and kind.sleeps


def _fraction(spec: Mapping[str, object]) -> float:
    value = engine_settings(spec).get("gpu_memory_utilization")
    return float(value) if isinstance(value, (int, float)) else 0.0


def _gpus(spec: Mapping[str, object], count: int | None) -> list[int]:
    """The GPUs an engine uses (ALL for `gpus: all` when the count is unknown)."""
    gpus = spec.get("gpus", "all")
    if gpus == "none":
        return []
    if gpus == "all":
        visible = list(range(count)) if count else [ALL]
    else:
        visible = [g for g in gpu_indices(gpus) if count is None or g < count]
    tp = whole(engine_settings(spec).get("tensor_parallel_size", 1) or 1, "tensor_parallel_size")
    return visible if ALL in visible else visible[: max(1, tp)]


def _shares(gpus: list[int], gpu: int) -> bool:
    return gpu in gpus or ALL in gpus or (gpu == ALL and bool(gpus))
