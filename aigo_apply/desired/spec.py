"""The canonical specs as typed records: what desired/build.py makes of a model's and the router's entry,
and what the labels store, the planner compares and the engine renderers read.

They stay plain dicts at run time (TypedDicts): a spec is hashed and written to a label as JSON, so its
shape is its contract; the types only let the checker hold every reader to it. Keys that a spec has only
when set (`socket` or `port`, `on_demand`, one engine's settings block, `adapters`) are NotRequired, so
that the spec of a model that does not set them stays what it was (a new key would recreate every engine).
A spec read back from a label or a saved plan is outside data (json_types.JsonObject) until it is
compared; only a spec this tool built is one of these.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NotRequired, TypedDict, TypeGuard, get_args

from aigo_apply.config.document import Engine, Gpus, LlamaCppSettings, ModelSource, SglangSettings
from aigo_apply.config.engine_kinds import DEFAULT_ENGINE, ENGINES
from aigo_apply.config.vllm_flags import VllmSettings

SourceSpec = ModelSource  # a model's (or adapter's) source: {repo, revision[, file]} or {path}, as the file's


class LogSettings(TypedDict):
    """A container's log rotation (desired/logs.log_settings): Docker's json-file driver."""

    max_files: int
    max_size: str


class AdapterSpec(TypedDict):
    """A LoRA adapter of a model: where it comes from and the host folder its engine mounts."""

    source: SourceSpec
    adapter_dir: str


EnvSpec = dict[str, str | dict[str, str]]  # a value, or a secret by reference ({from_env: NAME} | {from_file: PATH})

# One model's canonical spec (desired/build.model_spec); "llama.cpp" is not a name, hence this form.
ModelSpec = TypedDict(
    "ModelSpec",
    {
        "engine": Engine,
        "image": str,
        "source": SourceSpec,
        "model_dir": NotRequired[str],  # always on Docker; a cluster's form has none for a repo (kube/specs.py)
        "model_file": NotRequired[str],
        "context_length": int,
        "gpus": Gpus,
        "port": NotRequired[int],
        "socket": NotRequired[str],
        "on_demand": NotRequired[bool],
        "sleep_mode": NotRequired[bool],
        "vllm": NotRequired[VllmSettings],
        "sglang": NotRequired[SglangSettings],
        "llama.cpp": NotRequired[LlamaCppSettings],
        "adapters": NotRequired[dict[str, AdapterSpec]],
        "env": EnvSpec,
        "logs": NotRequired[LogSettings],  # always on Docker; none in a cluster's form (the kubelet rotates)
    },
)


# The router container's canonical spec (desired/build.router_spec); API keys only by reference. The keys
# marked Docker's are not in a cluster's form (kube/specs.py). This form keeps NotRequired at run time.
RouterSpec = TypedDict(  # noqa: UP013 (the class form loses NotRequired at run time, with postponed annotations)
    "RouterSpec",
    {
        "image": str,
        "bind": NotRequired[str],  # Docker's
        "port": int,
        "api_keys": dict[str, str] | None,
        "max_body_mb": int,
        "timeout": int,
        "metrics_without_key": NotRequired[bool],
        "hold_seconds": NotRequired[int],
        "stall_seconds": NotRequired[int],
        "config_dir": NotRequired[str],  # Docker's
        "sockets_dir": NotRequired[str],  # Docker's
        "user": NotRequired[str],  # Docker's
        "logs": NotRequired[LogSettings],  # Docker's
    },
)


# Each key's type, and whether a spec must have it.
_MODEL_KEYS: dict[str, tuple[type | tuple[type, ...], bool]] = {
    "engine": (str, True),
    "image": (str, True),
    "source": (dict, True),
    "model_dir": (str, False),
    "model_file": (str, False),
    "context_length": (int, True),
    "gpus": ((str, list), True),
    "port": (int, False),
    "socket": (str, False),
    "on_demand": (bool, False),
    "sleep_mode": (bool, False),
    **dict.fromkeys(ENGINES, (dict, False)),  # the settings block of each engine kind
    "adapters": (dict, False),
    "env": (dict, True),
    "logs": (dict, False),
}
_ROUTER_KEYS: dict[str, tuple[type | tuple[type, ...], bool]] = {
    "image": (str, True),
    "bind": (str, False),
    "port": (int, True),
    "api_keys": ((dict, type(None)), True),
    "max_body_mb": (int, True),
    "timeout": (int, True),
    "metrics_without_key": (bool, False),
    "hold_seconds": (int, False),
    "stall_seconds": (int, False),
    "config_dir": (str, False),
    "sockets_dir": (str, False),
    "user": (str, False),
    "logs": (dict, False),
}


def _has(value: Mapping[str, object], keys: dict[str, tuple[type | tuple[type, ...], bool]]) -> bool:
    """No key but `keys`, each required one there, and each of its type."""
    return set(value) <= set(keys) and all(
        isinstance(value[key], kind) if key in value else not required for key, (kind, required) in keys.items()
    )


# The records a model spec's blocks are held to: no key but theirs (their values are the schema's).
_BLOCKS: dict[str, frozenset[str]] = {
    "source": frozenset(SourceSpec.__annotations__),
    "logs": frozenset(LogSettings.__annotations__),
    # each engine kind's settings record, as ModelSpec names it
    **{name: frozenset(get_args(ModelSpec.__annotations__[name])[0].__annotations__) for name in ENGINES},
}


def is_model_spec(value: Mapping[str, object]) -> TypeGuard[ModelSpec]:
    """Whether `value` has a model spec's required keys, each of its type, and no key in a block that its
    record lacks: desired/build.py lays a spec's keys out in their one order (the plan's JSON shows them
    so) and then holds it to the record here."""
    if not _has(value, _MODEL_KEYS) or value.get("engine") not in ENGINES:
        return False
    blocks = ((key, value.get(key)) for key in _BLOCKS if key in value)
    return all(isinstance(block, dict) and set(block) <= _BLOCKS[key] for key, block in blocks)


def is_router_spec(value: Mapping[str, object]) -> TypeGuard[RouterSpec]:
    return _has(value, _ROUTER_KEYS)


def model_spec_of(value: Mapping[str, object], who: str) -> ModelSpec:
    """`value` as a ModelSpec, or the internal error that says which model's spec is not one."""
    if not is_model_spec(value):
        raise TypeError(f"{who}: the canonical spec lacks a key or a key's type: {sorted(value)}")
    return value


def engine_settings(spec: Mapping[str, object]) -> Mapping[str, object]:
    """The settings block of the engine a spec runs on (`vllm`, `sglang`, `llama.cpp`; {} when it has none).
    `spec` may be a recorded one (a label's, a replace's old one): read as outside data."""
    block = spec.get(str(spec.get("engine", DEFAULT_ENGINE)))
    return block if isinstance(block, dict) else {}


def gpu_indices(gpus: object) -> list[int]:
    """A spec's `gpus` when it is a list of indices ([] for "all", "none" or anything else)."""
    return [g for g in gpus if type(g) is int] if isinstance(gpus, list) else []


def router_spec_of(value: Mapping[str, object]) -> RouterSpec:
    """`value` as a RouterSpec, or the internal error that says it is not one."""
    if not is_router_spec(value):
        raise TypeError(f"the router's canonical spec lacks a key or a key's type: {sorted(value)}")
    return value
