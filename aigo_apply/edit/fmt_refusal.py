"""Why `fmt` cannot keep a valid file, said at the line it is about: a file that
validates is the user's, and one fmt cannot rewrite faithfully is fmt's limit, not a bug to report.
Each refusal names the file and, where the cause has a place, its line and column, what fmt could
not keep there, and how to write that line so fmt can; nothing is written."""

from __future__ import annotations

from collections import Counter

from aigo_apply.config.yaml_source import Marks
from aigo_apply.errors import AigoError

PLAIN = "write it in plain block or flow YAML (spaces, not tabs; no tags or anchors), then run fmt again"


def refusal(display: str, what: str, fix: str = PLAIN, where: tuple[int, int] | None = None) -> AigoError:
    place = f"{display}:{where[0]}:{where[1]}" if where else display
    return AigoError(f"{place}: fmt cannot rewrite this file without changing it: {what}; nothing was written: {fix}")


def at_path(marks: Marks | None, path: tuple[str | int, ...]) -> tuple[int, int] | None:
    """Where the value at `path` is written (its key's place when the value has none recorded)."""
    if marks is None:
        return None
    try:
        return marks.of_value(path) if path else None
    except (KeyError, ValueError, TypeError):
        return None


def yaml_mark(exc: BaseException) -> tuple[int, int] | None:
    """The 1-based line and column a YAML reader's error points at, if it says."""
    for name in ("problem_mark", "context_mark"):
        mark = getattr(exc, name, None)
        if mark is not None and isinstance(getattr(mark, "line", None), int):
            return mark.line + 1, mark.column + 1
    return None


def first_difference(a: object, b: object, path: tuple[str | int, ...] = ()) -> tuple[str | int, ...] | None:
    """The first path at which two documents differ in a value or its type (None: they do not)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in a:
            if key not in b:
                return path + (key,)
            found = first_difference(a[key], b[key], path + (key,))
            if found is not None:
                return found
        extra = [k for k in b if k not in a]
        return path + (extra[0],) if extra else None
    if isinstance(a, list) and isinstance(b, list):
        for index, (x, y) in enumerate(zip(a, b, strict=False)):
            found = first_difference(x, y, path + (index,))
            if found is not None:
                return found
        return path + (min(len(a), len(b)),) if len(a) != len(b) else None
    return None if type(a) is type(b) and a == b else path


def lost_comment_line(text: str, before: list[str], after: list[str]) -> tuple[int, int] | None:
    """The line and column of the first comment of `text` that the rewritten text lost."""
    lost = Counter(before) - Counter(after)
    for number, line in enumerate(text.split("\n"), 1):
        for comment in lost:
            at = line.find(comment)
            if at >= 0:
                return number, at + 1
    return None
