"""How apply tells the user what it is doing: human lines (with live per-layer pull progress from
rich on a terminal), or JSON lines with `--output json`. The executor only calls `event()`; apply
and destroy also `show_plan()` and `say()` (app/apply.py's Console). Whatever they write passes
through secrets.redact (`_echo`): a secret value read by this run is shown as ***."""

from __future__ import annotations

import json
import sys
import threading
import time
from datetime import UTC, datetime
from typing import Any, TextIO

import click

from aigo_apply.apply.secrets import redact, redact_data
from aigo_apply.plan.text import plan_json, plan_text
from aigo_apply.plan.types import Plan


def _echo(message: str, err: bool = False) -> None:
    """click.echo, with every secret value this process has read replaced by ***."""
    click.echo(redact(message), err=err)


class JsonReporter:
    """One JSON object per line on stdout: {"event": ..., "time": ..., ...}."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stdout
        self._lock = threading.Lock()

    def event(self, kind: str, **fields: Any) -> None:
        record = {"event": kind, "time": datetime.now(UTC).isoformat(timespec="milliseconds"), **fields}
        with self._lock:
            self.stream.write(json.dumps(redact_data(record), ensure_ascii=False) + "\n")
            self.stream.flush()

    def show_plan(self, plan: Plan) -> None:
        self.event("plan", plan=json.loads(plan_json(plan)))

    def say(self, message: str, err: bool = False, head: str = "", colour: str | None = None) -> None:
        """Standard output holds only JSON lines; what a person must see goes to standard error."""
        if err:
            _echo(head + message, err=True)


class TextReporter:
    """Plain lines, prefixed with the resource address; pulls get rich progress bars on a TTY."""

    def __init__(self):
        self._lock = threading.Lock()
        self._pulls: dict[str, Any] = {}

    def event(self, kind: str, **fields: Any) -> None:
        handler = getattr(self, f"_on_{kind}", None)
        with self._lock:
            if handler:
                handler(**fields)
            elif "message" in fields:
                self._line(fields.get("address", ""), fields["message"])

    def show_plan(self, plan: Plan) -> None:
        _echo(plan_text(plan))
        if plan.has_changes:
            _echo("")

    def say(self, message: str, err: bool = False, head: str = "", colour: str | None = None) -> None:
        _echo((click.style(head, fg=colour, bold=True) if head else "") + message, err=err)

    def _line(self, address: str, message: str, colour: str | None = None) -> None:
        head = click.style(f"{address}: ", bold=True) if address else ""
        _echo(head + (click.style(message, fg=colour) if colour else message))

    def _on_step(self, address: str, message: str, outcome: str = "", **_: Any) -> None:
        colour = {"ok": "green", "failed": "red", "restored": "yellow"}.get(outcome)
        self._line(address, message, colour)

    def _on_waiting(self, address: str, elapsed: float, stage: str, log: str = "", **_: Any) -> None:
        tail = f"; engine log: {redact(log)[:160]}" if log else ""  # redacted before it is cut
        self._line(address, f"still waiting after {elapsed:.0f} s ({stage}){tail}")

    def _on_log_tail(self, address: str, lines: list[str], **_: Any) -> None:
        self._line(address, "last lines of the engine's log:")
        for line in lines:
            _echo(f"    | {line}")

    def _on_pull_start(self, address: str, image: str, **_: Any) -> None:
        if sys.stdout.isatty():
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

            progress = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), transient=True)
            progress.start()
            self._pulls[image] = {"progress": progress, "layers": {}, "start": time.monotonic()}
        else:
            self._pulls[image] = {"start": time.monotonic()}
        self._line(address, f"pulling {image}")

    def _on_pull_progress(
        self, image: str, layer: str, status: str, current: int | None = None, total: int | None = None, **_: Any
    ) -> None:
        state = self._pulls.get(image)
        if not state or "progress" not in state:
            return
        progress, layers = state["progress"], state["layers"]
        if layer not in layers:
            layers[layer] = progress.add_task(f"{layer[:12]} {status}", total=total or None)
        progress.update(
            layers[layer], description=f"{layer[:12]} {status}", completed=current or 0, total=total or None
        )

    def _on_download_start(self, address: str, message: str, total: int | None = None, **_: Any) -> None:
        if sys.stdout.isatty() and total:
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

            progress = Progress(
                TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(), transient=True
            )
            progress.start()
            self._pulls[address] = {"progress": progress, "task": progress.add_task(address, total=total)}
        self._line(address, message)

    def _on_download_progress(self, address: str, done: int, total: int, **_: Any) -> None:
        state = self._pulls.get(address)
        if state:
            state["progress"].update(state["task"], completed=done, total=total)

    def _on_download_done(self, address: str, message: str, **_: Any) -> None:
        state = self._pulls.pop(address, {})
        if "progress" in state:
            state["progress"].stop()
        self._line(address, message, "green")

    def _on_pull_done(self, address: str, image: str, **_: Any) -> None:
        state = self._pulls.pop(image, {})
        if "progress" in state:
            state["progress"].stop()
        self._line(
            address, f"pulled {image} in {time.monotonic() - state.get('start', time.monotonic()):.1f} s", "green"
        )
