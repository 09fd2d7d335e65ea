"""Rules for on-demand models and swap groups (config/swap_groups.py) that JSON Schema cannot say:
`swap_group` with `on_demand: false`, `max_awake` on a model that is not on demand, an engine without
a sleep mode aigo-apply drives, members of one group on different GPUs or stating different
`max_awake`. Like the other rules, each skips what failed the schema."""

from __future__ import annotations

from aigo_apply.config.engine_choice import engine_of
from aigo_apply.config.engine_kinds import ENGINES
from aigo_apply.config.finder import Finder
from aigo_apply.config.swap_groups import group_of, is_on_demand
from aigo_apply.json_types import JsonMap, JsonObject

# engine -> the sentence that refuses on-demand (sleep) on it (config/engine_kinds.py)
ENGINE_REASONS = {name: kind.sleep_refusal for name, kind in ENGINES.items() if kind.sleep_refusal}


def check(data: JsonMap, models: JsonMap, f: Finder) -> None:
    defaults = data.get("defaults")
    groups: dict[str, list[tuple[str, JsonObject]]] = {}
    for alias, model in models.items():
        if not isinstance(model, dict):
            continue
        if model.get("on_demand") is False and "swap_group" in model:
            f.at_key(
                ("models", alias, "swap_group"),
                "a swap_group makes the model on demand, but on_demand is false; remove one of them",
            )
            continue
        if "max_awake" in model and not is_on_demand(model):
            f.at_key(
                ("models", alias, "max_awake"),
                "max_awake counts the awake models of a swap group, and this model is in none; "
                "set on_demand: true or a swap_group, or remove max_awake",
            )
        if not is_on_demand(model):
            continue
        engine = engine_of(model, defaults)
        if engine in ENGINE_REASONS:
            key = "swap_group" if "swap_group" in model else "on_demand"
            f.at_key(("models", alias, key), ENGINE_REASONS[engine])
            continue
        if "port" in model:
            f.at_key(
                ("models", alias, "port"),
                "an on-demand model's engine runs with its development endpoints on (the router sleeps and wakes "
                "it), and a port would open them to every account on this machine with no key; remove port: the "
                "engine serves on a Unix socket only the router reaches",
            )
        if model.get("enabled") is not False:
            groups.setdefault(group_of(model) or "", []).append((alias, model))
    for name, members in groups.items():
        _agree(name, members, f)


def _agree(name: str, members: list[tuple[str, JsonObject]], f: Finder) -> None:
    """The models of one group run on the same GPUs and state the same max_awake (or none)."""
    first_alias, first = members[0]
    gpus = _gpus(first)
    stated = [(a, m["max_awake"]) for a, m in members if isinstance(m.get("max_awake"), int)]
    for alias, model in members[1:]:
        if _gpus(model) != gpus:
            f.at_key(
                ("models", alias, "gpus") if "gpus" in model else ("models", alias),
                f"the models of swap group '{name}' take turns on the same GPUs, but '{alias}' has gpus "
                f"{_show(model)} and '{first_alias}' has {_show(first)}; give them the same gpus, or put them in "
                "different swap groups",
            )
    for alias, value in stated[1:]:
        if value != stated[0][1]:
            f.at_value(
                ("models", alias, "max_awake"),
                f"swap group '{name}' has max_awake {stated[0][1]} at model '{stated[0][0]}'; "
                "its models must state the same max_awake (or leave it to one of them)",
            )


def _gpus(model: JsonMap) -> object:
    """The model's GPUs to compare: a list of indices sorted and without repeats, else as written."""
    gpus = model.get("gpus", "all")
    if isinstance(gpus, list):
        indices = [g for g in gpus if isinstance(g, int)]
        if len(indices) == len(gpus):
            return sorted(set(indices))
    return gpus


def _show(model: JsonMap) -> str:
    gpus = _gpus(model)
    return str(gpus) if isinstance(gpus, list) else str(gpus)
