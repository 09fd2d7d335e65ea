"""Swap groups: which on-demand models take turns on the same GPUs. Read from the file's
data alone (tolerant of data that failed the schema), so validation, the desired state, the GPU
ledger and the router agree on the same groups.

A model is on demand with `on_demand: true` or a `swap_group: NAME`. Its group is NAME, else one
named after its `gpus` (`gpus-all`, `gpus-0-1`, `gpus-none`): on-demand models with the same GPUs
take turns. At most `max_awake` models of a group (default 1) are awake at once; the others sleep
(vLLM sleep level 1: weights in host memory, KV cache dropped) until a request names them. The
members keep the file's order; the first `max_awake` are the ones awake after an apply.
Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypedDict

from aigo_apply.config.engine_kinds import ENGINES

DEFAULT_MAX_AWAKE = 1
MAX_AWAKE_LIMIT = 16
GROUP_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")


class SwapGroupRecord(TypedDict):
    """A swap group as a router spec and a saved plan write it."""

    name: str
    max_awake: int
    members: list[str]


@dataclass(frozen=True, order=True)
class SwapGroup:
    """One swap group: its name, how many of its models may be awake at once, and its members in
    the file's order (the first `max_awake` are awake after an apply)."""

    name: str
    max_awake: int
    members: tuple[str, ...]

    @property
    def first(self) -> tuple[str, ...]:
        """The members an apply leaves awake."""
        return self.members[: self.max_awake]

    def to_dict(self) -> SwapGroupRecord:
        return {"name": self.name, "max_awake": self.max_awake, "members": list(self.members)}

    @classmethod
    def from_dict(cls, data: object) -> SwapGroup | None:
        """Read back from a router spec (a saved plan's, or one written by this tool); None when damaged."""
        if not isinstance(data, Mapping):
            return None
        try:
            name, awake, members = str(data["name"]), data["max_awake"], data["members"]
        except (KeyError, TypeError, ValueError):
            return None
        if not isinstance(members, Iterable):
            return None
        group = cls(name, awake, tuple(members))
        if not GROUP_NAME.fullmatch(group.name) or type(group.max_awake) is not int:
            return None
        if not all(isinstance(m, str) for m in group.members):
            return None
        return group


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, dict) else {}


def is_on_demand(model: object) -> bool:
    entry = _mapping(model)
    return entry.get("on_demand") is True or (
        isinstance(entry.get("swap_group"), str) and entry.get("on_demand") is not False
    )


def sleep_key(model: object, defaults: object, engine: str, on_socket: bool) -> str | None:
    """The spec key that starts a model's engine with vLLM's sleep mode: `on_demand` for a swap group's
    member (the router sleeps and wakes it), `sleep_mode` for a vLLM model on a GPU and its socket with
    `update: sleep` (a replace puts it to sleep, plan/replace_strategy.py); None for the others."""
    entry, common = _mapping(model), _mapping(defaults)
    if is_on_demand(entry):
        return "on_demand"
    kind = ENGINES.get(engine)
    sleeps = kind is not None and kind.sleeps and on_socket and entry.get("gpus", "all") != "none"
    return "sleep_mode" if sleeps and entry.get("update", common.get("update")) == "sleep" else None


def implicit_name(gpus: object) -> str:
    """The group of on-demand models that name no swap_group: one per GPU set."""
    if gpus == "all" or gpus is None:
        return "gpus-all"
    if gpus == "none":
        return "gpus-none"
    if isinstance(gpus, list) and all(isinstance(g, int) and not isinstance(g, bool) for g in gpus):
        return "gpus-" + "-".join(str(g) for g in sorted(set(gpus)))
    return "gpus-unknown"


def group_of(model: object) -> str | None:
    """The group an on-demand model belongs to, or None for a model that is not on demand."""
    if not is_on_demand(model):
        return None
    entry = _mapping(model)  # on demand: a mapping
    name = entry.get("swap_group")
    return name if isinstance(name, str) else implicit_name(entry.get("gpus", "all"))


def swap_groups(models: object) -> tuple[SwapGroup, ...]:
    """Every group of the file's enabled on-demand models, by name. A group's max_awake is the one
    its members state (the rules refuse members that disagree; here the largest wins), else 1."""
    members: dict[str, list[str]] = {}
    awake: dict[str, int] = {}
    for alias, model in _mapping(models).items():
        if not isinstance(model, dict) or model.get("enabled") is False:
            continue
        name = group_of(model)
        if name is None:
            continue
        members.setdefault(name, []).append(alias)
        value = model.get("max_awake")
        if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_AWAKE_LIMIT:
            awake[name] = max(awake.get(name, 0), value)
    return tuple(SwapGroup(n, awake.get(n, DEFAULT_MAX_AWAKE), tuple(m)) for n, m in sorted(members.items()))


def membership(groups: tuple[SwapGroup, ...]) -> dict[str, SwapGroup]:
    """alias -> its group."""
    return {alias: g for g in groups for alias in g.members}


def awake_sum(members: list[str], fractions: dict[str, float], groups: dict[str, SwapGroup]) -> float:
    """What the memory fractions of `members` (the models on one GPU) add up to when each swap
    group counts only its `max_awake` largest fractions: the others sleep, holding no KV cache and
    no weights on the GPU."""
    total = 0.0
    by_group: dict[str, list[float]] = {}
    for alias in members:
        group = groups.get(alias)
        if group is None:
            total += fractions[alias]
        else:
            by_group.setdefault(group.name, []).append(fractions[alias])
    for name, values in by_group.items():
        limit = next(g.max_awake for g in groups.values() if g.name == name)
        total += sum(sorted(values, reverse=True)[:limit])
    return total
