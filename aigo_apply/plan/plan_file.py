"""The plan file's contract: its format version, the closed sets of action kinds and change effects,
the ids of the readiness checks a saved plan's request may waive, and the whole shape a saved plan (a
file from a repository nobody may have reviewed) must have before `Plan.from_dict` uses any of its
values. Pure."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal, TypeGuard, get_args

from aigo_apply.config.engine_kinds import ENGINES
from aigo_apply.config.names import ALIAS_RE
from aigo_apply.errors import PlanFileError
from aigo_apply.plan.facts import PULL_POLICIES
from aigo_apply.resources import schema_data

FORMAT_VERSION = 1
ActionKind = Literal["pull", "download", "create", "recreate", "start", "remove", "reload_router", "noop"]
Effect = Literal["recreate", "router", "none", "create", "remove"]
KINDS: tuple[ActionKind, ...] = get_args(ActionKind)
EFFECTS: tuple[Effect, ...] = get_args(Effect)
REMAKE = "make a new one with `aigo-apply plan --out` (nothing was changed)"
# A shape (_mismatch reads it): an object's keys (`key?`: optional) and their shapes, a list of one shape, one of
# a closed set of strings, or the name of a scalar test (_SCALARS).
Shape = dict[str, "Shape"] | list["Shape"] | tuple[str, ...] | str

# A plan file may come from a repository nobody reviewed: app/apply.read_plan reads it bounded and strict,
# and from_dict checks its depth and whole shape here before any value is used. Unknown keys are refused:
# this tool writes every plan file, and FORMAT_VERSION changes with its shape.
MAX_DEPTH = 32
# The ids of the readiness checks (plan/host_checks.py, port_checks.py, gpu_ledger.py, platforms/docker/secret_checks.py,
# platforms/router_keys.py and platforms/docker/planning.py make them): the only ones --ignore-readiness and a saved
# plan's request accept. tests/unit/cli/test_plan_file_hostile_cli.py keeps this list equal to the code's.
READINESS_CHECK_IDS = (
    "docker.engine", "docker.gpu_runtime", "nvidia.gpus", *dict.fromkeys(k.driver_check for k in ENGINES.values()),
    "nvidia.gpu_index", "gpu.fit", "gpu.memory", "gpu.parallel", "host.memory", "host.port", "engine.moe_backend",
    "model.path", "model.store", "secrets.reference", "router.api_keys", "router.open", "router.on_demand_open",
    "router.port", "lock.image", "lock.drift", "adapter.files", "adapter.base",
)  # fmt: skip
_CHANGE: Shape = {
    "path": "line", "before": "any", "after": "any", "effect": EFFECTS
}  # fmt: skip
_ACTION: Shape = {
    "address": "line", "kind": KINDS, "reasons": ["text"], "changes?": [_CHANGE], "model?": "line",
    "container?": "line", "image?": "line", "spec?": "object", "ready_timeout?": "seconds", "diff?": "text",
    "notes?": ["text"], "strategy?": {"name": ("parallel", "recreate", "sleep"), "why": "text"}, "slot?": ("b",),
    "canary?": {"settings": {
        "max_slowdown": "fraction", "requests": "number", "concurrency": "number", "prompt_tokens": "number",
        "max_tokens": "number", "compare_output": "bool", "seed": "number",
    }, "runs": "bool", "why": "text"},
    "expected_downtime_s?": "seconds", "downtime?": "text",
}  # fmt: skip
_BLOCKER: Shape = {"id": "line", "address?": "line", "message": "text", "remediation": "text"}
_SWAP_GROUP: Shape = {
    "name": "line", "max_awake": "count", "members": ["alias"], "gpus": "any", "awake_after_apply": ["alias"]
}  # fmt: skip
_REQUEST: Shape = {
    "replace": ["alias"], "target": ["alias"], "ignore": ["check_id"], "pull": PULL_POLICIES, "locked": "bool",
    "skip_canary?": "bool", "require_canary?": "bool",
}  # fmt: skip
_PLAN: Shape = {
    "format_version": "version", "aigo_apply_version?": "line", "project": "project", "config_file": "path",
    "fingerprint": "fingerprint", "actions": [_ACTION], "blockers?": [_BLOCKER], "warnings?": ["text"],
    "gpu_ledger?": ["object"], "lanes?": [["line"]], "request": _REQUEST, "summary?": "object",
    "swap_groups?": [_SWAP_GROUP],
}  # fmt: skip


def _real(value: object) -> TypeGuard[int | float]:
    """An int or a float, never a bool (nor another subclass)."""
    return type(value) in (int, float)


def _matching(pattern: str) -> Callable[[object], bool]:
    compiled = re.compile(pattern)
    return lambda v: isinstance(v, str) and compiled.fullmatch(v) is not None


_SCALARS: dict[str, tuple[str, Callable[[object], bool]]] = {
    "any": ("any JSON value", lambda v: True),
    "object": ("an object", lambda v: isinstance(v, dict)),
    "bool": ("true or false", lambda v: isinstance(v, bool)),
    "version": (f"the integer {FORMAT_VERSION}", lambda v: type(v) is int and v == FORMAT_VERSION),
    "seconds": ("a number of seconds", lambda v: _real(v) and 0 <= v <= 1e9),
    "fraction": ("a number from 0 to 1", lambda v: _real(v) and 0 <= v < 1),
    "number": ("a whole number", lambda v: type(v) is int and 0 <= v <= 2**32),
    "count": ("an integer from 1 to 16", lambda v: type(v) is int and 1 <= v <= 16),
    "text": ("a string", lambda v: isinstance(v, str)),
    "line": ("one line of printable text", lambda v: isinstance(v, str) and len(v) <= 4096 and v.isprintable()),
    "path": ("a file path", lambda v: isinstance(v, str) and 0 < len(v) <= 4096 and v.isprintable()),
    "project": ("a project name", _matching(schema_data("aigo.schema.json")["properties"]["project"]["pattern"])),
    "fingerprint": ("sha256: and 64 hex digits", _matching(r"sha256:[0-9a-f]{64}")),
    "alias": ("a model's alias", _matching(ALIAS_RE.pattern)),
    "check_id": (f"a readiness check id ({', '.join(READINESS_CHECK_IDS)})", lambda v: v in READINESS_CHECK_IDS),
}


def check_shape(data: object) -> None:
    """Raise PlanFileError naming the first place (`actions[2].kind`) where `data` is not a plan."""
    if _depth(data) > MAX_DEPTH:
        raise PlanFileError(f"the plan nests deeper than {MAX_DEPTH} levels (a plan needs about 8); {REMAKE}")
    problem = _mismatch(data, _PLAN, "")
    if problem:
        raise PlanFileError(f"the plan file is damaged or was edited by hand: {problem}; {REMAKE}")


def _mismatch(value: object, shape: Shape, where: str) -> str | None:
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


def _kind(value: object) -> str:
    if isinstance(value, str):
        return f"the string {value[:40]!r}" + ("..." if len(value) > 40 else "")
    name = {bool: "a boolean", int: "an integer", float: "a number", list: "a list", dict: "an object"}
    small = _real(value) and abs(value) < 1e40
    return f"{name[type(value)]} {value!r}" if small else name.get(type(value), "null")


def _depth(data: object) -> int:
    """How deeply lists and objects nest in `data` (without recursion: it may be very deep)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            deepest = max(deepest, depth)
            if depth <= MAX_DEPTH:
                stack += [(v, depth + 1) for v in (value.values() if isinstance(value, dict) else value)]
    return deepest
