"""The GPU ledger's rules for swap groups (config/swap_groups.py). On each GPU a group counts:
  - awake: the `max_awake` largest memory fractions (and budgets) of its models on that GPU, the
    most that can be awake at once, whichever the router wakes;
  - asleep: each other model keeps ASLEEP_BYTES on the GPU (vLLM sleep level 1 frees its weights and
    KV cache; its CUDA context and graphs stay), added to the GPU's budgets.
And on the host: a sleeping model's weights wait in host memory (level 1 copies them there), so the
weights of every model that can be asleep at once, each group's members but its `max_awake`
smallest, must fit in the host's memory (`host.memory`: blocking above it, a warning above
HOST_TIGHT of it; the OS, the engines' processes and the page cache need the rest). Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from aigo_apply.config.swap_groups import SwapGroup
from aigo_apply.desired.types import DesiredState
from aigo_apply.plan.host_checks import Check
from aigo_apply.plan.ledger_rows import GroupShare, GroupSummary, LedgerModel, LedgerRow
from aigo_apply.plan.vram import OVERHEAD_BYTES, gib

ASLEEP_BYTES = OVERHEAD_BYTES  # what a sleeping engine keeps on its GPU: the stated overhead, not a measurement
HOST_TIGHT = 0.75
HOST_FIX = (
    "put fewer models in the swap group, raise its max_awake (fewer sleep at once, if the GPU holds them), "
    "or use smaller or quantized checkpoints"
)


def count_groups(row: LedgerRow, groups: dict[str, SwapGroup]) -> None:
    """Add each group's awake share and its sleeping models' residue to a GPU row's sums; the row's
    other models are counted already. Records the groups on the row (`swap_groups`)."""
    by_group: dict[str, list[LedgerModel]] = {}
    for m in row["models"]:
        if m.get("swap_group"):
            by_group.setdefault(m["swap_group"], []).append(m)
    summaries: list[GroupShare] = []
    for name, members in sorted(by_group.items()):
        limit = next(g.max_awake for g in groups.values() if g.name == name)
        ranked = sorted(members, key=lambda m: (m["fraction"] or 0.0, m["alias"]), reverse=True)
        awake, asleep = ranked[:limit], ranked[limit:]
        fraction = round(sum(m["fraction"] or 0.0 for m in awake), 6)
        budget = sum(m["budget"] or 0 for m in awake)
        residue = ASLEEP_BYTES * len(asleep)
        row["fraction_sum"] = round(row["fraction_sum"] + fraction, 6)
        row["budget_sum"] += budget + residue
        summaries.append(
            {
                "name": name,
                "max_awake": limit,
                "members": [m["alias"] for m in members],
                "awake_fraction": fraction,
                "awake_budget": budget,
                "asleep_bytes": residue,
            }
        )
    if summaries:
        row["swap_groups"] = summaries


def host_memory_check(desired: DesiredState, host_total: int | None, weights: dict[str, int | None]) -> Check | None:
    """`host.memory`: the weights of the models that can sleep at once against the host's memory.
    `weights`: each model's whole weights in bytes (None: unknown)."""
    if not desired.swap_groups:
        return None
    need, unknown, parts = 0, [], []
    for group in desired.swap_groups:
        sizes = {a: weights.get(a) for a in group.members if a in desired.models}
        unknown += [a for a, size in sizes.items() if size is None]
        known = sorted((s for s in sizes.values() if s is not None), reverse=True)
        asleep = known[: max(0, len(sizes) - group.max_awake)]  # all but the max_awake smallest
        if asleep:
            need += sum(asleep)
            parts.append(f"{group.name}: {gib(sum(asleep))}")
    if not parts and not unknown:
        return None
    held = f"sleeping models' weights in host memory take up to {gib(need)} ({', '.join(parts) or 'none known'})"
    if unknown:
        held += f"; the size of {', '.join(sorted(unknown))} is unknown"
    if host_total is None:
        return Check("host.memory", "warning", f"{held}; this host's memory is unknown", "")
    if need > host_total:
        return Check("host.memory", "blocking", f"{held}, more than this host's {gib(host_total)}", HOST_FIX)
    if need > HOST_TIGHT * host_total:
        return Check("host.memory", "warning", f"{held}, above {HOST_TIGHT:.0%} of this host's {gib(host_total)}", "")
    return Check("host.memory", "warning" if unknown else "ok", f"{held}; this host has {gib(host_total)}", "")


def plan_groups(desired: DesiredState) -> tuple[GroupSummary, ...]:
    """The groups as the plan shows them (JSON `swap_groups`, and the text view): SwapGroup.to_dict's
    keys, the members in the file, their GPUs and the members awake after an apply."""
    out: list[GroupSummary] = []
    for group in desired.swap_groups:
        members = [a for a in group.members if a in desired.models]
        gpus = desired.models[members[0]].spec["gpus"] if members else "all"
        out.append(
            {
                "name": group.name,
                "max_awake": group.max_awake,
                "members": members,
                "gpus": gpus,
                "awake_after_apply": list(group.first),
            }
        )
    return tuple(out)


def render_groups(groups: Sequence[Mapping[str, object]]) -> list[str]:
    """plan_groups' summaries, or a saved plan's (plan_file.check_shape has checked their shape)."""
    lines = []
    for g in groups:
        gpus = g["gpus"]
        shown = gpus if isinstance(gpus, str) else ",".join(str(i) for i in _items(gpus))
        lines.append(
            f"{g['name']} (gpus {shown}): {', '.join(map(str, _items(g['members'])))}; at most {g['max_awake']} "
            f"awake, awake after apply: {', '.join(map(str, _items(g['awake_after_apply'])))}"
        )
    return lines


def _items(value: object) -> Iterable[object]:
    """A list of a summary (a saved one's `gpus` is any JSON: what is not iterable is the TypeError it always was)."""
    if not isinstance(value, Iterable):
        raise TypeError(f"{type(value).__name__!r} object is not iterable")
    return value
