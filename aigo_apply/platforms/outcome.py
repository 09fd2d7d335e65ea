"""What carrying out a plan reports: one Outcome per step that changed something, the ApplyReport
of a whole run, StepLog, which writes each step to the journal and to the reporter at once, and
Reporter, what every executor needs of the reporter (cli/reporter.py: human lines or JSON lines)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from aigo_apply.json_types import JsonObject
from aigo_apply.platforms.journal import Journal


class Reporter(Protocol):
    """Progress as events: `step`, `log_tail`, `pull_start`, `pull_progress`, ... each with its fields."""

    def event(self, kind: str, **fields: object) -> None: ...


@dataclass
class Outcome:
    address: str
    kind: str
    ok: bool
    message: str
    restored: bool = False
    log_tail: list[str] = field(default_factory=list)
    canary: JsonObject | None = None  # a replace's canary gate: what it measured and decided


@dataclass
class ApplyReport:
    outcomes: list[Outcome]
    interrupted: bool

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.ok]


@dataclass
class StepLog:
    """Each step goes to the journal (for reading back a failed apply) and to the reporter (for the user)."""

    journal: Journal
    reporter: Reporter

    def step(self, address: str, step: str, outcome: str, message: str) -> None:
        self.journal.record(step, address, outcome or "begin", message=message)
        self.reporter.event("step", address=address, step=step, outcome=outcome, message=message)

    def failed(self, address: str, kind: str, message: str, tail: list[str]) -> Outcome:
        if tail:
            self.reporter.event("log_tail", address=address, lines=tail)
        self.step(address, kind, "failed", message)
        return Outcome(address, kind, False, message, log_tail=tail)
