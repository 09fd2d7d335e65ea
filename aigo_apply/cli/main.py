"""The command line: wiring only. Each command builds its collaborators, calls the core and picks
the exit code; `main` is the one error boundary (AigoError -> message and its code, usage -> 64,
Ctrl-C -> 130, anything unexpected -> 3 with a short report); click's own shell completion
(`_AIGO_APPLY_COMPLETE=bash_source aigo-apply`, which `aigo-apply completion SHELL` prints) runs
through it too. What it prints passes through
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

import click

from aigo_apply import __version__
from aigo_apply.cli import (  # noqa: F401 (they register their commands)
    add_command,
    change_commands,
    check_commands,
    file_commands,
    repo_commands,
    store_commands,
)
from aigo_apply.cli.ci_output import guarded
from aigo_apply.cli.group import cli
from aigo_apply.cli.repo_commands import COMPLETE_VAR
from aigo_apply.errors import EXIT_ERROR, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, AigoError


def main(argv: list[str] | None = None) -> None:
    outer = sys.stdout, sys.stderr
    if not os.environ.get(COMPLETE_VAR):  # no `::` line (a shell's completion protocol is no CI's output,
        # and click writes it as bytes, which the guard, made for text, refuses: that was an internal error)
        sys.stdout, sys.stderr = guarded(sys.stdout), guarded(sys.stderr)
    try:
        code = _run(argv)
    finally:
        sys.stdout, sys.stderr = outer
    sys.exit(code)


def _run(argv: list[str] | None) -> int:
    """The error boundary. Ctrl-C becomes KeyboardInterrupt only inside it (the first statement of
    its `try`), so no code runs between an interrupt turning into an exception and the handler that
    says "interrupted"; once the boundary is done, Ctrl-C does what it did before (the console
    script: exit 130 at once, quietly)."""
    before = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    in_main = before is not None  # signals are set in the main thread only (None: a handler not set from Python)
    try:
        try:
            if in_main:
                signal.signal(signal.SIGINT, signal.default_int_handler)
            code = cli.main(args=argv, prog_name="aigo-apply", standalone_mode=False)
        finally:
            if in_main:
                signal.signal(signal.SIGINT, before)
    except click.exceptions.UsageError as exc:
        shown = io.StringIO()
        exc.show(file=shown)
        click.echo(_safe(shown.getvalue()), err=True, nl=False)
        code = EXIT_USAGE
    except (click.exceptions.Abort, KeyboardInterrupt):
        if in_main:  # a Ctrl-C that landed in the `finally` above: the handler is put back here
            signal.signal(signal.SIGINT, before)
        click.echo("\ninterrupted", err=True)
        code = EXIT_INTERRUPTED
    except click.ClickException as exc:
        click.echo(_safe(f"Error: {exc.format_message()}"), err=True)
        code = EXIT_ERROR
    except AigoError as exc:
        for line in exc.lines():  # each one line: a line break a name or path from outside holds is shown \x0a
            click.echo(_safe(line, keep="\t"), err=True)
        code = exc.exit_code
    except Exception:
        import traceback  # with linecache and tokenize: only an internal error prints one

        click.echo(
            "internal error in aigo-apply " + __version__ + " (a bug; please report it with this output):", err=True
        )
        click.echo(_safe(traceback.format_exc(limit=-8)), err=True)
        code = EXIT_INTERNAL
    return code if isinstance(code, int) else EXIT_OK


def _safe(text: str, keep: str = "\n\t") -> str:
    """`text` without any secret value this process read, and with every character a terminal
    would act on escaped, but those in `keep` (imported here: only errors need them)."""
    try:
        from aigo_apply.plan.text import printable
        from aigo_apply.platforms.secrets import redact
    except Exception:  # the boundary must still print the error it was given, safely
        return "".join(c if c.isprintable() or c in keep else ascii(c)[1:-1] for c in text)
    return printable(redact(text), keep=keep)


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
