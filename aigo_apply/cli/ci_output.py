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
`command()`, which only writes a line built as one.

The streams' encoding is the user's (a locale, PYTHONIOENCODING) and may not carry every character
(`ascii`, `latin-1`): a name or value beyond it ended in a UnicodeEncodeError traceback. Human text is
written with such a character as a visible escape (`caf\\xe9`, Python's backslashreplace); the
machine formats escape in their own grammar or say so: JSON with `\\u` escapes, which read back
exactly (`lossless` tells the writers), and YAML or a shell line, whose values an escape would change,
not at all: `machine()` refuses them with one line that says how to run with UTF-8."""

from __future__ import annotations

import codecs
import re
import sys
from typing import Any, TextIO

from aigo_apply.errors import AigoError

# encodings that carry every character a str may hold (but a lone surrogate, which printable() escapes)
_UNICODE = {"utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be", "gb18030"}

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
            self._put(text)
            return len(text)
        self._put(self._guard(text))
        return len(text)

    def _put(self, text: str) -> None:
        """`text` to the stream; what its encoding cannot carry as a visible escape (`\\xe9`). The
        stream encodes a write whole before it takes any of it, so nothing is written twice."""
        try:
            self._stream.write(text)
        except UnicodeEncodeError:
            encoding = getattr(self._stream, "encoding", None) or "utf-8"
            self._stream.write(text.encode(encoding, "backslashreplace").decode(encoding, "replace"))

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
            self._put("\n")
        self._put(line + "\n")
        self._state, self._last = _START, ""

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def __getattr__(self, name: str) -> Any:  # encoding, errors, fileno... (not `buffer`: all text comes here)
        if name == "buffer":
            raise AttributeError(name)
        return getattr(self._stream, name)


def lossless(stream: object = None) -> bool:
    """Whether `stream` (standard output when None) carries every character: its encoding is one of
    Unicode's (a stream without one is taken to be UTF-8)."""
    encoding = getattr(sys.stdout if stream is None else stream, "encoding", None) or "utf-8"
    try:
        return codecs.lookup(encoding).name in _UNICODE
    except LookupError:
        return False


def machine(text: str, what: str, err: bool = False) -> str:
    """`text`, a YAML document or a shell line (`what` names it), as it can go to standard output (or
    error): itself when the stream's encoding carries each of its characters, else AigoError, since any
    escape the stream could take would change a value in it."""
    stream = sys.stderr if err else sys.stdout
    if lossless(stream):
        return text
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError) as exc:
        char = text[exc.start] if isinstance(exc, UnicodeEncodeError) else "?"
        raise AigoError(
            f"standard {'error' if err else 'output'} is written as {encoding}, which cannot carry "
            f"{ascii(char)} (U+{ord(char):04X}) of this {what}, and an escape would change its value: run "
            "with a UTF-8 locale (LC_ALL=C.UTF-8) or PYTHONIOENCODING=utf-8"
        ) from None
    return text


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
