"""The plan as a value: ordered actions with reasons and field changes, blockers, the GPU lanes
models start in, and the fingerprint of what was observed. Its JSON form (`to_dict`) is the versioned contract; the text
view is rendered from it, and `plan --out` saves it for `apply PLANFILE`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aigo_apply import __version__
from aigo_apply.errors import PlanFileError

FORMAT_VERSION = 1
KINDS = ("pull", "download", "create", "recreate", "start", "remove", "reload_router", "noop")
CHANGING = frozenset(KINDS) - {"noop"}


@dataclass(frozen=True)
class Change:
    path: str
    before: Any
    after: Any
    effect: str  # "recreate" | "router" | "none" | "create" | "remove"

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "before": self.before, "after": self.after, "effect": self.effect}


@dataclass(frozen=True)
class Action:
    address: str  # model.<alias> | image.<ref>
    kind: str
    reasons: tuple[str, ...]
    changes: tuple[Change, ...] = ()
    model: str | None = None
    container: str | None = None
    image: str | None = None
    spec: dict[str, Any] | None = None  # desired canonical spec, for start/create/recreate
    notes: tuple[str, ...] = ()
    ready_timeout: float | None = None
    diff: str | None = None  # router: unified diff of its config files (plan --diff)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "address": self.address,
            "kind": self.kind,
            "reasons": list(self.reasons),
            "changes": [c.to_dict() for c in self.changes],
        }
        for key in ("model", "container", "image", "spec", "ready_timeout", "diff"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        out["notes"] = list(self.notes)
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

    @property
    def summary(self) -> dict[str, Any]:
        counts = dict.fromkeys(KINDS, 0)
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
            "summary": self.summary,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        if not isinstance(data, dict) or data.get("format_version") != FORMAT_VERSION:
            raise PlanFileError(f"not an aigo-apply plan of format version {FORMAT_VERSION}")
        try:
            actions = tuple(
                Action(
                    a["address"],
                    a["kind"],
                    tuple(a["reasons"]),
                    tuple(Change(**c) for c in a.get("changes", [])),
                    a.get("model"),
                    a.get("container"),
                    a.get("image"),
                    a.get("spec"),
                    tuple(a.get("notes", [])),
                    a.get("ready_timeout"),
                    a.get("diff"),
                )
                for a in data["actions"]
            )
            blockers = tuple(
                Blocker(b["id"], b["message"], b["remediation"], b.get("address")) for b in data.get("blockers", [])
            )
            plan = cls(
                data["project"],
                data["config_file"],
                data["fingerprint"],
                actions,
                blockers,
                tuple(data.get("warnings", [])),
                tuple(data.get("gpu_ledger", [])),
                tuple(tuple(lane) for lane in data.get("lanes", [])),
            )
        except (KeyError, TypeError) as exc:
            raise PlanFileError(
                f"the plan file is damaged or edited by hand ({exc!r}); make a new one with `aigo-apply plan --out`"
            ) from None
        if any(a.kind not in KINDS for a in plan.actions):
            raise PlanFileError(
                "the plan file names an unknown action kind; make a new one with `aigo-apply plan --out`"
            )
        return plan


def save(plan: Plan, path: Path) -> None:
    path.write_text(json.dumps(plan.to_dict(), indent=2, sort_keys=False) + "\n", encoding="utf-8")


def load(path: Path) -> Plan:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise PlanFileError(f"{path}: cannot read the plan file: {exc}") from None
    return Plan.from_dict(data)
