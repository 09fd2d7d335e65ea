"""The GPU ledger's records as typed values: one row per GPU (gpu_ledger.build), the planned models on
it, the processes that are not this project's engines, and each swap group's share of it
(swap_ledger.count_groups); and a swap group as the plan shows it (swap_ledger.plan_groups). They stay
plain dicts at run time (TypedDicts): the plan's JSON writes them as they are, in the order of their
keys here. `verdict` and `message` are added by gpu_ledger's judge once the sums are known, `swap_groups`
only on a GPU that has one (NotRequired). Pure."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from aigo_apply.config.document import Gpus
from aigo_apply.plan.vram import EstimateDict

Verdict = Literal["ok", "warning", "blocking"]


class OtherProcess(TypedDict):
    """A process holding memory on the GPU that is not one of this project's engines."""

    pid: int | None
    name: str
    used: int | None


class LedgerModel(TypedDict):
    """A planned model on one GPU: its memory fraction and budget (None for llama.cpp), its estimate."""

    alias: str
    engine: str
    fraction: float | None
    budget: int | None
    estimate: EstimateDict
    found: str | None  # how its size was found (observe/model_files.model_facts)
    problem: str | None  # why its size is unknown
    swap_group: NotRequired[str]
    verdict: NotRequired[Verdict]
    message: NotRequired[str]


class GroupShare(TypedDict):
    """A swap group's count on one GPU: its awake share and what its sleeping models keep."""

    name: str
    max_awake: int
    members: list[str]
    awake_fraction: float
    awake_budget: int
    asleep_bytes: int


class LedgerRow(TypedDict):
    """One GPU of the ledger (bytes; None where NVML does not say)."""

    index: int
    name: str
    memory_total: int | None
    memory_held_by_others: int | None
    memory_free: int | None
    unified_memory: bool
    other_processes: list[OtherProcess]
    models: list[LedgerModel]
    fraction_sum: float
    budget_sum: int
    swap_groups: NotRequired[list[GroupShare]]
    verdict: NotRequired[Verdict]
    message: NotRequired[str]


class GroupSummary(TypedDict):
    """A swap group as the plan shows it (JSON `swap_groups`, and the text view)."""

    name: str
    max_awake: int
    members: list[str]
    gpus: Gpus
    awake_after_apply: list[str]
