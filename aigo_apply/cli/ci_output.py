"""No line aigo-apply prints is a CI runner's command unless it means to be one.

GitHub Actions reads every line of a step's output whose text, after leading white space, begins
with `::` as a workflow command (`::error ...::`, `::add-mask::`, `::stop-commands::`), and a line
holding `##[` anywhere as one of the older form; the runner splits lines at LF, CR and CR LF.

This guard is for human text: a file name, an alias's path, a log line or a repo name from a download
marker is printed at the start of a line often enough (`FILE:LINE:COL: ...`), so main() wraps stdout
and stderr in CommandSafe, which writes the second `:` of a line-opening `::` as `\\x3a` and the `[`
of `##[` as `\\x5b` (the way printable() shows other characters a reader must not act on). Paths are
shown as `./::...` before they reach it (errors.shown_path). The machine formats (JSON, the YAML of
`render --as kubernetes`, `export` and `import`, the shell line of `render --as docker-run`) pass
through it unchanged: each escapes in its own grammar (config/machine_text.py), so no line of theirs
is a command and the guard, whose escapes would change their values, finds nothing to rewrite. The one output that is made
of commands, `validate -o github`'s annotations (escaped by config/annotations.py), goes through
`command()`, which only writes a line built as one."""

from __future__ import annotations

import re
import sys
from typing import Any, TextIO

from aigo_apply.errors import AigoError

_START, _ONE_COLON, _MID = range(3)
_PLAIN = re.compile(r"[^\r\n\[]*\Z")
_ANNOTATION = re.compile(r"::(error|warning|notice) [^\r\n]*::[^\r\n]*")


class CommandSafe:
    """A text stream that never lets a line start a workflow command (see the module's docstring)."""

    def __init__(self, stream: TextIO):
        self._stream = stream
        self._state = _START
        self._last = ""  # the last two characters written on this line

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if self._state == _MID and _PLAIN.match(text):
            self._last = (self._last + text)[-2:]
            self._stream.write(text)
            return len(text)
        self._stream.write(self._guard(text))
        return len(text)

    def _guard(self, text: str) -> str:
        out: list[str] = []
        for char in text:
            if char in "\r\n":
                self._state, self._last = _START, ""
                out.append(char)
                continue
            shown = char
            if self._state == _START and char == ":":
                self._state = _ONE_COLON
            elif self._state == _START and not char.isspace():
                self._state = _MID
            elif self._state == _ONE_COLON:
                self._state = _MID
                shown = "\\x3a" if char == ":" else char
            if char == "[" and self._last == "##":
                shown = "\\x5b"
            out.append(shown)
            self._last = (self._last + char)[-2:]
        return "".join(out)

    def command(self, line: str) -> None:
        """One workflow command this program built (an annotation), on a line of its own."""
        if not _ANNOTATION.fullmatch(line):
            raise AigoError("refusing to print a workflow command that aigo-apply did not build")
        if self._state != _START:
            self._stream.write("\n")
        self._stream.write(line + "\n")
        self._state, self._last = _START, ""

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def __getattr__(self, name: str) -> Any:  # encoding, errors, fileno... (not `buffer`: all text comes here)
        if name == "buffer":
            raise AttributeError(name)
        return getattr(self._stream, name)


def guarded(stream: TextIO) -> Any:
    """`stream`, wrapped once."""
    return stream if isinstance(stream, CommandSafe) else CommandSafe(stream)


def command(line: str) -> None:
    """Print one annotation line of `validate -o github` as the command it is."""
    out = sys.stdout
    if isinstance(out, CommandSafe):
        out.command(line)
    else:  # not under main() (a test calling the command directly): the line is one we built
        if not _ANNOTATION.fullmatch(line):
            raise AigoError("refusing to print a workflow command that aigo-apply did not build")
        out.write(line + "\n")
