"""`python -m aigo_apply` and the `aigo-apply` console script. A Ctrl-C that lands while the
program is still loading exits 130 quietly, without a traceback; once the CLI is loaded, its own
error boundary (cli/main.py) handles interrupts. `aigo-apply --version` alone is answered here,
before click and the CLI are imported (the same line click's version option prints): scripts and
CI jobs call it to check the tool, and it should cost no more than Python's own start-up."""

from __future__ import annotations

import os
import signal
import sys


def _interrupted_while_loading(signum: int, frame: object) -> None:
    os._exit(130)


def run() -> None:
    signal.signal(signal.SIGINT, _interrupted_while_loading)
    if sys.argv[1:] == ["--version"]:
        from aigo_apply import __version__

        try:
            sys.stdout.write(f"aigo-apply, version {__version__}\n")
            sys.stdout.flush()
        except (OSError, ValueError):  # a closed pipe: nothing to say, as the CLI does
            pass
        os._exit(0)
    from aigo_apply.app.noop_memo import replay

    code = replay(sys.argv[1:])  # a plan or apply with nothing to change, answered from its memo
    if code is not None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    from aigo_apply.cli.main import entry

    entry()


if __name__ == "__main__":
    run()
