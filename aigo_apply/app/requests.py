"""What each command asks for, as a frozen keyword-only value: a click command parses its options
into one of these, hands it with a view (app/views.py) to its one use case, and returns the exit
code the use case gives. Nothing here is read from the environment or the terminal; how to print
and how to ask is the view's."""

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
class PlanCommand:
    """plan (app/show_plan.py)."""

    file: str | None = None
    show_diff: bool = False
    out: Path | None = None
    detailed_exitcode: bool = False
    replace: tuple[str, ...] = ()
    target: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    platform: str | None = None
    skip_canary: bool = False
    require_canary: bool = False


@dataclass(frozen=True, kw_only=True)
class ValidateRequest:
    """validate (app/validating.py): each file once, in the order given."""

    files: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class ReadinessRequest:
    """readiness (app/readiness.py)."""

    file: str | None = None
    engine: str = "vllm"


@dataclass(frozen=True, kw_only=True)
class StatusRequest:
    """status (app/status.py)."""

    file: str | None = None
    platform: str | None = None


@dataclass(frozen=True, kw_only=True)
class LogsRequest:
    """logs (app/logs.py): the output of these models' engines (and "router"); all when none."""

    names: tuple[str, ...] = ()
    follow: bool = False
    tail: int | None = None  # the last N lines of each; None: all
    since_s: float | None = None  # only lines of the last this many seconds
    file: str | None = None
    platform: str | None = None


@dataclass(frozen=True, kw_only=True)
class BenchRequest:
    """bench (app/bench.py): measure these models' engines (every enabled one when empty)."""

    aliases: tuple[str, ...] = ()
    file: str | None = None
    platform: str | None = None


@dataclass(frozen=True, kw_only=True)
class TopRequest:
    """top (app/top.py): a live view every `interval` seconds, or one view of two reads that far apart."""

    once: bool = False
    interval: float = 2.0
    file: str | None = None
    platform: str | None = None


@dataclass(frozen=True, kw_only=True)
class WatchRequest:
    """watch (app/watch.py)."""

    file: str | None = None


@dataclass(frozen=True, kw_only=True)
class RenderRequest:
    """render (app/render.py): a `docker run` line of one container, or Kubernetes objects."""

    alias: str | None = None
    file: str | None = None
    form: str = "docker-run"


@dataclass(frozen=True, kw_only=True)
class ImageRequest:
    """image inspect and image pull (app/images.py)."""

    engine: str
    file: str | None = None


@dataclass(frozen=True, kw_only=True)
class ModelsRequest:
    """models pull and models list (app/models.py)."""

    file: str | None = None
    aliases: tuple[str, ...] = ()
