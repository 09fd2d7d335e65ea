"""What carrying out a plan reports: one Outcome per step that changed something, the ApplyReport
of a whole run, and StepLog, which writes each step to the journal and to the reporter at once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aigo_apply.apply.journal import Journal


@dataclass
class Outcome:
    address: str
    kind: str
    ok: bool
    message: str
    restored: bool = False
    log_tail: list[str] = field(default_factory=list)


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
    reporter: Any

    def step(self, address: str, step: str, outcome: str, message: str) -> None:
        self.journal.record(step, address, outcome or "begin", message=message)
        self.reporter.event("step", address=address, step=step, outcome=outcome, message=message)

    def failed(self, address: str, kind: str, message: str, tail: list[str]) -> Outcome:
        if tail:
            self.reporter.event("log_tail", address=address, lines=tail)
        self.step(address, kind, "failed", message)
        return Outcome(address, kind, False, message, log_tail=tail)
