"""Rules for a model's LoRA adapters (`models.ALIAS.adapters`) that JSON Schema cannot say: each
adapter's alias is a safe name and no other model or adapter of the file answers to it (clients
send either as `model`, so one name must mean one thing), only vLLM serves them here, and the
adapter settings (`vllm.max_loras`, `vllm.max_lora_rank`) come with adapters; not yet for an
on-demand model (on a cluster, a local adapter folder follows the node-local rules of a local model:
config/kube_rules.local_paths). Like the other rules, each skips what failed the schema."""

from __future__ import annotations

from collections.abc import Mapping

from aigo_apply.config.doc_path import dotted
from aigo_apply.config.engine_choice import engine_of
from aigo_apply.config.engine_kinds import ENGINES
from aigo_apply.config.finder import Finder
from aigo_apply.config.names import ALIAS_RE
from aigo_apply.config.swap_groups import is_on_demand
from aigo_apply.config.yaml_source import Path_
from aigo_apply.json_types import JsonMap

ADAPTER_SETTINGS = ("max_loras", "max_lora_rank")
# engine -> the sentence that refuses adapters on it (config/engine_kinds.py)
ENGINE_REASONS = {name: kind.adapters_refusal for name, kind in ENGINES.items() if kind.adapters_refusal}
ON_DEMAND_REASON = (
    "an on-demand model cannot serve adapters yet: the router wakes a sleeping engine for its model's own "
    "alias only, so a request naming an adapter would reach it asleep; remove on_demand/swap_group or adapters"
)


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, dict) else {}


def adapters_of(model: object) -> Mapping[str, object]:
    """The model's adapters mapping (empty when it has none or it failed the schema)."""
    return _mapping(_mapping(model).get("adapters"))


def check(data: JsonMap, models: JsonMap, f: Finder) -> None:
    _names(models, f)
    for alias, model in models.items():
        if not isinstance(model, dict):
            continue
        adapters = adapters_of(model)
        engine = engine_of(model, data.get("defaults"))
        if "adapters" in model and engine in ENGINE_REASONS:
            f.at_key(("models", alias, "adapters"), ENGINE_REASONS[engine])
        elif adapters and is_on_demand(model):
            f.at_key(("models", alias, "adapters"), ON_DEMAND_REASON)
        settings = _mapping(model.get("vllm"))
        for key in ADAPTER_SETTINGS:
            if key in settings and not adapters and ENGINES[engine].adapters:
                f.at_key(
                    ("models", alias, "vllm", key),
                    f"{key} sizes the engine's room for LoRA adapters, and this model has none; "
                    "add adapters: or remove it",
                )


def _names(models: JsonMap, f: Finder) -> None:
    """Adapter aliases: safe, and unique (ignoring case) across every model and adapter of the file;
    a clash is reported at the adapter, naming the other place."""
    seen: dict[str, Path_] = {alias.lower(): ("models", alias) for alias in models if isinstance(alias, str)}
    for alias, model in models.items():
        for name in adapters_of(model):
            path: Path_ = ("models", alias, "adapters", name)
            if not isinstance(name, str) or not ALIAS_RE.match(name):
                f.at_key(
                    path,
                    f"adapter alias {name!r} is not a safe name: use 1-64 letters, digits, '.', '_' or '-', "
                    "starting with a letter or digit (clients send it as `model`)",
                )
                continue
            other = seen.get(name.lower())
            if other is not None:
                what = "model" if len(other) == 2 else "adapter"
                same = "is also" if other[-1] == name else f"differs only in case from '{other[-1]}',"
                f.at_key(
                    path,
                    f"adapter '{name}' {same} the alias of the {what} at {dotted(other)}; clients "
                    "send either as `model`, so every model and adapter needs a name of its own: rename one",
                )
                continue
            seen[name.lower()] = path
