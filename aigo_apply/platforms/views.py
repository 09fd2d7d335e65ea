"""What the use cases print through: a view, one per output format (text, json, markdown, github),
chosen once by the command line (cli/views.py) and handed in, as Terraform's `views/` are. A use
case says what happened (a plan, a valid file, a readiness report); the view decides how it looks.
No use case asks which format it prints. Each Protocol here is what one use case needs of its view."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from aigo_apply.desired.images import ImageObject, LocalImage
from aigo_apply.errors import ConfigFileError, ConfigInvalid
from aigo_apply.json_types import JsonObject
from aigo_apply.plan.host_checks import Check
from aigo_apply.plan.ledger_rows import LedgerRow
from aigo_apply.plan.types import Plan

# `format_version` of every JSON document and JSON line aigo-apply prints with -o json (status, validate,
# readiness, models list, image inspect, top, bench, logs, apply's and destroy's lines), bumped for an
# output when its shape changes incompatibly. The plan's own is plan/plan_file.FORMAT_VERSION.
JSON_FORMAT_VERSION = 1


class Console(Protocol):
    """How apply, destroy and the pulls talk (cli/reporter.py: human lines, or JSON lines with -o json):
    the executors' events (so a Console is an platforms/outcome.Reporter, which a plan does not import),
    the plan and the sentences of the loop around them, and how to ask (`confirm`: None where there
    is no terminal to ask on)."""

    confirm: Callable[[str], bool] | None

    def event(self, kind: str, **fields: object) -> None: ...

    def show_plan(self, plan: Plan) -> None: ...
    def say(self, message: str, err: bool = False, head: str = "", colour: str | None = None) -> None: ...


class PlanView(Protocol):
    def plan(self, plan: Plan, show_diff: bool) -> None: ...
    def plan_saved(self, path: Path) -> None: ...


class ValidateView(Protocol):
    def valid(self, path: str, project: str, models: int) -> None: ...

    def invalid(self, error: ConfigInvalid, alone: bool) -> None:
        """A file that does not validate; `alone`: the only file asked about (text raises it then)."""

    def unreadable(self, error: ConfigFileError, alone: bool) -> None:
        """A file that cannot be read as a config at all."""


@dataclass(frozen=True)
class Readiness:
    """What `readiness` found: the image of the engine asked about, each check, the GPU ledger."""

    project: str
    engine: str
    image: ImageObject
    checks: tuple[Check, ...]
    gpu_ledger: list[LedgerRow]

    @property
    def blocked(self) -> bool:
        return any(c.status == "blocking" for c in self.checks)

    def to_dict(self) -> dict[str, object]:
        return {
            "project": self.project,
            "image": self.image,
            "checks": [c.to_dict() for c in self.checks],
            "gpu_ledger": self.gpu_ledger,
            "blocked": self.blocked,
        }


class ReadinessView(Protocol):
    def readiness(self, report: Readiness) -> None: ...


class LogsView(Protocol):
    def log_line(self, name: str, line: str, prefixed: bool) -> None:
        """One line an engine (or the router) printed; `prefixed`: several names share the output."""


class TopView(Protocol):
    def top(self, report: JsonObject, live: bool) -> None:
        """One view of `top`: {project, models: rows, gpus}; `live`: it replaces the view before."""


class BenchView(Protocol):
    def bench(self, report: JsonObject) -> None:
        """`bench`: {project, models: one row per model, its figures or why it has none}."""


class StatusView(Protocol):
    def status(self, report: JsonObject, text: Callable[[JsonObject], str]) -> None:
        """`text`: the platform's one-screen rendering of `report` (Docker's and a cluster's differ)."""


class StoreView(Protocol):
    """image inspect and models list."""

    def image(self, info: LocalImage) -> None: ...
    def stored_models(self, rows: list[JsonObject]) -> None: ...


class AddView(Protocol):
    def added(self, report: JsonObject, entry: str) -> None:
        """`add`: the proposal (app/add_model.Added.to_dict: the entry, why each setting, the notes,
        whether it was written) and the entry as YAML with its comments."""


class DocumentView(Protocol):
    """render and watch: text that is the same in every format (a `docker run` line, YAML, a log line)."""

    def document(self, text: str) -> None: ...
