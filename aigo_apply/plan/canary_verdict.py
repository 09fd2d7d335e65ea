"""The canary gate's measurement, the pure part: the seeded request set, the figures of one engine's
run, the decision and the outputs that differ. platforms/docker/canary_run.py drives the engines with them; the
plan (plan/canary.py) needs none of it, so a plan does not define these records."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from aigo_apply.desired.canary import CanarySettings


def prompts(vocabulary: Sequence[int], count: int, length: int, seed: int) -> list[list[int]]:
    """`count` prompts of `length` token ids drawn from `vocabulary` (the model's own ordinary tokens)
    with `seed`: the same seed and vocabulary, the same requests, for the old and the new engine."""
    import random  # with hashlib and bisect: only a canary gate or bench draws prompts

    if not vocabulary:
        raise ValueError("no vocabulary to draw prompts from")
    pick = random.Random(seed)
    pool = sorted(set(vocabulary))
    return [[pool[pick.randrange(len(pool))] for _ in range(length)] for _ in range(count)]


@dataclass(frozen=True)
class Sample:
    """One measured request."""

    ok: bool
    seconds: float  # from sending to the last byte
    ttft: float | None = None  # to the first generated text
    tokens: int = 0  # generated, as the engine counted them
    error: str = ""
    text: str = ""


@dataclass
class Measurement:
    """One engine's run: its samples and the wall time its rounds took (they alternate with the
    other engine's, so both share whatever else loads the machine)."""

    engine: str  # "old" | "new"
    samples: list[Sample] = field(default_factory=list)
    wall_seconds: float = 0.0

    @property
    def errors(self) -> int:
        return sum(1 for s in self.samples if not s.ok)

    @property
    def tokens_per_second(self) -> float:
        tokens = sum(s.tokens for s in self.samples if s.ok)
        return tokens / self.wall_seconds if self.wall_seconds > 0 else 0.0

    def ttft(self, quantile: float) -> float | None:
        values = sorted(s.ttft for s in self.samples if s.ok and s.ttft is not None)
        if not values:
            return None
        return values[min(len(values) - 1, int(quantile * len(values)))]

    def first_error(self) -> str:
        return next((s.error for s in self.samples if not s.ok), "")

    def to_dict(self) -> MeasurementDict:
        return {
            "requests": len(self.samples),
            "errors": self.errors,
            "output_tokens_per_second": round(self.tokens_per_second, 2),
            "ttft_p50_seconds": _round(self.ttft(0.5)),
            "ttft_p95_seconds": _round(self.ttft(0.95)),
            "wall_seconds": round(self.wall_seconds, 3),
        }


class MeasurementDict(TypedDict):
    """A Measurement as the apply report, aigo.lock and bench have it."""

    requests: int
    errors: int
    output_tokens_per_second: float
    ttft_p50_seconds: float | None
    ttft_p95_seconds: float | None
    wall_seconds: float


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reason: str
    slowdown: float  # the fraction of the old engine's tokens/s the new one lost (negative: faster)


def decide(old: Measurement, new: Measurement, max_slowdown: float) -> Verdict:
    """The route moves only when the new engine answered every request and its output tokens per
    second are within max_slowdown of the old one's."""
    before, after = old.tokens_per_second, new.tokens_per_second
    slowdown = (before - after) / before if before > 0 else 0.0
    if old.errors and new.errors:
        return Verdict(
            False,
            f"the gate's requests failed on both engines (old {old.errors}, new {new.errors} of {len(new.samples)}: "
            f"{new.first_error()}): the measurement compares nothing; fix the gate's settings or apply with "
            "--skip-canary",
            slowdown,
        )
    if old.errors:
        return Verdict(
            False,
            f"the old engine failed {old.errors} of {len(old.samples)} requests ({old.first_error()}), so its "
            "figures compare nothing; apply with --skip-canary to move the route without the gate",
            slowdown,
        )
    if new.errors:
        return Verdict(
            False, f"the new engine failed {new.errors} of {len(new.samples)} requests ({new.first_error()})", slowdown
        )
    if before <= 0:
        return Verdict(False, f"the old engine made no tokens to compare with ({old.first_error() or 'none'})", 0.0)
    if slowdown > max_slowdown + 1e-9:
        return Verdict(
            False,
            f"the new engine makes {after:.1f} output tokens/s against the old one's {before:.1f}: "
            f"{slowdown:.0%} slower, more than max_slowdown {max_slowdown:g}",
            slowdown,
        )
    change = f"{-slowdown:.0%} faster" if slowdown < 0 else f"{slowdown:.0%} slower"
    return Verdict(
        True, f"{after:.1f} against {before:.1f} output tokens/s ({change}; max_slowdown {max_slowdown:g})", slowdown
    )


@dataclass(frozen=True)
class OutputDifference:
    prompt: int  # which of the compared prompts
    old: str
    new: str


def differences(old: Sequence[str], new: Sequence[str]) -> list[OutputDifference]:
    """The compared prompts whose greedy outputs differ."""
    return [OutputDifference(i, a, b) for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b]


@dataclass
class CanaryResult:
    """What the gate measured and decided, for the apply report (text and JSON) and aigo.lock."""

    alias: str
    settings: CanarySettings
    old: Measurement
    new: Measurement
    verdict: Verdict
    compared: int = 0
    compare_failed: int = 0  # compared prompts that failed on one engine or both (not counted as differences)
    output_differences: list[OutputDifference] = field(default_factory=list)
    measured_at: str = ""  # UTC, ISO 8601: when the measurement ended

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "model": self.alias,
            "measured_at": self.measured_at,
            "passed": self.verdict.passed,
            "reason": self.verdict.reason,
            "slowdown": round(self.verdict.slowdown, 4),
            "settings": self.settings.to_dict(),
            "old": self.old.to_dict(),
            "new": self.new.to_dict(),
        }
        if self.settings.compare_output:
            out["outputs_compared"] = self.compared
            out["outputs_not_compared"] = self.compare_failed
            out["output_differences"] = [
                {"prompt": d.prompt, "old": d.old, "new": d.new} for d in self.output_differences
            ]
        return out
