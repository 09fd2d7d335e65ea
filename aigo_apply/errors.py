"""Every error a user can meet, as one small hierarchy, with the exit code each one maps to.

Adapters translate their libraries' exceptions into these in exactly one place; the CLI is the
only boundary that turns them into text and an exit code.
"""

from __future__ import annotations

from dataclasses import dataclass

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_CHANGES = 2
EXIT_INTERNAL = 3
EXIT_USAGE = 64
EXIT_INTERRUPTED = 130


def visible(text: str) -> str:
    """`text` with each character that is not printable (a line feed, CR, an escape, a bidi override, a
    line separator) written as a visible escape (`\\x0a`, `\\u202e`): it stays on its line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else escape_char(c) for c in text)


def escape_char(char: str) -> str:
    """One character as Python writes it in a string: `\\x0a`, `\\u202e`, `\\U000e0001`."""
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shown_path(path: str) -> str:
    """A path (a name from outside) as a line of output shows it: on that line whatever characters it
    holds (`visible`), and `./::x` for `::x`, since a CI runner reads a line that begins with `::`
    (after white space) as a workflow command; any other path as it is."""
    path = visible(path)
    return f"./{path}" if path.lstrip().startswith(":") and not path.startswith("/") else path


@dataclass(frozen=True, order=True)
class Problem:
    """One finding about the config file, located as precisely as the source allows."""

    line: int
    column: int
    path: str
    message: str
    file: str = ""

    def format(self) -> str:
        """One line, whatever the path in the document or the message holds (a key, a file name or a
        link's target from the host, with a line feed in it, is shown `\\x0a`)."""
        where = f"{shown_path(self.file)}:{self.line}:{self.column}"
        message = visible(self.message)
        return f"{where}: {visible(self.path)}: {message}" if self.path else f"{where}: {message}"


class AigoError(Exception):
    """A failure the user can act on; `str()` is the whole message, without a traceback. `lines()`
    are what the error boundary prints, each one line: a line break inside one (a name or path from
    outside that holds one) is shown there as `\\x0a`, so an error that has more to say than one line
    says it as lines (Problems)."""

    exit_code = EXIT_ERROR

    def lines(self) -> list[str]:
        return [f"error: {self}"]


class Problems(AigoError):
    """An error that lists what is wrong under its head line, each item on a line of its own (the
    problems an edit would have given the config file): `str()` holds them all, indented."""

    def __init__(self, head: str, items: list[str]):
        super().__init__(head + "".join(f"\n  {item}" for item in items))
        self.head, self.items = head, list(items)

    def lines(self) -> list[str]:
        return [f"error: {self.head}", *(f"  {item}" for item in self.items)]


class ConfigFileError(AigoError):
    """The file cannot be read as YAML at all (missing, unreadable, not UTF-8, empty, syntax)."""

    def __init__(self, file: str, message: str, line: int | None = None, column: int | None = None):
        self.file, self.line, self.column = file, line, column
        where = shown_path(file) if line is None else f"{shown_path(file)}:{line}:{column or 1}"
        super().__init__(f"{where}: {message}")

    def lines(self) -> list[str]:
        return [f"error: {self}"]


class ConfigInvalid(AigoError):
    """The file is YAML but breaks the schema or a cross-field rule; carries every problem found."""

    def __init__(self, file: str, problems: list[Problem]):
        self.file = file
        self.problems = sorted(problems)
        noun = "problem" if len(problems) == 1 else "problems"
        super().__init__(f"{shown_path(file)}: {len(problems)} {noun} found")

    def lines(self) -> list[str]:
        return [p.format() for p in self.problems] + [
            f"error: {self}; nothing was changed. Fix the lines above and run `aigo-apply validate` again."
        ]


class FormatUnkept(AigoError):
    """`fmt` could not rewrite a part of a valid file faithfully: what, and where (`path` in the
    document); edit/fmt_refusal.py words it at the file's line before the user sees it."""

    def __init__(self, message: str, path: tuple[str | int, ...] = ()):
        super().__init__(message)
        self.path = path


class UsageProblem(AigoError):
    """Options that do not fit the config (e.g. --target of a model that does not exist)."""

    exit_code = EXIT_USAGE


class DockerUnavailable(AigoError):
    """The Docker engine cannot be reached or refused a call."""


class PlanBlocked(AigoError):
    """The plan cannot be applied as it stands (conflicts, readiness blockers)."""


class PlanFileError(AigoError):
    """A saved plan file cannot be read or does not match what runs now."""


class SecretUnavailable(AigoError):
    """A referenced secret cannot be read or must not be used; says which reference, never a value:
    `problem` (the field and what is wrong) and `fix`, apart for a plan blocker."""

    def __init__(self, problem: str, fix: str = ""):
        super().__init__(f"{problem}; {fix} (nothing was changed)" if fix else problem)
        self.problem, self.fix = problem, fix


class NotReady(AigoError):
    """The engine did not become ready: it exited (`container_exit_code`), it timed out, or the wait
    was interrupted. (Its own `exit_code` stays the CLI's: the container's is another number.)"""

    def __init__(
        self,
        message: str,
        log_tail: list[str] | None = None,
        container_exit_code: int | None = None,
        interrupted: bool = False,
    ):
        super().__init__(message)
        self.log_tail = log_tail or []
        self.container_exit_code = container_exit_code
        self.interrupted = interrupted


class CanaryRefused(AigoError):
    """The canary gate measured the new engine of a parallel replace and refused it: the route does
    not move. `result`: both measurements and the reason, as the apply report shows them."""

    def __init__(self, reason: str, result: dict[str, object]):
        super().__init__(f"the canary gate refused the new engine: {reason}")
        self.result = result


class Interrupted(AigoError):
    """The user stopped an apply (Ctrl-C or SIGTERM) before a step could start."""

    exit_code = EXIT_INTERRUPTED


class LockHeld(AigoError):
    """Another aigo-apply run holds the project's lock."""


class RouterError(AigoError):
    """The router could not take a new configuration; the previous one still serves."""


class UnsupportedModel(AigoError):
    """The repo or folder holds nothing an engine can serve."""


class UnsafeSetting(AigoError):
    """A value that must never reach a command line (unknown name, whitespace, leading dash...)."""


class HubError(AigoError):
    """The Hub refused or could not be reached: what happened, and the step that fixes it.
    `access` marks the errors no retry can fix (gated, private, missing repo or revision)."""

    def __init__(self, message: str, fix: str = "", access: bool = False):
        super().__init__(f"{message}; {fix}" if fix else message)
        self.message, self.fix, self.access = message, fix, access


class KubeError(AigoError):
    """The API server refused a call: what was asked, its answer, and (where known) what to do."""

    def __init__(self, message: str, code: int | None = None, reason: str = ""):
        super().__init__(message)
        self.code, self.reason = code, reason


class KubeUnavailable(KubeError):
    """The cluster cannot be reached, or refuses who we are (401) or what we ask (403)."""


class KubeConflict(KubeError):
    """A server-side apply met fields another field manager owns (409 Conflict)."""

    def __init__(self, message: str, managers: tuple[str, ...], fields: tuple[str, ...]):
        super().__init__(message, 409, "Conflict")
        self.managers, self.fields = managers, fields


class Unreadable(AigoError):
    """A file from outside that is not read: `display` (the file), `reason` (why, in words that
    follow the file's name), `fix` (what to do), and `why`, the kind of refusal, for a caller that
    words one itself: missing, link, kind (not a regular file), size, permission, judge (the
    caller's own check) or os (any other failure of the system)."""

    def __init__(self, display: str, reason: str, fix: str = "", why: str = "os"):
        super().__init__(f"{display}: {reason}" + (f"; {fix}" if fix else ""))
        self.display, self.reason, self.fix, self.why = display, reason, fix, why

    @property
    def missing(self) -> bool:
        return self.why == "missing"
