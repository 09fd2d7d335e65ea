"""What a replace replaces: the engine as it runs before the change, read from the action itself (its
new spec with each changed top-level field as it was), for the steps that reach, route or restore the
old engine (platforms/docker/model_steps.py) and for a new router, which routes a model still served by its old
engine until that model's own step (platforms/docker/router_steps.py)."""

from __future__ import annotations

from aigo_apply.desired.types import EngineAddress, Route
from aigo_apply.plan.replace_strategy import BESIDE
from aigo_apply.plan.types import Action


def old_spec(action: Action) -> dict[str, object]:
    """The spec of the container a recreate replaces, as far as its address and route go: the new
    spec with each changed top-level field as it was (a field the old one did not have is absent)."""
    spec = dict(action.spec or {})
    for change in action.changes:
        if "." in change.path:
            continue
        if change.before is None:
            spec.pop(change.path, None)
        else:
            spec[change.path] = change.before
    return spec


def old_slot(action: Action) -> str:
    """The socket the replaced engine serves on: a parallel replace starts the new one on the other, and
    so does one that puts the old one to sleep (platforms/docker/sleep_replace.py)."""
    if action.strategy and action.strategy.name in BESIDE:
        return "a" if action.slot == "b" else "b"
    return action.slot


def old_route(action: Action) -> Route:
    """The route of the container a recreate replaces (its port or socket and length before the change)."""
    return Route.of(action.model or "", old_spec(action), old_slot(action))


def old_address(action: Action) -> EngineAddress:
    return EngineAddress.of(old_spec(action), old_slot(action))


def serving_route(action: Action) -> Route:
    """Where the engine a replace replaces serves now, whichever way it is replaced."""
    return Route.of(action.model or "", old_spec(action), old_slot(action))
