"""The per-GPU memory ledger of a plan: for each GPU, its total memory, what processes that are not
this project's engines hold, and each planned model's memory fraction, budget and estimate, with a
verdict. Pure: built from NVML facts (hostfacts), model file facts (model_facts) and the desired
state; its verdicts become readiness checks (`gpu.fit` per model, `gpu.memory` per GPU), so blocking
ones stop `apply` like any other blocker and can be waived with --ignore-readiness.

Which GPUs a model uses: `gpus: [..]` or every GPU for `all`; vLLM and SGLang put a model on the
first tensor_parallel_size of those, llama.cpp spreads its layers over all of them. A swap group's
models count as the group's awake share plus what its sleeping models keep (plan/swap_ledger.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence, Sized

from aigo_apply.config.engine_kinds import in_layers
from aigo_apply.config.swap_groups import membership
from aigo_apply.desired.spec import ModelSpec, engine_settings, gpu_indices
from aigo_apply.desired.types import AdapterFiles, DesiredState, whole
from aigo_apply.json_types import JsonMap, maybe_text, number
from aigo_apply.plan.host_checks import Check
from aigo_apply.plan.ledger_rows import LedgerModel, LedgerRow, Verdict
from aigo_apply.plan.swap_ledger import count_groups
from aigo_apply.plan.vram import TIGHT, Estimate, estimate, gib, lora_bytes


def model_gpus(spec: Mapping[str, object], count: int) -> list[int]:
    """The GPUs a model's engine uses, of the `count` there are (its `gpus` and, for an engine that
    splits tensors, its tensor_parallel_size; `spec` may be a part of one: gpus and engine)."""
    gpus = spec["gpus"]
    if gpus == "none":
        return []
    visible = list(range(count)) if gpus == "all" else [g for g in gpu_indices(gpus) if g < count]
    if in_layers(str(spec["engine"])):
        return visible
    return visible[: max(1, whole(_settings(spec).get("tensor_parallel_size", 1), "tensor_parallel_size"))]


def _settings(spec: Mapping[str, object]) -> Mapping[str, object]:
    return engine_settings(spec)


def _config(value: object) -> JsonMap | None:
    """A model's config.json as its facts hold it (observe/model_files.model_facts): an object, or None."""
    return value if isinstance(value, dict) else None


def _notes(value: object) -> tuple[str, ...]:
    """The notes a model's facts carry (a GGUF file's metadata says what it could not read)."""
    return tuple(str(note) for note in value) if isinstance(value, (list, tuple)) else ()


def model_estimate(
    spec: ModelSpec, facts: Mapping[str, object], gpus: int, adapters: tuple[AdapterFiles, ...] = ()
) -> Estimate:
    """A model's estimate on each of its `gpus` from its facts (observe/model_files.model_facts: its
    weights' bytes, its config.json, notes) and the files of its LoRA adapters."""
    settings = _settings(spec)
    config = _config(facts.get("config"))
    if in_layers(
        spec["engine"]
    ):  # llama.cpp: layers (and their KV cache) spread over the GPUs; sizes from GGUF metadata
        est = estimate(config, number(facts.get("weights")), spec["context_length"], max(1, gpus))
        notes = _notes(facts.get("notes"))
        if facts.get("config") is None:
            return dataclasses.replace(est, kv_cache=0, notes=notes + ("KV cache of this GGUF model not estimated",))
        return dataclasses.replace(est, notes=est.notes + notes)
    est = estimate(
        config,
        number(facts.get("weights")),
        spec["context_length"],
        whole(settings.get("tensor_parallel_size", 1), "tensor_parallel_size"),
        maybe_text(settings.get("kv_cache_dtype")),
        maybe_text(settings.get("dtype")),
    )
    return with_adapters(est, spec, config, adapters)


def with_adapters(
    est: Estimate, spec: ModelSpec, config: JsonMap | None, adapters: tuple[AdapterFiles, ...]
) -> Estimate:
    """The estimate with the LoRA buffers of a model's adapters added (an estimate itself), and a note
    naming the modules the adapters train (`adapters`: their files, as read before planning)."""
    settings = _settings(spec)
    if not spec.get("adapters") or "max_loras" not in settings or "max_lora_rank" not in settings:
        return est
    size, note = lora_bytes(
        config,
        whole(settings["max_loras"], "max_loras"),
        whole(settings["max_lora_rank"], "max_lora_rank"),
        whole(settings.get("tensor_parallel_size", 1), "tensor_parallel_size"),
        maybe_text(settings.get("dtype")),
    )
    modules = sorted({m for a in adapters for m in a.target_modules})
    notes = est.notes + (note,) + ((f"the adapters train {', '.join(modules)}",) if modules else ())
    return dataclasses.replace(est, lora=size or 0, notes=notes)


def _records(value: object) -> list[Mapping[str, object]]:
    """A list of records (NVML's GPUs or a GPU's processes, adapters/host.nvml_facts; a row's models), or
    the TypeError reading it as one always was."""
    if not isinstance(value, list):
        raise TypeError(f"{value!r} is not a list of records")
    return [_fields(v) for v in value]


def _fields(value: object) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise TypeError(f"{value!r} is not a record")
    return value


def _bytes(value: object) -> float | None:
    """A number of bytes of a row (a saved plan's too), or the TypeError that gib always raised on another value."""
    if value is None or isinstance(value, (int, float)):
        return value
    raise TypeError(f"{value!r} is not a number of bytes")


def _index(value: object) -> int:
    if type(value) is not int:
        raise TypeError(f"GPU index {value!r} is not a whole number")
    return value


def build(
    desired: DesiredState, nvml: Mapping[str, object], facts: Mapping[str, Mapping[str, object]], ours: set[str]
) -> list[LedgerRow]:
    """The ledger rows, one per GPU that exists (empty without NVML). `nvml`: adapters/host.nvml_facts;
    `facts`: each model's observe/model_files.model_facts."""
    if not nvml.get("available"):
        return []
    gpus = _records(nvml.get("gpus", []))
    rows: list[LedgerRow] = []
    for gpu in gpus:
        total, used = number(gpu.get("memory_total")), number(gpu.get("memory_used"))
        procs = _records(gpu.get("processes", []))
        mine = sum(number(p.get("used")) or 0 for p in procs if p.get("container_id") in ours)
        others_held = None if used is None else max(0, used - mine)
        free = None if total is None or others_held is None else total - others_held
        rows.append(
            {
                "index": _index(gpu["index"]),
                "name": str(gpu.get("name", "")),
                "memory_total": total,
                "memory_held_by_others": others_held,
                "memory_free": free,
                "unified_memory": bool(gpu.get("unified_memory")),
                "other_processes": [
                    {"pid": number(p.get("pid")), "name": str(p.get("name", "")), "used": number(p.get("used"))}
                    for p in procs
                    if p.get("container_id") not in ours
                ],
                "models": [],
                "fraction_sum": 0.0,
                "budget_sum": 0,
            }
        )
    groups = membership(desired.swap_groups)
    for alias, model in sorted(desired.models.items()):
        spec = model.spec
        on = model_gpus(spec, len(gpus))
        if not on:
            continue
        share = _settings(spec).get("gpu_memory_utilization") if not in_layers(spec["engine"]) else None
        fraction = share if isinstance(share, (int, float)) else None
        found = facts.get(alias, {})
        adapters = tuple(
            desired.adapter_files[a["adapter_dir"]]
            for a in (spec.get("adapters") or {}).values()
            if a["adapter_dir"] in desired.adapter_files
        )
        est = model_estimate(spec, found, len(on), adapters)
        for index in on:
            row = rows[index]
            budget = int(fraction * row["memory_total"]) if fraction is not None and row["memory_total"] else None
            group = groups.get(alias) if spec.get("on_demand") else None
            if fraction is not None and group is None:  # a group's share is counted by count_groups
                row["fraction_sum"] = round(row["fraction_sum"] + fraction, 6)
                row["budget_sum"] += budget or 0
            entry: LedgerModel = {
                "alias": alias,
                "engine": spec["engine"],
                "fraction": fraction,
                "budget": budget,
                "estimate": est.to_dict(),
                "found": maybe_text(found.get("found")),
                "problem": maybe_text(found.get("problem")),
            }
            if group:
                entry["swap_group"] = group.name
            row["models"].append(entry)
    for row in rows:
        count_groups(row, groups)
        _judge(row)
    return rows


def _judge(row: LedgerRow) -> None:
    """Verdicts for each model on the GPU and for the GPU as a whole."""
    left = None if row["memory_free"] is None else row["memory_free"] - row["budget_sum"]
    where = f"GPU {row['index']}"
    for m in row["models"]:
        need = m["estimate"]["total"]
        if need is None:
            m["verdict"], m["message"] = (
                "warning",
                f"model {m['alias']}: size unknown on {where} ({m['problem'] or 'no config.json'})",
            )
        elif m["budget"] is None:  # llama.cpp: whatever is left after the others' budgets
            fits = left is None or need <= left
            m["verdict"] = "ok" if fits else "blocking"
            m["message"] = (
                f"model {m['alias']} needs ~{gib(need)} on {where}, where {gib(left)} is left after "
                "the other models' budgets"
            )
        else:
            m["verdict"] = "blocking" if need > m["budget"] else "warning" if need > TIGHT * m["budget"] else "ok"
            est = m["estimate"]
            m["message"] = (
                f"model {m['alias']} needs ~{gib(need)} on {where} (weights {gib(est['weights'])} + KV cache "
                f"{gib(est['kv_cache'])} for one {est['tokens']}-token sequence"
                + (f" + Mamba state {gib(est['mamba_state'])}" if est["mamba_state"] else "")
                + (f" + LoRA adapters {gib(est['lora'])} (an estimate)" if est.get("lora") else "")
                + f" + overhead {gib(est['overhead'])}); its budget is {gib(m['budget'])} "
                f"({m['fraction']:g} x {gib(row['memory_total'])})"
            )
    verdict: Verdict = "ok"
    message = f"{where}: the models' budgets fit"
    if row["fraction_sum"] > 1.0 + 1e-9:
        verdict, message = "blocking", f"{where}: memory fractions add up to {row['fraction_sum']:.2f} (more than 1.0)"
    elif row["memory_free"] is not None and row["budget_sum"] > row["memory_free"]:
        verdict = "warning" if row["unified_memory"] else "blocking"
        held = (
            ", ".join(
                f"pid {p['pid']} {p['name']} {gib(p['used'])}".replace("  ", " ")
                for p in row["other_processes"]
                if p.get("used")
            )
            or "the driver and the desktop"
        )
        message = (
            f"{where}: the models' budgets take {gib(row['budget_sum'])} but only {gib(row['memory_free'])} is "
            f"free ({gib(row['memory_held_by_others'])} held by other processes: {held})"
        )
    row["verdict"], row["message"] = verdict, message


FIT_FIX = (
    "lower context_length, raise its gpu_memory_utilization, spread it over more GPUs with "
    "tensor_parallel_size, or use a smaller or quantized checkpoint"
)
UNKNOWN_FIX = (
    "put the model's files on this machine (config.json and weights) so the estimate can run; "
    "or --ignore-readiness gpu.fit if you know it fits"
)
MEMORY_FIX = (
    "stop the processes holding the GPU (see nvidia-smi), or lower the models' gpu_memory_utilization "
    "so their budgets fit in the free memory"
)


def checks(rows: list[LedgerRow]) -> list[Check]:
    """One `gpu.fit` check per model and GPU and one `gpu.memory` check per GPU that has models."""
    out = []
    for row in rows:
        if not row["models"]:
            continue
        for m in row["models"]:
            status = m["verdict"]
            unknown = m["estimate"]["total"] is None
            fix = "" if status == "ok" else UNKNOWN_FIX if unknown else FIT_FIX
            text = m["message"] + ("" if status != "warning" or unknown else " - a tight fit")
            out.append(Check("gpu.fit", status, text, fix))
        fix = (
            ""
            if row["verdict"] == "ok"
            else (
                "lower the models' gpu_memory_utilization so the sum is at most 1.0"
                if row["fraction_sum"] > 1.0
                else MEMORY_FIX
            )
        )
        out.append(Check("gpu.memory", row["verdict"], row["message"], fix))
    return out


def render(rows: Sequence[Mapping[str, object]]) -> list[str]:
    """The ledger as text lines for `plan` and `readiness`: build's rows, or a saved plan's (read as
    they come: a value of another kind is the TypeError it always was)."""
    lines = []
    for row in rows:
        if not row["models"]:
            continue
        models = _records(row["models"])
        total = gib(_bytes(row["memory_total"])) + (" (unified memory)" if row["unified_memory"] else "")
        lines.append(
            f"GPU {row['index']} {row['name']}: {total}, {gib(_bytes(row['memory_held_by_others']))} held by other "
            f"processes, {gib(_bytes(row['memory_free']))} free"
        )
        for m in models:
            est = _fields(m["estimate"])
            fraction = _bytes(m["fraction"])
            share = f"{fraction:g} -> budget {gib(_bytes(m['budget']))}" if fraction is not None else "no fraction"
            group = f" (swap group {m['swap_group']})" if m.get("swap_group") else ""
            lines.append(
                f"  {m['alias']:<20} {m['engine']:<9} {share}; needs ~{gib(_bytes(est['total']))}{group}  "
                f"[{m['verdict']}]"
            )
        for g in _records(row.get("swap_groups", [])):
            members = g["members"]
            if not isinstance(members, Sized):
                raise TypeError(f"object of type {type(members).__name__!r} has no len()")
            lines.append(
                f"  swap group {g['name']}: {g['max_awake']} of {len(members)} awake at once counts "
                f"{_bytes(g['awake_fraction']):g} ({gib(_bytes(g['awake_budget']))}); the sleeping keep "
                f"~{gib(_bytes(g['asleep_bytes']))}"
            )
        lines.append(
            f"  fractions {_bytes(row['fraction_sum']):.2f} of 1.00, budgets {gib(_bytes(row['budget_sum']))}  "
            f"[{row['verdict']}]"
        )
    return lines
