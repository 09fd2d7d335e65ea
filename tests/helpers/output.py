"""The command line in this process as the console script runs it (cli/main wraps the standard streams
in the CI guard), and what a view prints under those streams: for the tests of what aigo-apply prints."""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Callable

import pytest

from aigo_apply.config.machine_text import is_command

LINES = re.compile(r"\r\n|\r|\n")  # where a CI runner splits a step's output


def cli(*args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of aigo-apply ARGS, checked: no traceback, no workflow command."""
    from aigo_apply.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exit_info:
        main(list(args))
    text = out.getvalue() + err.getvalue()
    assert "Traceback" not in text and "internal error" not in text, text
    for line in LINES.split(text):
        assert not is_command(line), (line, args, text)
    return int(exit_info.value.code or 0), out.getvalue(), err.getvalue()


def printed(show: Callable[[], object]) -> tuple[str, str]:
    """(stdout, stderr) of `show()` under cli/main's guarded streams."""
    from aigo_apply.cli.ci_output import guarded

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(guarded(out)), contextlib.redirect_stderr(guarded(err)):
        show()
    return out.getvalue(), err.getvalue()
