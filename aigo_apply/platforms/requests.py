"""The requests the platforms take (platforms/platform.py): apply's and destroy's, and logs'. Each command
asks for a frozen keyword-only value: a click command parses its options into one, hands it with a
view (platforms/views.py) to its one use case, and returns the exit code the use case gives. A request
that only its own use case takes is defined beside it (app/show.py's PlanCommand and StatusRequest,
app/checking.py's, app/store.py's, ...), so a command defines only the records it runs with (each
frozen dataclass costs about a millisecond to create at import). Nothing here is read from the
environment or the terminal; how to print and how to ask is the view's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class ApplyRequest:
    """apply and destroy (app/apply.py): what to converge and how carefully."""

    file: str | None = None
    planfile: Path | None = None  # apply PLANFILE: a saved plan, the approval
    yes: bool = False
    pull: str = "missing"
    lock_timeout: float = 0.0
    replace: tuple[str, ...] = ()
    target: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()  # readiness check ids the user chose to ignore
    locked: bool = False  # install exactly what aigo.lock records
    platform: str | None = None  # --platform; None: the file's own (Docker unless it says kubernetes)
    force_conflicts: bool = False  # Kubernetes: take over fields another field manager owns
    skip_canary: bool = False  # move every replace's route without its canary gate
    require_canary: bool = False  # refuse a replace that runs no canary gate
    project: str | None = None  # destroy --project NAME: on Docker, without a config file


@dataclass(frozen=True, kw_only=True)
class LogsRequest:
    """logs (app/logs.py): the output of these models' engines (and "router"); all when none."""

    names: tuple[str, ...] = ()
    follow: bool = False
    tail: int | None = None  # the last N lines of each; None: all
    since_s: float | None = None  # only lines of the last this many seconds
    failed: bool = False  # the log kept of each model's newest failed start, not the running engine's
    file: str | None = None
    platform: str | None = None
