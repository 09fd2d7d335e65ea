"""The command line: wiring only. Each command builds its collaborators, calls the core and picks
the exit code; `main` is the one error boundary (AigoError -> message and its code, usage -> 64,
Ctrl-C -> 130, anything unexpected -> 3 with a short report). What it prints passes through
secrets.redact: a secret value read by this run never appears in an error, even by accident; and
through plan.text.printable: a name from the command line, a config or a saved plan quoted in an
error cannot send the terminal an escape sequence, BEL, CR or bidi override; and through
cli/ci_output.CommandSafe: no line it prints is a CI runner's workflow command unless it is one of
`validate -o github`'s annotations."""

from __future__ import annotations

import io
import os
import signal
import sys
import threading
import traceback

import click

from aigo_apply import __version__
from aigo_apply.app import noop_memo
from aigo_apply.cli import (  # noqa: F401 (they register their commands)
    change_commands,
    check_commands,
    file_commands,
    repo_commands,
    store_commands,
)
from aigo_apply.cli.ci_output import guarded
from aigo_apply.cli.group import cli
from aigo_apply.errors import EXIT_ERROR, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, AigoError


def main(argv: list[str] | None = None) -> None:
    if threading.current_thread() is threading.main_thread():  # Ctrl-C is KeyboardInterrupt from here on
        signal.signal(signal.SIGINT, signal.default_int_handler)
    outer = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = guarded(sys.stdout), guarded(sys.stderr)  # no `::` line
    try:
        _main(argv)
    finally:
        sys.stdout, sys.stderr = outer


def _main(argv: list[str] | None) -> None:
    code = EXIT_INTERNAL
    args = sys.argv[1:] if argv is None else argv
    if not noop_memo.qualifies(list(args)):
        code = _run(argv)
        sys.exit(code)
    from aigo_apply.app import noop_record  # a plan or apply that may find nothing to change: its memo

    recording = noop_record.begin(args)
    streams = sys.stdout, sys.stderr
    if recording is not None:  # what it prints is kept for the memo
        sys.stdout, sys.stderr = noop_record.Tee(streams[0], recording.out), noop_record.Tee(streams[1], recording.err)
    try:
        code = _run(argv)
    finally:
        sys.stdout, sys.stderr = streams
        noop_record.finish(code)
    sys.exit(code if isinstance(code, int) else EXIT_OK)


def _run(argv: list[str] | None) -> int:
    try:
        code = cli.main(args=argv, prog_name="aigo-apply", standalone_mode=False)
    except click.exceptions.UsageError as exc:
        shown = io.StringIO()
        exc.show(file=shown)
        click.echo(_safe(shown.getvalue()), err=True, nl=False)
        code = EXIT_USAGE
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("\ninterrupted", err=True)
        code = EXIT_INTERRUPTED
    except click.ClickException as exc:
        click.echo(_safe(f"Error: {exc.format_message()}"), err=True)
        code = EXIT_ERROR
    except AigoError as exc:
        for line in exc.lines():
            click.echo(_safe(line), err=True)
        code = exc.exit_code
    except Exception:
        click.echo(
            "internal error in aigo-apply " + __version__ + " (a bug; please report it with this output):", err=True
        )
        click.echo(_safe(traceback.format_exc(limit=-8)), err=True)
        code = EXIT_INTERNAL
    return code if isinstance(code, int) else EXIT_OK


def _safe(text: str) -> str:
    """`text` without any secret value this process read, and with every character a terminal
    would act on escaped (imported here: only errors need them)."""
    try:
        from aigo_apply.apply.secrets import redact
        from aigo_apply.plan.text import printable
    except Exception:  # the boundary must still print the error it was given, safely
        return "".join(c if c.isprintable() or c in "\n\t" else ascii(c)[1:-1] for c in text)
    return printable(redact(text))


def entry() -> None:
    """The console script: `main`, then leave without the interpreter's teardown. Freeing every
    module and object at exit costs 0.1-0.2 s, a visible share of a no-op apply; by then every
    file we wrote is closed (context managers), the lock is released and worker threads are done,
    so only the standard streams need flushing. In-process callers (tests) use `main`."""
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`| head`) must not turn into an error
            pass
    os._exit(code)
