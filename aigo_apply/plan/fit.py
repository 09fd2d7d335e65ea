"""Where a new vLLM model fits on this machine's GPUs beside the models a file already has, for
`aigo-apply add`: which GPUs (and how many, as tensor parallelism), the longest context length that
fits, the memory fraction, or a swap group to join. Judged by the GPU ledger's own rules
(plan/gpu_ledger.py), so that the plan of the file with the new model finds it "ok": on each GPU the
fractions add up to at most 1.0 and the budgets fit the memory the GPU has free; the model's estimate
(plan/vram.py: weights, the KV cache of one full-length sequence, overhead) stays within TIGHT of its
budget. Each choice comes with the words that say why (the entry's comments).

Preferences, in order: the longest context the model takes (config.json), on as few GPUs as that
needs; then shorter contexts, down to MIN_CONTEXT; then a slot in a swap group already on the GPUs.
The fraction is what the GPU has left beside the file's models (a GPU without any: the default share
0.90), so the model's KV cache gets that room. Without GPU facts only the file's own fractions are
known: the fraction is what they leave, nothing is checked against memory, and `gpus` is left to the
user. Pure: the ledger's rows of the file as it is, the file's desired state and the new model's
config.json and weight bytes in, a Fit out."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from aigo_apply.config.defaults import DEFAULT_GPU_MEMORY_UTILIZATION
from aigo_apply.config.document import Gpus
from aigo_apply.config.engine_kinds import ENGINES, in_layers
from aigo_apply.config.swap_groups import awake_sum, membership
from aigo_apply.desired.spec import engine_settings
from aigo_apply.desired.types import DesiredState
from aigo_apply.json_types import JsonMap
from aigo_apply.plan.gpu_ledger import model_gpus
from aigo_apply.plan.ledger_rows import LedgerRow
from aigo_apply.plan.swap_ledger import ASLEEP_BYTES
from aigo_apply.plan.vram import LAYER_KEYS, TIGHT, Estimate, estimate, gib, text_config

MIN_CONTEXT = 4096
_CONTEXTS = tuple(2**n for n in range(20, 11, -1))  # 1M ... 4096 tokens: the shorter lengths tried
_TP = (1, 2, 4, 8)
MIN_SHARE = 0.05  # less room than this on a GPU is no room


@dataclass(frozen=True)
class Fit:
    """The placement: each field None when the entry leaves that setting to the user (or its default)."""

    placed: bool  # False: no placement fits; `notes` say why and what to do
    gpus: list[int] | str | None = None
    tensor_parallel_size: int = 1
    context_length: int | None = None
    fraction: float | None = None
    swap_group: str | None = None
    why: dict[str, str] = field(default_factory=dict)  # setting (dotted below the model) -> why
    notes: tuple[str, ...] = ()


_LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "max_sequence_length")


def context_limit(config: object) -> int | None:
    """The longest context config.json gives the model: the smallest of the lengths it names (vLLM
    derives its limit from the same keys; rope scaling can only raise it), a text model's inside a
    multimodal config; None when it names none."""
    data = config if isinstance(config, dict) else {}
    for holder in (data, data.get("text_config"), data.get("llm_config"), data.get("language_config")):
        if isinstance(holder, dict):
            found = [v for k in _LENGTH_KEYS if type(v := holder.get(k)) is int and 0 < v <= 2**24]
            if found:
                return min(found)
    return None


def contexts(longest: int) -> list[int]:
    """The context lengths tried, longest first: the model's own, then powers of two down to MIN_CONTEXT."""
    return [longest] + [c for c in _CONTEXTS if MIN_CONTEXT <= c < longest]


def fit(rows: list[LedgerRow], desired: DesiredState, config: JsonMap | None, weights: int | None, longest: int) -> Fit:
    """Where the model fits (see the module's docstring). `rows`: gpu_ledger.build of the file as it
    is (empty without GPU facts); `longest`: the context length the model takes."""
    if not rows:
        return _file_only(desired, longest)
    heads = text_config(config or {}).get("num_attention_heads")
    sizes = [tp for tp in _TP if tp <= len(rows) and (not isinstance(heads, int) or heads % tp == 0)]
    ranked = sorted(rows, key=lambda r: (-_room(r), r["index"]))
    if weights is None or not config or not LAYER_KEYS & set(text_config(config)):
        missing = (
            "no weights" if weights is None else "config.json gives no layer count" if config else "no config.json"
        )
        return _unsized(ranked[0], longest, missing)
    for context in contexts(longest):
        for tp in sizes:
            chosen = ranked[:tp]
            room = min(_room(r) for r in chosen)
            total = min(r["memory_total"] or 0 for r in chosen)
            est = estimate(config, weights, context, tp)
            if room >= MIN_SHARE and _holds(est, room, total):
                return _placed(chosen, room, est, longest, tp)
    joined = _join_group(rows, desired, config, weights, longest)
    return joined or _nowhere(rows, config, weights, longest)


def _room(row: LedgerRow) -> float:
    """The share of the GPU a new model may take: what the file's fractions leave (at most 1.0 in
    all), within the memory the GPU has free beside the others' budgets; a GPU without models of the
    file: at most the default share. Rounded down to 0.01."""
    room = 1.0 - float(row["fraction_sum"])
    if row["memory_free"] is not None and row["memory_total"]:
        room = min(room, float(row["memory_free"] - row["budget_sum"]) / row["memory_total"])
    if not row["models"]:
        room = min(room, DEFAULT_GPU_MEMORY_UTILIZATION)
    return max(0.0, math.floor(round(room * 100, 6)) / 100)


def _holds(est: Estimate, fraction: float, total: int) -> bool:
    return est.total is not None and est.total <= TIGHT * int(fraction * total)


def _need(est: Estimate) -> str:
    return (
        f"~{gib(est.total)} (weights {gib(est.weights)} + KV cache {gib(est.kv_cache)} for one {est.tokens}-token "
        f"sequence" + (f" + Mamba state {gib(est.mamba_state)}" if est.mamba_state else "") + " + overhead)"
    )


def _beside(rows: list[LedgerRow]) -> str:
    names = sorted({m["alias"] for r in rows for m in r["models"]})
    return ", ".join(names)


def _placed(chosen: list[LedgerRow], room: float, est: Estimate, longest: int, tp: int) -> Fit:
    where = ", ".join(f"{r['index']}" for r in chosen)
    gpu = "GPUs " + where if tp > 1 else "GPU " + where
    total = min(r["memory_total"] or 0 for r in chosen)  # each known: a GPU of unknown size holds nothing
    others = _beside(chosen)
    why = {
        "gpus": (
            f"{gpu} ({chosen[0]['name']}, {gib(chosen[0]['memory_total'])}): the most room left"
            + (f" beside {others}" if others else "; it holds no other model of this file")
        ),
        "context_length": (
            f"the longest the model takes (config.json), which fits {gpu}"
            if est.tokens == longest
            else f"the longest that fits {gpu}: the model takes {longest} tokens, more than its memory there holds"
        ),
        "vllm.gpu_memory_utilization": (
            f"{room:g} x {gib(total)} = {gib(int(room * total))} per GPU for {_need(est)}; "
            + (
                f"what {others} {'leave' if ', ' in others else 'leaves'} of {gpu}"
                if others
                else "the default share of a GPU with no other model"
            )
        ),
    }
    if tp > 1:
        why["vllm.tensor_parallel_size"] = f"one GPU does not hold it at {est.tokens} tokens: split over {tp}"
    gpus = [r["index"] for r in chosen]
    return Fit(True, gpus, tp, est.tokens, room, None, why)


def _unsized(row: LedgerRow, longest: int, missing: str) -> Fit:
    """A model whose size is unknown: the GPU with the most room, its context as the model says."""
    room = _room(row)
    if room < MIN_SHARE:
        return Fit(
            False, notes=(f"its size is unknown ({missing}), and no GPU has room left: {_beside([row])} take it",)
        )
    unknown = f"its size is unknown ({missing}), so nothing checks that it fits; `aigo-apply plan` estimates it once its files are here"
    why = {
        "gpus": f"GPU {row['index']} ({row['name']}): the most room left",
        "context_length": f"the longest the model takes (config.json); {unknown}",
        "vllm.gpu_memory_utilization": f"the room GPU {row['index']} has left"
        + (f" beside {_beside([row])}" if row["models"] else ""),
    }
    return Fit(True, [row["index"]], 1, longest, room, None, why, (f"the model's size is unknown: {missing}",))


def _join_group(
    rows: list[LedgerRow], desired: DesiredState, config: JsonMap, weights: int, longest: int
) -> Fit | None:
    """A slot in a swap group already on the GPUs: the model takes turns with its members, at a
    fraction no larger than the smallest of the shares awake at once (so the group's share stays)."""
    by_index = {r["index"]: r for r in rows}
    for group in desired.swap_groups:
        spec = desired.models[group.members[0]].spec
        on = model_gpus({"gpus": spec["gpus"], "engine": "vllm"}, len(rows))
        row = by_index.get(on[0]) if on else None
        shares = row.get("swap_groups", []) if row is not None else []
        summary = next((g for g in shares if g["name"] == group.name), None)
        kind = ENGINES.get(spec["engine"])
        # the group's share is a memory fraction, and its members take turns by sleeping
        if row is None or summary is None or not (kind and kind.fraction and kind.sleeps) or not row["memory_total"]:
            continue
        fractions = sorted(
            (m["fraction"] or 0.0 for m in row["models"] if m.get("swap_group") == group.name), reverse=True
        )
        if len(fractions) < group.max_awake or row["memory_free"] is None:
            continue
        slot = fractions[group.max_awake - 1]
        if row["memory_free"] - row["budget_sum"] < ASLEEP_BYTES:
            continue
        for context in contexts(longest):
            est = estimate(config, weights, context, 1)
            if _holds(est, slot, row["memory_total"]):
                members = ", ".join(group.members)
                why = {
                    "swap_group": (
                        f"GPU {row['index']} has no room for it beside the file's models; it takes turns with "
                        f"{members} ({group.max_awake} awake at once)"
                    ),
                    "gpus": "the swap group's GPUs (its models take turns on the same GPUs)",
                    "context_length": (
                        "the longest the model takes (config.json), which fits the group's share"
                        if context == longest
                        else f"the longest that fits the group's share: the model takes {longest} tokens"
                    ),
                    "vllm.gpu_memory_utilization": (
                        f"the group's share of GPU {row['index']} ({slot:g} x {gib(row['memory_total'])}) for {_need(est)}"
                    ),
                }
                gpus = spec["gpus"] if isinstance(spec["gpus"], str) else sorted(spec["gpus"])
                return Fit(True, gpus, 1, context, slot, group.name, why)
    return None


def _nowhere(rows: list[LedgerRow], config: JsonMap, weights: int, longest: int) -> Fit:
    """No placement: whether the model would fit on a GPU alone (then it could take turns with the
    models there), or on none at all."""
    low = contexts(longest)[-1]
    for row in sorted(rows, key=lambda r: (-(r["memory_free"] or 0), r["index"])):
        alone = min(DEFAULT_GPU_MEMORY_UTILIZATION, (row["memory_free"] or 0) / (row["memory_total"] or 1))
        alone = math.floor(round(alone * 100, 6)) / 100
        est = estimate(config, weights, low, 1)
        if _holds(est, alone, row["memory_total"] or 0):
            return Fit(
                False,
                notes=(
                    f"it does not fit beside {_beside([row])} on GPU {row['index']} (room left: {_room(row):g} of it), "
                    f"and alone it would ({_need(est)} at {low} tokens): put those models in a swap group (the "
                    "same `swap_group: NAME` on each, vLLM models only) and run add again to join it, or lower "
                    "their gpu_memory_utilization",
                ),
            )
    most = max((tp for tp in _TP if tp <= len(rows)), default=1)
    est = estimate(config, weights, low, most)
    biggest = max((r["memory_free"] or 0) for r in rows)
    where = "on one GPU" if most == 1 else f"on each of {most} GPUs"
    return Fit(
        False,
        notes=(
            f"it needs {_need(est)} {where} even at {low} tokens, more than these GPUs hold (at most "
            f"{gib(biggest)} free on one): use a smaller or quantized checkpoint",
        ),
    )


def _file_only(desired: DesiredState, longest: int) -> Fit:
    """Without GPU facts: the fraction the file's own models leave on every GPU (validate's sum)."""
    fractions: dict[str, float] = {}
    placement: dict[str, Gpus] = {}
    for alias, model in desired.models.items():
        spec = model.spec
        fraction = engine_settings(spec).get("gpu_memory_utilization")
        if in_layers(spec["engine"]) or spec["gpus"] == "none" or not isinstance(fraction, (int, float)):
            continue
        fractions[alias], placement[alias] = float(fraction), spec["gpus"]
    indices = sorted({g for gpus in placement.values() if isinstance(gpus, list) for g in gpus}) or [0]
    groups = membership(desired.swap_groups)
    taken = max(
        (
            awake_sum(
                [a for a, g in placement.items() if g == "all" or (isinstance(g, list) and i in g)], fractions, groups
            )
            for i in indices
        ),
        default=0.0,
    )
    room = math.floor(round(min(DEFAULT_GPU_MEMORY_UTILIZATION, 1.0 - taken) * 100, 6)) / 100
    if room < MIN_SHARE:
        return Fit(False, notes=(f"the file's models take {taken:.2f} of every GPU they share, leaving no room",))
    why = {"context_length": "the longest the model takes (config.json); not checked against GPU memory"}
    if fractions:
        why["vllm.gpu_memory_utilization"] = f"what the file's other models leave ({taken:.2f} taken where they meet)"
    return Fit(True, None, 1, longest, room if fractions else None, None, why)
