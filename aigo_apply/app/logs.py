"""`aigo-apply logs`: what the engines (or the router) print, for the models of the file, on the
platform chosen once (its `logs`: platforms/docker/logs.py on Docker). Each line is prefixed with its
model's alias when more than one is shown; secrets are redacted (the platform remembers them, the
view's echo applies platforms/secrets.redact); --follow goes on across a replace until Ctrl-C (the error
boundary ends it quietly with 130)."""

from __future__ import annotations

import re

from aigo_apply.app.choose_platform import open_platform
from aigo_apply.errors import EXIT_OK, UsageProblem
from aigo_apply.platforms.requests import LogsRequest
from aigo_apply.platforms.views import LogsView

_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


MAX_SINCE_S = 100 * 365 * 86400  # no container's log goes back further


def parse_since(text: str) -> float:
    """--since: a duration such as 90s, 10m or 1h30m, in seconds, of at most MAX_SINCE_S (a number of
    thousands of digits is refused before int() would refuse it with a traceback)."""
    found = _DURATION.fullmatch(text.strip()) if len(text) <= 64 else None
    if not found or not any(found.groups()):
        raise UsageProblem(f"--since {text[:64]!r}: give a duration such as 30s, 10m or 1h30m")
    h, m, s = (int(g or 0) for g in found.groups())
    if h * 3600 + m * 60 + s > MAX_SINCE_S:
        raise UsageProblem(f"--since {text!r}: give a duration of at most 100 years (876000h)")
    return float(h * 3600 + m * 60 + s)


def run_logs(request: LogsRequest, view: LogsView) -> int:
    stream = open_platform(request.file, request.platform).logs(request)
    for name, line in stream.lines:
        view.log_line(name, line, stream.several)
    return EXIT_OK
