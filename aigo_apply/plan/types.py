"""The plan as a value: ordered actions with reasons and field changes, blockers, the GPU lanes
models start in, and the fingerprint of what was observed. Its JSON form (`to_dict`) is the versioned contract; the text
view is rendered from it, and `plan --out` saves it for `apply PLANFILE`. `from_dict` reads a saved
one back and checks its whole shape first (`check_shape`): an edited plan file is a PlanFileError
that says where, never a traceback.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from aigo_apply import __version__, safe_write
from aigo_apply.config.engine_choice import ENGINE_NAMES
from aigo_apply.config.rules import ALIAS_RE
from aigo_apply.desired.types import canonical_json
from aigo_apply.errors import PlanFileError
from aigo_apply.plan.facts import PULL_POLICIES, PlanRequest
from aigo_apply.plan.lockfile import LockRestore
from aigo_apply.plan.replace_strategy import Strategy
from aigo_apply.resources import schema_data

FORMAT_VERSION = 1
# The closed set of what an action does, and of what a field change costs (DESIGN.md, "effect class"):
# every place that makes one is checked against these by the type checker, and a saved plan's by check_shape.
ActionKind = Literal["pull", "download", "create", "recreate", "start", "remove", "reload_router", "noop"]
Effect = Literal["recreate", "router", "none", "create", "remove"]
KINDS: tuple[ActionKind, ...] = get_args(ActionKind)
EFFECTS: tuple[Effect, ...] = get_args(Effect)
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
class DownloadSpec:
    """A download action's payload: one model folder from the Hub, and the models that need it."""

    repo: str
    revision: str
    file: str | None
    dest: str
    models: tuple[str, ...]
    commit: str | None = None  # what the Hub resolved the revision to
    bytes: int | None = None
    pin: str | None = None  # the commit aigo.lock records (apply --locked)

    def to_spec(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "repo": self.repo,
            "revision": self.revision,
            "file": self.file,
            "dest": self.dest,
            "models": list(self.models),
        }
        out.update(
            {k: v for k, v in (("commit", self.commit), ("bytes", self.bytes), ("pin", self.pin)) if v is not None}
        )
        return out

    @classmethod
    def from_spec(cls, data: Any) -> DownloadSpec:
        """Read back from a plan file; its values are checked again before the download runs
        (apply/fetch_steps.check_download), here only their types."""
        strings = ("repo", "revision", "dest")
        if (
            not isinstance(data, dict)
            or not all(isinstance(data.get(k), str) for k in strings)
            or not all(isinstance(data.get(k), (str, type(None))) for k in ("file", "commit", "pin"))
            or not isinstance(data.get("bytes"), (int, type(None)))
            or not isinstance(data.get("models"), list)
            or not all(isinstance(m, str) for m in data["models"])
        ):
            raise PlanFileError("a download's spec in the plan file is damaged or edited; make a new plan")
        return cls(
            data["repo"],
            data["revision"],
            data.get("file"),
            data["dest"],
            tuple(data["models"]),
            data.get("commit"),
            data.get("bytes"),
            data.get("pin"),
        )


@dataclass(frozen=True)
class Action:
    """One step of a plan. Its payload depends on its kind: `spec` (the desired canonical spec of a
    model or the router: start, create, recreate, noop), `download` (a model folder from the Hub) or
    `restore` (apply --locked: aigo.lock's image put back under its tag); the JSON has each as `spec`."""

    address: str  # model.<alias> | router | image.<ref> | download.<repo@rev> | container.<name>
    kind: ActionKind
    reasons: tuple[str, ...]
    changes: tuple[Change, ...] = ()
    model: str | None = None
    container: str | None = None
    image: str | None = None
    spec: dict[str, Any] | None = None  # desired canonical spec, for a model or the router
    notes: tuple[str, ...] = ()
    ready_timeout: float | None = None
    diff: str | None = None  # router: unified diff of its config files (plan --diff)
    download: DownloadSpec | None = None
    restore: LockRestore | None = None
    strategy: Strategy | None = None  # recreate of a model: parallel or recreate, and why (plan/replace_strategy.py)
    slot: str = "a"  # a model's engine: which of its two sockets it serves on once this action is done

    @property
    def is_router(self) -> bool:
        return self.address == "router"

    @property
    def is_container(self) -> bool:
        """An engine container: a model's, or a leftover one the plan removes."""
        return self.address.startswith(("model.", "container."))

    def payload(self) -> dict[str, Any] | None:
        """What the JSON's `spec` holds for this action."""
        if self.download is not None:
            return self.download.to_spec()
        if self.restore is not None:
            return self.restore.to_spec()
        return self.spec

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "address": self.address,
            "kind": self.kind,
            "reasons": list(self.reasons),
            "changes": [c.to_dict() for c in self.changes],
        }
        for key in ("model", "container", "image", "spec", "ready_timeout", "diff"):
            value = self.payload() if key == "spec" else getattr(self, key)
            if value is not None:
                out[key] = value
        if self.strategy is not None:
            out["strategy"] = self.strategy.to_dict()
        if self.slot != "a":
            out["slot"] = self.slot
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
    request: PlanRequest = field(default_factory=PlanRequest)  # the options it was made with
    swap_groups: tuple[dict[str, Any], ...] = ()  # on-demand models taking turns (plan/swap_ledger.plan_groups)

    def actions_digest(self) -> str:
        """What `apply PLANFILE` compares: a digest of the canonical actions, so a saved plan is an
        approval of exactly these actions and never an instruction read from the file."""
        text = canonical_json([a.to_dict() for a in self.actions])
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
    ):
        raise PlanFileError(
            "an action in the plan file is damaged or edited by hand; make a new one with `aigo-apply plan --out`"
        )
    kind, spec = a["kind"], a.get("spec")
    download = DownloadSpec.from_spec(spec) if kind == "download" else None
    restore = None
    if kind == "pull" and spec is not None:
        restore = LockRestore.from_spec(str(a.get("image")), spec)
        if restore is None:
            raise PlanFileError(
                f"{a['address']}: the plan's restore of aigo.lock's image is not valid (edited by hand?); "
                "make a new plan (nothing was changed)"
            )
    return Action(
        a["address"],
        kind,
        tuple(a["reasons"]),
        tuple(Change(**c) for c in a.get("changes") or []),
        a.get("model"),
        a.get("container"),
        a.get("image"),
        spec if download is None and restore is None else None,
        tuple(a.get("notes") or []),
        a.get("ready_timeout"),
        a.get("diff"),
        download,
        restore,
        Strategy(a["strategy"]["name"], a["strategy"]["why"]) if a.get("strategy") else None,
        a.get("slot", "a"),
    )


# --- the plan file: its shape, and writing it (`plan --out`) ----------------------------------------
# A plan file may come from a repository nobody reviewed: app/apply.read_plan reads it bounded and strict,
# and from_dict checks its depth and whole shape here before any value is used. Unknown keys are refused:
# this tool writes every plan file, and FORMAT_VERSION changes with its shape.
MAX_DEPTH = 32
REMAKE = "make a new one with `aigo-apply plan --out` (nothing was changed)"
# The ids of the readiness checks (plan/host_checks.py, gpu_ledger.py, apply/secret_checks.py,
# app/router_keys.py and app/planning.py make them): the only ones --ignore-readiness and a saved
# plan's request accept. tests/unit/test_plan_file_hostile_cli.py keeps this list equal to the code's.
READINESS_CHECK_IDS = (
    "docker.engine", "docker.gpu_runtime", "nvidia.gpus", "nvidia.driver",
    *(f"nvidia.driver.{engine}" for engine in ENGINE_NAMES if engine != "vllm"),
    "nvidia.gpu_index", "gpu.fit", "gpu.memory", "gpu.parallel", "host.memory", "engine.moe_backend", "model.path",
    "secrets.reference", "router.api_keys", "router.open", "router.on_demand_open", "router.port", "lock.image",
    "lock.drift",
)  # fmt: skip
_CHANGE = {
    "path": "line", "before": "any", "after": "any", "effect": EFFECTS
}  # fmt: skip
_ACTION = {
    "address": "line", "kind": KINDS, "reasons": ["text"], "changes?": [_CHANGE], "model?": "line",
    "container?": "line", "image?": "line", "spec?": "object", "ready_timeout?": "seconds", "diff?": "text",
    "notes?": ["text"], "strategy?": {"name": ("parallel", "recreate"), "why": "text"}, "slot?": ("b",),
}  # fmt: skip
_BLOCKER = {"id": "line", "address?": "line", "message": "text", "remediation": "text"}
_SWAP_GROUP = {
    "name": "line", "max_awake": "count", "members": ["alias"], "gpus": "any", "awake_after_apply": ["alias"]
}  # fmt: skip
_REQUEST = {"replace": ["alias"], "target": ["alias"], "ignore": ["check_id"], "pull": PULL_POLICIES, "locked": "bool"}
_PLAN = {
    "format_version": "version", "aigo_apply_version?": "line", "project": "project", "config_file": "path",
    "fingerprint": "fingerprint", "actions": [_ACTION], "blockers?": [_BLOCKER], "warnings?": ["text"],
    "gpu_ledger?": ["object"], "lanes?": [["line"]], "request": _REQUEST, "summary?": "object",
    "swap_groups?": [_SWAP_GROUP],
}  # fmt: skip


def _matching(pattern: str) -> Callable[[Any], bool]:
    compiled = re.compile(pattern)
    return lambda v: isinstance(v, str) and compiled.fullmatch(v) is not None


_SCALARS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "any": ("any JSON value", lambda v: True),
    "object": ("an object", lambda v: isinstance(v, dict)),
    "bool": ("true or false", lambda v: isinstance(v, bool)),
    "version": (f"the integer {FORMAT_VERSION}", lambda v: type(v) is int and v == FORMAT_VERSION),
    "seconds": ("a number of seconds", lambda v: type(v) in (int, float) and 0 <= v <= 1e9),
    "count": ("an integer from 1 to 16", lambda v: type(v) is int and 1 <= v <= 16),
    "text": ("a string", lambda v: isinstance(v, str)),
    "line": ("one line of printable text", lambda v: isinstance(v, str) and len(v) <= 4096 and v.isprintable()),
    "path": ("a file path", lambda v: isinstance(v, str) and 0 < len(v) <= 4096 and v.isprintable()),
    "project": ("a project name", _matching(schema_data("aigo.schema.json")["properties"]["project"]["pattern"])),
    "fingerprint": ("sha256: and 64 hex digits", _matching(r"sha256:[0-9a-f]{64}")),
    "alias": ("a model's alias", _matching(ALIAS_RE.pattern)),
    "check_id": (f"a readiness check id ({', '.join(READINESS_CHECK_IDS)})", lambda v: v in READINESS_CHECK_IDS),
}


def check_shape(data: Any) -> None:
    """Raise PlanFileError naming the first place (`actions[2].kind`) where `data` is not a plan."""
    if _depth(data) > MAX_DEPTH:
        raise PlanFileError(f"the plan nests deeper than {MAX_DEPTH} levels (a plan needs about 8); {REMAKE}")
    problem = _mismatch(data, _PLAN, "")
    if problem:
        raise PlanFileError(f"the plan file is damaged or was edited by hand: {problem}; {REMAKE}")


def _mismatch(value: Any, shape: Any, where: str) -> str | None:
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return f"{where or 'the document'} is {_kind(value)}, not an object"
        keys = {k.rstrip("?"): k for k in shape}
        unknown = sorted(set(value) - set(keys))
        if unknown:
            return f"{where or 'the document'} has a key this version never writes: {unknown[0][:64]!r}"
        for key, spec in keys.items():
            here = f"{where}.{key}" if where else key
            if value.get(key) is None and spec.endswith("?"):
                continue
            if key not in value:
                return f"{here} is missing"
            if problem := _mismatch(value[key], shape[spec], here):
                return problem
        return None
    if isinstance(shape, list):
        if not isinstance(value, list):
            return f"{where} is {_kind(value)}, not a list"
        return next((p for i, v in enumerate(value) if (p := _mismatch(v, shape[0], f"{where}[{i}]"))), None)
    if isinstance(shape, tuple):
        return None if isinstance(value, str) and value in shape else f"{where} is not one of {', '.join(shape)}"
    what, test = _SCALARS[shape]
    return None if test(value) else f"{where} is {_kind(value)}, not {what}"


def _kind(value: Any) -> str:
    if isinstance(value, str):
        return f"the string {value[:40]!r}" + ("..." if len(value) > 40 else "")
    name = {bool: "a boolean", int: "an integer", float: "a number", list: "a list", dict: "an object"}
    small = type(value) in (int, float) and abs(value) < 1e40
    return f"{name[type(value)]} {value!r}" if small else name.get(type(value), "null")


def _depth(data: Any) -> int:
    """How deeply lists and objects nest in `data` (without recursion: it may be very deep)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            deepest = max(deepest, depth)
            if depth <= MAX_DEPTH:
                stack += [(v, depth + 1) for v in (value.values() if isinstance(value, dict) else value)]
    return deepest


def save(plan: Plan, path: Path) -> None:
    """Write the plan file the one safe way (aigo_apply/safe_write.py)."""
    text = json.dumps(plan.to_dict(), indent=2) + "\n"
    safe_write.write(path, text, expect=safe_write.ANY, new_mode=0o644, error=PlanFileError, what="plan file")
