"""One view per output format, chosen once from -o/--output (`view_for`) and handed to the use case
(platforms/views.py says what each use case needs of it): text for people, the versioned JSON, Markdown for
a pull request comment (plan), GitHub Actions annotations (validate). Each is also the run's console
(cli/reporter.py's human lines or JSON lines) for apply, destroy and the pulls. The plan itself is
rendered by plan/text.py and plan/markdown.py; a view only chooses and prints. What a view prints
passes through cli/reporter.echo: secrets redacted, nothing a terminal would act on. Text for people
shows each name from outside on its line (a line feed in it escaped); JSON is written by
config/machine_text.json_text, which escapes in JSON's own grammar, so cli/ci_output's guard (meant
for human text) has nothing to rewrite in it and every value reads back exactly."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar, overload

import click

from aigo_apply.cli.ci_output import command, machine
from aigo_apply.cli.reporter import JsonReporter, TextReporter, echo, json_line, objects, text_of
from aigo_apply.config.machine_text import json_text
from aigo_apply.desired.images import LocalImage
from aigo_apply.errors import ConfigFileError, ConfigInvalid, shown_path
from aigo_apply.json_types import JsonObject, JsonValue
from aigo_apply.plan.types import Plan
from aigo_apply.platforms.secrets import redact_data
from aigo_apply.platforms.views import JSON_FORMAT_VERSION, Readiness

FORMATS = ("text", "json", "markdown", "github")


class TextView(TextReporter):
    """Human text: the plan in Terraform's shape, one line per file validated, readiness's marks."""

    def plan(self, plan: Plan, show_diff: bool) -> None:
        from aigo_apply.plan.text import plan_text

        echo(plan_text(plan, show_diff))

    def plan_saved(self, path: Path) -> None:
        from aigo_apply.plan.text import shown

        echo(
            f"\nSaved the plan to {shown(path)}; `aigo-apply apply {shown(path)}` carries it out if nothing has "
            "changed since."
        )

    def valid(self, path: str, project: str, models: int) -> None:
        shown = shown_path(path) if path.isprintable() else repr(path)  # (plan.text.shown's rule: validate is quick)
        click.echo(f"{shown}: valid (project '{project}', {models} model{'s' if models != 1 else ''})")

    def invalid(self, error: ConfigInvalid, alone: bool) -> None:
        if alone:
            raise error  # the error boundary says it, with its exit code
        for line in error.lines():
            echo(line, err=True, colours=False)

    def unreadable(self, error: ConfigFileError, alone: bool) -> None:
        if alone:
            raise error
        echo(f"error: {error}", err=True, colours=False)

    def readiness(self, report: Readiness) -> None:
        from aigo_apply.plan.gpu_ledger import render as ledger_lines
        from aigo_apply.plan.text import printable

        marks = {
            "ok": click.style("ok", fg="green"),
            "warning": click.style("warning", fg="yellow"),
            "blocking": click.style("blocking", fg="red", bold=True),
        }
        image = _one_line_each(report.image)
        echo(
            f"image: {image['image_reference'] or f'(no tag: set engines.{report.engine}.image_tag)'}"
            + (" (tag overridden)" if image["tag_overridden"] else "")
        )
        for check in report.checks:
            echo(f"  {marks[check.status]:<8} {check.id}: {printable(check.message, keep='')}")
            if check.remediation and check.status != "ok":
                echo(f"           fix: {printable(check.remediation, keep='')}")
        for line in ledger_lines(report.gpu_ledger):
            echo("  " + printable(line, keep=""))

    def status(self, report: JsonObject, text: Callable[[JsonObject], str]) -> None:
        echo(text(_one_line_each(report)), colours=False)

    def log_line(self, name: str, line: str, prefixed: bool) -> None:
        shown = _one_line_each(line, keep="\t")
        echo(f"{_one_line_each(name)} | {shown}" if prefixed else shown, colours=False)

    def top(self, report: JsonObject, live: bool) -> None:
        from rich.console import Console as Screen

        from aigo_apply.cli.top_table import render
        from aigo_apply.plan.text import printable

        table = [
            {k: printable(v, keep="") if isinstance(v, str) else v for k, v in r.items()}
            for r in objects(report["models"])
        ]
        screen = Screen(highlight=False)
        if live and screen.is_terminal:
            screen.clear()
        screen.print(render(printable(text_of(report["project"]), keep=""), table, objects(report["gpus"])))

    def bench(self, report: JsonObject) -> None:
        from aigo_apply.cli.reporter import bench_lines

        for line in bench_lines(report):
            echo(line, colours=False)

    def image(self, info: LocalImage) -> None:
        from aigo_apply.desired.images import render

        echo(render(_one_line_each(info)), colours=False)

    def stored_models(self, rows: list[JsonObject]) -> None:
        from aigo_apply.app.models import render

        echo(render(_one_line_each(rows)), colours=False)

    def document(self, text: str) -> None:
        echo(machine(text, "render output"), colours=False)

    def added(self, report: JsonObject, entry: str) -> None:
        """`add`: each note on standard error, the entry (YAML with its comments), and where it went."""
        from aigo_apply.plan.text import printable

        for note in _notes(report["notes"]):
            echo(printable(f"note: {note}", keep=""), err=True, colours=False)
        echo(machine("models:\n" + entry.removesuffix("\n"), "YAML entry"), colours=False)
        if report["written"]:
            echo(
                printable(
                    f"added model '{report['alias']}' to {report['file']}; run `aigo-apply plan` to see it", keep=""
                )
            )


class JsonView(JsonReporter):
    """The JSON of each command (apply and destroy: JSON lines), every document and line with its
    `format_version` (platforms/views.JSON_FORMAT_VERSION; the plan's is its own)."""

    def plan(self, plan: Plan, show_diff: bool) -> None:
        from aigo_apply.plan.text import plan_json

        echo(plan_json(plan))

    def plan_saved(self, path: Path) -> None:
        pass  # standard output holds the plan's JSON only

    def valid(self, path: str, project: str, models: int) -> None:
        _json({"file": path, "valid": True, "problems": [], "project": project, "models": models})

    def invalid(self, error: ConfigInvalid, alone: bool) -> None:
        _json({"file": error.file, "valid": False, "problems": [p.__dict__ for p in error.problems]})

    def unreadable(self, error: ConfigFileError, alone: bool) -> None:
        raise error

    def readiness(self, report: Readiness) -> None:
        _json(report.to_dict())

    def status(self, report: JsonObject, text: Callable[[JsonObject], str]) -> None:
        _json(report)

    def log_line(self, name: str, line: str, prefixed: bool) -> None:
        record = {"format_version": JSON_FORMAT_VERSION, "source": name, "line": line}
        echo(json_line(redact_data(record)), colours=False)

    def top(self, report: JsonObject, live: bool) -> None:
        versioned = {"format_version": JSON_FORMAT_VERSION, **report}
        echo(json_text(redact_data(versioned)), colours=False)  # one object a line while it runs; one with --once

    def bench(self, report: JsonObject) -> None:
        _json(report)

    def image(self, info: LocalImage) -> None:
        _json(info)

    def stored_models(self, rows: list[JsonObject]) -> None:
        _json({"models": rows})

    def document(self, text: str) -> None:
        echo(machine(text, "render output"), colours=False)

    def added(self, report: JsonObject, entry: str) -> None:
        _json(report)


class MarkdownView(TextView):
    """plan -o markdown: a pull request comment (plan/markdown.py)."""

    def plan(self, plan: Plan, show_diff: bool) -> None:
        from aigo_apply.plan.markdown import plan_markdown

        echo(plan_markdown(plan).rstrip("\n"), colours=False)

    def plan_saved(self, path: Path) -> None:
        pass  # the comment is the whole output


class GithubView(TextView):
    """validate -o github: each problem a GitHub Actions annotation, the one output line that is a
    workflow command (cli/ci_output.command); every file is validated, whatever the others say."""

    def invalid(self, error: ConfigInvalid, alone: bool) -> None:
        from aigo_apply.config.annotations import problem_lines

        for line in problem_lines(error.file, error.problems):
            command(line)

    def unreadable(self, error: ConfigFileError, alone: bool) -> None:
        from aigo_apply.config.annotations import file_error_line

        command(file_error_line(error))


def view_for(output: str, confirm: Callable[[str], bool] | None = None) -> TextView | JsonView:
    """The one view of this run's -o/--output; `confirm` asks on the terminal (None: there is none)."""
    view: TextView | JsonView = {"text": TextView, "json": JsonView, "markdown": MarkdownView, "github": GithubView}[
        output
    ]()
    view.confirm = confirm
    return view


_Report = TypeVar("_Report", bound=Mapping[str, object])


@overload
def _one_line_each(data: str, keep: str = "") -> str: ...
@overload
def _one_line_each(data: _Report, keep: str = "") -> _Report: ...
@overload
def _one_line_each(data: list[_Report], keep: str = "") -> list[_Report]: ...
def _one_line_each(data: object, keep: str = "") -> object:
    """`data` (a report from Docker, a cluster or the model store) with every text in it shown on
    one line, each character a terminal would act on, a line feed too, escaped (plan.text.printable):
    a name cannot print a line of its own in the text made of it. Of the same shape: a text for a
    text, a mapping with the same keys (fixed names, or names escaped as their values are), a list
    of as many items (a tuple's items become a list, as JSON writes them)."""
    from aigo_apply.plan.text import printable

    if isinstance(data, str):
        return printable(data, keep=keep)
    if isinstance(data, dict):
        return {_one_line_each(k): _one_line_each(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_one_line_each(v) for v in data]
    return data


def _notes(value: JsonValue) -> list[JsonValue]:
    """`add`'s notes (a list: another shape is a TypeError, as it always was)."""
    if not isinstance(value, list):
        raise TypeError(f"a list, not {type(value).__name__}")
    return value


def _json(data: Mapping[str, object]) -> None:
    """One JSON document, its `format_version` first: secrets redacted in the data (a value escaped
    in JSON no longer reads as itself), written by config/machine_text (no CI command in it, the
    exact values)."""
    echo(json_text(redact_data({"format_version": JSON_FORMAT_VERSION, **data}), indent=2), colours=False)
