"""The canary gate as planned: whether a replace can run its declared gate (the plan says so, and
why not). What the gate measures and decides while it runs is plan/canary_verdict.py, which only an
apply with a gate imports.

The gate needs both engines serving at once, so it runs only for a parallel replace; a replace that
recreates (the old engine stops first) cannot run it, and the plan says why. `apply --skip-canary`
plans every gate as skipped; `apply --require-canary` blocks a plan with a replace that runs none."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypedDict

from aigo_apply.desired.canary import CanarySettings


class GateDict(TypedDict):
    """A CanaryGate as the plan's JSON has it (an action's `canary`)."""

    settings: Mapping[str, object]  # desired/canary.CanarySettings.to_dict
    runs: bool
    why: str


@dataclass(frozen=True)
class CanaryGate:
    """A replace's gate as planned: its settings and whether it runs (and why not)."""

    settings: CanarySettings
    runs: bool
    why: str = ""  # when it does not run

    def to_dict(self) -> GateDict:
        return {"settings": self.settings.to_dict(), "runs": self.runs, "why": self.why}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> CanaryGate:
        settings = data["settings"]
        if not isinstance(settings, dict):  # plan_file.check_shape made it an object
            raise TypeError(f"canary settings {settings!r} are not an object")
        return cls(CanarySettings.from_dict(settings), bool(data["runs"]), str(data.get("why", "")))

    def __str__(self) -> str:
        if self.runs:
            return f"canary: {self.settings.describe()}"
        return f"canary does not run: {self.why}"


NOT_SERVING = "the old engine is not running, so there is nothing to compare with"


def gate_for(
    settings: CanarySettings | None,
    strategy: str,
    strategy_why: str,
    skip: bool,
    serving: bool = True,
    context_length: int | None = None,
) -> CanaryGate | None:
    """The gate of one replace: none when the model declares none. `serving`: the old engine runs
    (one that crashed or was stopped has no figures to compare with). `context_length`: the shorter
    of the old and the new engine's, which each request must fit."""
    if settings is None:
        return None
    if skip:
        return CanaryGate(settings, False, "apply --skip-canary moves the route without measuring")
    if not serving:
        return CanaryGate(settings, False, NOT_SERVING)
    need = settings.prompt_tokens + settings.max_tokens
    if context_length is not None and need > context_length:
        return CanaryGate(
            settings,
            False,
            f"its requests take {need} tokens (prompt_tokens {settings.prompt_tokens} + max_tokens "
            f"{settings.max_tokens}), more than context_length {context_length}: lower them in canary:",
        )
    if strategy != "parallel":
        return CanaryGate(
            settings,
            False,
            f"it needs the old engine serving beside the new one, and this replace recreates ({strategy_why})",
        )
    return CanaryGate(settings, True)
