"""Plan-time readiness check of every secret reference the file makes: each one is resolved on
this host (bounded, never blocking; see secrets.py) and the value thrown away, so that a missing,
unsafe or malformed secret is a plan blocker, shown before anything is changed, rather than a
failure halfway through an apply. Apply resolves them again when it creates the containers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

from aigo_apply.desired.types import DesiredState, SecretRef
from aigo_apply.errors import SecretUnavailable
from aigo_apply.plan.host_checks import Check
from aigo_apply.platforms.secrets import env_value, resolve

CHECK_ID = "secrets.reference"


def reference_checks(
    desired: DesiredState,
    target: frozenset[str] = frozenset(),
    aliases: frozenset[str] | None = None,
    router: bool = True,
) -> list[Check]:
    """One blocking check per environment entry or router key reference that fails: of the models
    in `aliases` (every model when None; models outside `target`, when one is given, are not checked:
    apply will not touch them), and of the router's keys when `router`."""
    checks = []
    for where, resolve_one in _entries(desired, target, aliases, router):
        try:
            resolve_one()
        except SecretUnavailable as exc:
            checks.append(Check(CHECK_ID, "blocking", exc.problem, exc.fix or f"fix {where}"))
    return checks


def _entries(
    desired: DesiredState, target: frozenset[str], aliases: frozenset[str] | None, router: bool
) -> Iterator[tuple[str, Callable[[], str]]]:
    """(field, a call that resolves and checks it) for each env entry and the router's keys."""
    for alias, model in sorted(desired.models.items()):
        if (target and alias not in target) or (aliases is not None and alias not in aliases):
            continue
        for name, value in model.container.env:
            where = f"models.{alias}.env.{name}"
            yield where, partial(env_value, name, value, where)
    keys = desired.router.spec.get("api_keys")
    if router and isinstance(keys, dict) and len(keys) == 1:
        ref = SecretRef(*next(iter(keys.items())))
        yield "router.api_keys", partial(resolve, ref, "router.api_keys", multiline=True)
