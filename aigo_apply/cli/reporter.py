"""How apply tells the user what it is doing: human lines (with live per-layer pull progress from
rich on a terminal), or JSON lines with `--output json`. The executor only calls `event()`; apply
and destroy also `show_plan()` and `say()` (app/apply.py's Console). Whatever they write passes
through secrets.redact (`echo`): a secret value read by this run is shown as ***. Text that came
from outside (names, engine logs, a saved plan) is shown with every control and format character
escaped (plan.text.printable): a terminal is never sent an escape sequence, BEL, CR or bidi override
it did not get from this program's own colours; JSON lines carry them as \\u escapes."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TextIO, TypedDict

import click

from aigo_apply.cli.ci_output import lossless
from aigo_apply.config.machine_text import json_text
from aigo_apply.json_types import JsonObject, JsonValue
from aigo_apply.plan.text import plan_json, plan_text, printable
from aigo_apply.plan.types import Plan
from aigo_apply.platforms.secrets import redact, redact_data
from aigo_apply.platforms.views import JSON_FORMAT_VERSION

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


def echo(message: str, err: bool = False, colours: bool = True) -> None:
    """click.echo, with every secret value this process has read replaced by ***, and nothing a
    terminal would act on but (`colours`) this program's own colour codes: callers escape what they
    insert before they colour it (`_plain`)."""
    click.echo(printable(redact(message), colours=colours), err=err)


_echo = echo


def _plain(text: object, keep: str = "") -> str:
    """A value from outside (a name, a log line) as one line of text, before it is coloured."""
    return printable(str(text), keep=keep)


def _one_line(message: str) -> str:
    """A message said to the user as one line (a line break in it, from a name or an error from
    outside, escaped), after the blank lines it begins with, which are the caller's own."""
    body = message.lstrip("\n")
    return message[: len(message) - len(body)] + _plain(body, "\t")


def json_line(record: object, stream: TextIO | None = None) -> str:
    """One JSON line that a terminal can show safely and a CI runner reads no command in: what
    json.dumps leaves raw (C1 controls, bidi and other format characters, lone surrogates) and the `[`
    of `##[` written as \\u escapes, which JSON reads back (config/machine_text.json_text); every
    character beyond ASCII too where `stream` (standard output) is not written as Unicode."""
    return json_text(record, ascii=not lossless(stream))


class JsonReporter:
    """One JSON object per line on stdout: {"format_version": 1, "event": ..., "time": ..., ...}."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stdout
        self._lock = threading.Lock()
        self.confirm: Callable[[str], bool] | None = None  # asks on the terminal (cli/views.view_for)

    def event(self, kind: str, **fields: object) -> None:
        now = datetime.now(UTC).isoformat(timespec="milliseconds")
        record = {"format_version": JSON_FORMAT_VERSION, "event": kind, "time": now, **fields}
        with self._lock:
            self.stream.write(json_line(redact_data(record), self.stream) + "\n")
            self.stream.flush()

    def show_plan(self, plan: Plan) -> None:
        self.event("plan", plan=json.loads(plan_json(plan)))

    def say(self, message: str, err: bool = False, head: str = "", colour: str | None = None) -> None:
        """Standard output holds only JSON lines; what a person must see goes to standard error."""
        if err:
            _echo(head + _one_line(message), err=True)


class _Pull(TypedDict, total=False):
    """A pull's or a download's progress on the terminal (only `start` where there is none)."""

    progress: Progress
    layers: dict[str, TaskID]  # a pull's layers
    task: TaskID  # a download's one bar
    start: float  # time.monotonic() of a pull's start


class TextReporter:
    """Plain lines, prefixed with the resource address; pulls get rich progress bars on a TTY."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pulls: dict[str, _Pull] = {}
        self.confirm: Callable[[str], bool] | None = None  # asks on the terminal (cli/views.view_for)

    def event(self, kind: str, **fields: object) -> None:
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
        _echo((click.style(head, fg=colour, bold=True) if head else "") + _one_line(message), err=err)

    def _line(self, address: object, message: object, colour: str | None = None) -> None:
        head = click.style(f"{_plain(address)}: ", bold=True) if address else ""
        message = _plain(message, "\t")  # one line: a line break from outside (a path, a name) shown \x0a
        _echo(head + (click.style(message, fg=colour) if colour else message))

    def _on_step(self, address: str, message: str, outcome: str = "", **_: object) -> None:
        colour = {"ok": "green", "failed": "red", "restored": "yellow"}.get(outcome)
        self._line(address, message, colour)

    def _on_waiting(self, address: str, elapsed: float, stage: str, log: str = "", **_: object) -> None:
        tail = f"; engine log: {_plain(redact(log))[:160]}" if log else ""  # redacted before it is cut
        self._line(address, f"still waiting after {elapsed:.0f} s ({stage}){tail}")

    def _on_log_tail(self, address: str, lines: list[str], **_: object) -> None:
        self._line(address, "last lines of the engine's log:")
        for line in lines:
            _echo(f"    | {_plain(redact(line))}")

    def _on_canary(self, address: str, result: JsonObject, **_: object) -> None:
        verdict = "passed" if result["passed"] else "refused the new engine"
        self._line(
            address, f"canary {verdict}: {redact(text_of(result['reason']))}", "green" if result["passed"] else "red"
        )
        for line in canary_table(redact_data(result)):
            _echo(f"    {line}")

    def _on_pull_start(self, address: str, image: str, **_: object) -> None:
        if sys.stdout.isatty():
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

            progress = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), transient=True)
            progress.start()
            self._pulls[image] = {"progress": progress, "layers": {}, "start": time.monotonic()}
        else:
            self._pulls[image] = {"start": time.monotonic()}
        self._line(address, f"pulling {image}")

    def _on_pull_progress(
        self, image: str, layer: str, status: str, current: int | None = None, total: int | None = None, **_: object
    ) -> None:
        state = self._pulls.get(image)
        if not state or "progress" not in state:
            return
        from rich.markup import escape  # what the registry says is shown as text, never as rich markup

        progress, layers = state["progress"], state["layers"]
        description = escape(_plain(f"{layer[:12]} {status}"))
        if layer not in layers:
            layers[layer] = progress.add_task(description, total=total or None)
        progress.update(layers[layer], description=description, completed=current or 0, total=total or None)

    def _on_download_start(self, address: str, message: str, total: int | None = None, **_: object) -> None:
        if sys.stdout.isatty() and total:
            from rich.markup import escape
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

            progress = Progress(
                TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(), transient=True
            )
            progress.start()
            task = progress.add_task(escape(_plain(address)), total=total)
            self._pulls[address] = {"progress": progress, "task": task}
        self._line(address, message)

    def _on_download_progress(self, address: str, done: int, total: int, **_: object) -> None:
        state = self._pulls.get(address)
        if state:
            state["progress"].update(state["task"], completed=done, total=total)

    def _on_download_done(self, address: str, message: str, **_: object) -> None:
        state = self._pulls.pop(address, {})
        if "progress" in state:
            state["progress"].stop()
        self._line(address, message, "green")

    def _on_pull_done(self, address: str, image: str, **_: object) -> None:
        state = self._pulls.pop(image, {})
        if "progress" in state:
            state["progress"].stop()
        self._line(
            address, f"pulled {image} in {time.monotonic() - state.get('start', time.monotonic()):.1f} s", "green"
        )


def canary_table(result: JsonObject) -> list[str]:
    """The old and the new engine's figures side by side, and any output that differs."""

    def cell(value: object, unit: str = "") -> str:
        return "-" if value is None else f"{value:g}{unit}" if isinstance(value, float) else f"{value}{unit}"

    old, new = object_of(result["old"]), object_of(result["new"])
    rows: list[tuple[str, ...]] = [
        ("", "old", "new"),
        ("output tokens/s", cell(old["output_tokens_per_second"]), cell(new["output_tokens_per_second"])),
        ("time to first token p50", cell(old["ttft_p50_seconds"], " s"), cell(new["ttft_p50_seconds"], " s")),
        ("time to first token p95", cell(old["ttft_p95_seconds"], " s"), cell(new["ttft_p95_seconds"], " s")),
        ("errors", f"{old['errors']} of {old['requests']}", f"{new['errors']} of {new['requests']}"),
    ]
    lines = _columns(rows)
    if "output_differences" in result:
        differing = objects(result["output_differences"])
        lines.append(
            f"greedy outputs of {result['outputs_compared']} prompts: "
            + (f"{len(differing)} differ" if differing else "all equal")
        )
        for d in differing:
            lines.append(f"  prompt {d['prompt']}: old {_plain(d['old'])[:80]!r}")
            lines.append(f"  prompt {d['prompt']}: new {_plain(d['new'])[:80]!r}")
    return lines


def bench_lines(report: JsonObject) -> list[str]:
    """`bench`'s table: one row per model, its figures or why it has none."""
    head = ("model", "output tokens/s", "TTFT p50", "TTFT p95", "errors", "requests")
    rows: list[tuple[str, ...]] = [head]
    notes = []
    for r in objects(report["models"]):
        if "error" in r:
            notes.append(f"{_plain(r['model'])}: not measured: {_plain(r['error'])}")
            continue
        ttft = [("-" if v is None else f"{v:g} s") for v in (r["ttft_p50_seconds"], r["ttft_p95_seconds"])]
        rows.append(
            (_plain(r["model"]), f"{r['output_tokens_per_second']:g}", *ttft, str(r["errors"]), str(r["requests"]))
        )
    lines = [f"Project {_plain(report['project'])}: each engine measured on its own, as it serves now"]
    return lines + (_columns(rows) if len(rows) > 1 else []) + notes


def object_of(value: JsonValue) -> JsonObject:
    """An object a report (a canary's, bench's, top's) holds there: its shape is the command's own,
    and another is a TypeError, as it always was."""
    if not isinstance(value, dict):
        raise TypeError(f"an object, not {type(value).__name__}")
    return value


def objects(value: JsonValue) -> list[JsonObject]:
    """A list of objects (rows) a report holds there."""
    if not isinstance(value, list):
        raise TypeError(f"a list, not {type(value).__name__}")
    return [object_of(item) for item in value]


def text_of(value: JsonValue) -> str:
    """A text a report holds there."""
    if not isinstance(value, str):
        raise TypeError(f"a text, not {type(value).__name__}")
    return value


def _columns(rows: list[tuple[str, ...]]) -> list[str]:
    """Rows as aligned columns: the first (a name) to the left, the figures to the right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
