"""`validate -o github`: each problem as a GitHub Actions workflow command
(`::error file=F,line=L,col=C,title=T::MESSAGE`), so that it shows on the pull request's line.

The runner reads every output line that starts with `::` as a command, so text from the file (a
path, a name, a quoted value) must not be able to end the command or start another: in the message
`%`, CR and LF are escaped as GitHub requires (`%25`, `%0D`, `%0A`); in properties `:` and `,` too
(`%3A`, `%2C`); any other control or format character is written as a visible `\\uXXXX`."""

from __future__ import annotations

import unicodedata

from aigo_apply.errors import ConfigFileError, Problem

TITLE = "aigo-apply validate"


def _visible(text: str) -> str:
    return "".join(
        c if c in "\r\n" or unicodedata.category(c)[0] not in "CZ" or c == " " else f"\\u{ord(c):04x}" for c in text
    )


def escape_data(text: str) -> str:
    """A command's message: %, CR and LF escaped (the runner decodes them back)."""
    return _visible(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A command's property value: also `:` and `,`, which would end the value."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(level: str, message: str, file: str, line: int | None = None, col: int | None = None) -> str:
    """One workflow command (`error`, `warning` or `notice`) located at file:line:col."""
    props = [f"file={escape_property(file)}"]
    if line is not None:
        props.append(f"line={int(line)}")
        if col is not None:
            props.append(f"col={int(col)}")
    props.append(f"title={escape_property(TITLE)}")
    return f"::{level} {','.join(props)}::{escape_data(message)}"


def problem_lines(file: str, problems: list[Problem]) -> list[str]:
    """Every problem of an invalid file, one `::error` each, at its line and column."""
    return [
        command("error", f"{p.path}: {p.message}" if p.path else p.message, p.file or file, p.line, p.column)
        for p in problems
    ]


def file_error_line(exc: ConfigFileError) -> str:
    """A file that cannot be read as YAML at all: one `::error`, on its line when known."""
    message = str(exc)
    prefix = exc.file if exc.line is None else f"{exc.file}:{exc.line}:{exc.column or 1}"
    message = message.removeprefix(prefix + ": ")
    return command("error", message, exc.file, exc.line, exc.column or (1 if exc.line else None))
