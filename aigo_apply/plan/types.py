"""The plan as a value: ordered actions with reasons and field changes, blockers, the GPU lanes
models start in, and the fingerprint of what was observed. Each action kind has one payload type
(plan/payloads.py: a model's or the router's spec, a DownloadSpec or a LockRestore, the JSON's `spec`). Its JSON form (`to_dict`) is the
versioned contract; the text view is rendered from it, and `plan --out` saves it for `apply PLANFILE`. `from_dict` reads a saved
one back and checks its whole shape first (`check_shape`): an edited plan file is a PlanFileError
that says where, never a traceback.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aigo_apply import __version__
from aigo_apply.desired.spec import ModelSpec, RouterSpec
from aigo_apply.desired.types import canonical_json
from aigo_apply.errors import PlanFileError
from aigo_apply.plan.canary import CanaryGate
from aigo_apply.plan.facts import PlanRequest
from aigo_apply.plan.lockfile import LockRestore
from aigo_apply.plan.payloads import (
    DAMAGED,
    PAYLOADS,
    SPEC_PAYLOADS,
    DownloadSpec,
    ModelPayload,
    Payload,
    RouterPayload,
    SavedSpec,
)
from aigo_apply.plan.plan_file import FORMAT_VERSION, KINDS, REMAKE, ActionKind, Effect, check_shape
from aigo_apply.plan.replace_strategy import Strategy

# The closed set of what an action does, and of what a field change costs (DESIGN.md, "effect class"):
# every place that makes one is checked against these by the type checker, and a saved plan's by check_shape.
CHANGING = frozenset(KINDS) - {"noop"}


@dataclass(frozen=True)
class Change:
    path: str
    before: Any
    after: Any
    effect: Effect

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "before": self.before, "after": self.after, "effect": self.effect}


@dataclass(frozen=True)
class Downtime:
    """How long an action takes its model away (plan/downtime.py): `seconds` (None: not known), and
    why, in words. The JSON's `expected_downtime_s` and `downtime`."""

    seconds: float | None
    why: str

    def __str__(self) -> str:
        if self.seconds is None:
            return f"downtime {self.why}"
        if self.seconds == 0:
            return f"downtime none: {self.why}"
        return f"downtime about {max(1, round(self.seconds))} s: {self.why}"


@dataclass(frozen=True)
class Action:
    """One step of a plan. `payload` is of a type its kind takes (PAYLOADS): a model's or the router's spec, a
    DownloadSpec or a LockRestore; `spec`, `download` and `restore` read it as that type."""

    address: str  # model.<alias> | router | image.<ref> | download.<repo@rev> | container.<name>
    kind: ActionKind
    reasons: tuple[str, ...]
    changes: tuple[Change, ...] = ()
    model: str | None = None
    container: str | None = None
    image: str | None = None
    payload: Payload | None = None
    notes: tuple[str, ...] = ()
    ready_timeout: float | None = None
    diff: str | None = None  # router: unified diff of its config files (plan --diff)
    strategy: Strategy | None = None  # recreate of a model: parallel or recreate, and why (plan/replace_strategy.py)
    slot: str = "a"  # a model's engine: which of its two sockets it serves on once this action is done
    canary: CanaryGate | None = None  # a replace's declared gate, and whether it runs (plan/canary.py)
    downtime: Downtime | None = None  # a recreate's or start's: how long the model is away (plan/downtime.py)

    def __post_init__(self) -> None:
        kinds, _, required = PAYLOADS[self.kind]
        if (self.payload is None and required) or (self.payload is not None and not isinstance(self.payload, kinds)):
            names = " or ".join(k.__name__ for k in kinds) or "None"
            raise TypeError(f"a {self.kind} action's payload is a {names}, not {self.payload!r}")

    @property
    def spec(self) -> Mapping[str, object] | None:
        """The canonical spec of a model or the router, as the plan's JSON has it (desired, or saved)."""
        return self.payload.values if isinstance(self.payload, SPEC_PAYLOADS) else None

    @property
    def model_spec(self) -> ModelSpec | None:
        """A model's desired canonical spec, in a plan made now (None in a saved plan's: not acted on)."""
        return self.payload.values if isinstance(self.payload, ModelPayload) else None

    @property
    def router_spec(self) -> RouterSpec | None:
        """The router's desired canonical spec, in a plan made now."""
        return self.payload.values if isinstance(self.payload, RouterPayload) else None

    def desired_model(self) -> ModelSpec:
        """The model spec an engine step acts on: only a plan made now has one (a saved plan is compared
        with the plan made now, never acted on)."""
        if self.model_spec is None:
            raise TypeError(f"{self.address}: a {self.kind} action without a model's desired spec")
        return self.model_spec

    @property
    def download(self) -> DownloadSpec | None:
        return self.payload if isinstance(self.payload, DownloadSpec) else None

    @property
    def restore(self) -> LockRestore | None:
        return self.payload if isinstance(self.payload, LockRestore) else None

    @property
    def is_router(self) -> bool:
        return self.address == "router"

    @property
    def is_container(self) -> bool:
        """An engine container: a model's, or a leftover one the plan removes."""
        return self.address.startswith(("model.", "container."))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "address": self.address,
            "kind": self.kind,
            "reasons": list(self.reasons),
            "changes": [c.to_dict() for c in self.changes],
        }
        for key in ("model", "container", "image", "spec", "ready_timeout", "diff"):
            value = (None if self.payload is None else self.payload.to_spec()) if key == "spec" else getattr(self, key)
            if value is not None:
                out[key] = value
        out |= {"strategy": self.strategy.to_dict()} if self.strategy is not None else {}
        out |= {"slot": self.slot} if self.slot != "a" else {}
        out |= {"canary": self.canary.to_dict()} if self.canary is not None else {}
        if self.downtime is not None:
            out |= {"expected_downtime_s": self.downtime.seconds, "downtime": self.downtime.why}
        out["notes"] = list(self.notes)
        return out

    def approval(self) -> dict[str, Any]:
        """What a saved plan approves of this action: all of it but the downtime predicted, which the
        records of later starts may change without changing what is done, and the words of why a replace
        goes its way, which quote free memory that moves by the minute (the way itself is approved)."""
        out = self.to_dict()
        out.pop("expected_downtime_s", None)
        out.pop("downtime", None)
        if "strategy" in out:
            out["strategy"] = {"name": out["strategy"]["name"]}
        return out


@dataclass(frozen=True)
class Blocker:
    id: str
    message: str
    remediation: str
    address: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "address": self.address, "message": self.message, "remediation": self.remediation}


@dataclass(frozen=True)
class Plan:
    project: str
    config_file: str
    fingerprint: str
    actions: tuple[Action, ...]
    blockers: tuple[Blocker, ...] = ()
    warnings: tuple[str, ...] = ()
    gpu_ledger: tuple[dict[str, Any], ...] = field(default=())
    lanes: tuple[tuple[str, ...], ...] = ()  # addresses of the models that start, by GPU lane (plan/lanes.py)
    request: PlanRequest = field(default_factory=PlanRequest)  # the options it was made with
    swap_groups: tuple[dict[str, Any], ...] = ()  # on-demand models taking turns (plan/swap_ledger.plan_groups)

    def actions_digest(self) -> str:
        """What `apply PLANFILE` compares: a digest of the canonical actions, so a saved plan is an
        approval of exactly these actions and never an instruction read from the file."""
        text = canonical_json([a.approval() for a in self.actions])
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()

    @property
    def summary(self) -> dict[str, Any]:
        counts: dict[str, int] = dict.fromkeys(KINDS, 0)
        for action in self.actions:
            counts[action.kind] += 1
        return {**counts, "has_changes": self.has_changes, "blocked": bool(self.blockers)}

    @property
    def has_changes(self) -> bool:
        return any(a.kind in CHANGING for a in self.actions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format_version": FORMAT_VERSION,
            "aigo_apply_version": __version__,
            "project": self.project,
            "config_file": self.config_file,
            "fingerprint": self.fingerprint,
            "actions": [a.to_dict() for a in self.actions],
            "blockers": [b.to_dict() for b in self.blockers],
            "warnings": list(self.warnings),
            "gpu_ledger": list(self.gpu_ledger),
            "lanes": [list(lane) for lane in self.lanes],
            "request": self.request.to_dict(),
            **({"swap_groups": list(self.swap_groups)} if self.swap_groups else {}),
            "summary": self.summary,
        }

    @classmethod
    def from_dict(cls, data: Any) -> Plan:
        """A saved plan read back: any hand edit is a PlanFileError naming where (check_shape)."""
        check_shape(data)
        try:
            actions = tuple(_action_from_dict(a) for a in data["actions"])
            blockers = tuple(
                Blocker(b["id"], b["message"], b["remediation"], b.get("address")) for b in data.get("blockers") or []
            )
            plan = cls(
                data["project"],
                data["config_file"],
                data["fingerprint"],
                actions,
                blockers,
                tuple(data.get("warnings") or []),
                tuple(data.get("gpu_ledger") or []),
                tuple(tuple(lane) for lane in data.get("lanes") or []),
                PlanRequest.from_dict(data["request"]),
                tuple(data.get("swap_groups") or []),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise PlanFileError(f"the plan file is damaged or edited by hand ({exc!r}); {REMAKE}") from None
        return plan


def _action_from_dict(a: dict[str, Any]) -> Action:
    texts = ("model", "container", "image", "diff")
    if (
        not isinstance(a, dict)
        or not isinstance(a.get("address"), str)
        or a.get("kind") not in KINDS
        or not isinstance(a.get("reasons"), list)
        or not all(isinstance(r, str) for r in a["reasons"])
        or not all(isinstance(a.get(k), (str, type(None))) for k in texts)
        or not isinstance(a.get("spec"), (dict, type(None)))
        or not isinstance(a.get("ready_timeout"), (int, float, type(None)))
        or not isinstance(a.get("expected_downtime_s"), (int, float, type(None)))
        or not isinstance(a.get("downtime"), (str, type(None)))
    ):
        raise PlanFileError(DAMAGED)
    return Action(
        a["address"],
        a["kind"],
        tuple(a["reasons"]),
        tuple(Change(**c) for c in a.get("changes") or []),
        model=a.get("model"),
        container=a.get("container"),
        image=a.get("image"),
        payload=_payload_from(a),
        notes=tuple(a.get("notes") or []),
        ready_timeout=a.get("ready_timeout"),
        diff=a.get("diff"),
        strategy=Strategy(a["strategy"]["name"], a["strategy"]["why"]) if a.get("strategy") else None,
        slot=a.get("slot", "a"),
        canary=_canary_from(a.get("canary")),
        downtime=Downtime(a.get("expected_downtime_s"), a["downtime"]) if a.get("downtime") is not None else None,
    )


def _canary_from(data: Any) -> CanaryGate | None:
    if data is None:
        return None
    try:
        return CanaryGate.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise PlanFileError(DAMAGED) from None


def _payload_from(a: dict[str, Any]) -> Payload | None:
    """A saved action's `spec` as the one payload type of its kind (PAYLOADS)."""
    kind, spec = a["kind"], a.get("spec")
    _, payload_type, required = PAYLOADS[kind]
    if spec is None and not required:
        return None
    if payload_type is DownloadSpec:
        return DownloadSpec.from_spec(spec)
    if payload_type is LockRestore:
        restore = LockRestore.from_spec(str(a.get("image")), spec)
        if restore is None:
            raise PlanFileError(
                f"{a['address']}: the plan's restore of aigo.lock's image is not valid (edited by hand?); "
                "make a new plan (nothing was changed)"
            )
        return restore
    if payload_type is SavedSpec:
        return SavedSpec.from_spec(spec)
    raise PlanFileError(DAMAGED)  # a spec on a kind that has none
