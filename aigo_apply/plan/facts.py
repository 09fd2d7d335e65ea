"""The planner's two inputs besides the desired and observed states, as typed values: what the user
asked for (PlanRequest) and what was read about the host, the Hub and aigo.lock before planning
(PlanFacts). The planner takes these two values instead of a long list of loose parameters."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypedDict

from aigo_apply.errors import PlanFileError
from aigo_apply.observe.hub_answer import HubAnswer, HubKey
from aigo_apply.observe.start_log import StartRecord
from aigo_apply.plan.host_checks import Check
from aigo_apply.plan.ledger_rows import LedgerRow
from aigo_apply.plan.lockfile import LockRestore

PULL_POLICIES = ("missing", "always", "never")


class RequestDict(TypedDict):
    """A PlanRequest as the plan's JSON has it (`request`)."""

    replace: list[str]
    target: list[str]
    ignore: list[str]
    pull: str
    locked: bool
    skip_canary: bool
    require_canary: bool


@dataclass(frozen=True)
class PlanRequest:
    """Options of `plan` and `apply`: --replace, --target, --ignore-readiness, --pull, --locked,
    --skip-canary and --require-canary."""

    replace: frozenset[str] = frozenset()
    target: frozenset[str] = frozenset()
    ignore: frozenset[str] = frozenset()  # readiness check ids the user chose to ignore
    pull: str = "missing"  # missing | always | never
    locked: bool = False  # apply --locked: install what aigo.lock records
    skip_canary: bool = False  # apply --skip-canary: no gate runs; each replace moves its route untested
    require_canary: bool = False  # apply --require-canary: a replace that runs no gate blocks the plan

    def __post_init__(self) -> None:
        if self.pull not in PULL_POLICIES:
            raise ValueError(f"pull policy {self.pull!r} is not one of {', '.join(PULL_POLICIES)}")
        if self.skip_canary and self.require_canary:
            raise ValueError("--skip-canary and --require-canary contradict each other")

    def to_dict(self) -> RequestDict:
        return {
            "replace": sorted(self.replace),
            "target": sorted(self.target),
            "ignore": sorted(self.ignore),
            "pull": self.pull,
            "locked": self.locked,
            "skip_canary": self.skip_canary,
            "require_canary": self.require_canary,
        }

    @classmethod
    def from_dict(cls, data: object) -> PlanRequest:
        """Read back from a saved plan: only the options, checked for their types; the plan made
        with them must still equal the saved one before anything runs."""
        names = ("replace", "target", "ignore")
        if (
            not isinstance(data, dict)
            or not all(
                isinstance(data.get(k, []), list) and all(isinstance(x, str) for x in data.get(k, [])) for k in names
            )
            or data.get("pull", "missing") not in PULL_POLICIES
            or not all(isinstance(data.get(k, False), bool) for k in ("locked", "skip_canary", "require_canary"))
            or (data.get("skip_canary") and data.get("require_canary"))
        ):
            raise PlanFileError("the plan file's request (its plan options) is damaged or edited; make a new plan")
        sets = [frozenset(data.get(k, [])) for k in names]
        return cls(
            sets[0],
            sets[1],
            sets[2],
            data.get("pull", "missing"),
            data.get("locked", False),
            data.get("skip_canary", False),
            data.get("require_canary", False),
        )


@dataclass(frozen=True)
class PlanFacts:
    """What was read before planning, as plain data.

    `checks`: the host readiness checks; blocking ones become blockers unless ignored.
    `gpu_ledger`: the per-GPU memory rows (their verdicts are among the checks), carried as they are.
    `remote`: what the Hub said about each missing download, by (repo, revision, file): its commit,
    files and size, or the error (a gated or missing repo blocks the plan).
    `checkpoints`: what each model's config.json says (`quant_method` of a pre-quantized checkpoint).
    `locked_images` (apply --locked): tags to put back on the image aigo.lock records, by re-tagging
    or by pulling its digest; the containers are planned against the restored images.
    `starts`: the measured starts of the models the plan starts or replaces (platforms/docker/start_records.py),
    newest first, by alias: what the plan predicts their downtime from (plan/downtime.py).
    `host_memory_free`: the host's free memory (MemAvailable, bytes; None unread or unknown), where a
    replaced engine's weights would wait while it sleeps (plan/replace_strategy.py)."""

    checks: tuple[Check, ...] = ()
    gpu_ledger: tuple[LedgerRow, ...] = ()
    remote: Mapping[HubKey, HubAnswer] = field(default_factory=dict)
    checkpoints: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    locked_images: Mapping[str, LockRestore] = field(default_factory=dict)
    starts: Mapping[str, tuple[StartRecord, ...]] = field(default_factory=dict)
    host_memory_free: int | None = None
