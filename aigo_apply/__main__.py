"""`python -m aigo_apply` and the `aigo-apply` console script. Ctrl-C exits 130 quietly, without a
traceback, at any moment: while the program loads and after the CLI's error boundary (cli/main.py)
has finished, this module's handler ends the process at once; inside the boundary, Ctrl-C is a
KeyboardInterrupt that the boundary reports as "interrupted". `aigo-apply --version` alone is
answered here, before click and the CLI are imported (the same line click's version option prints):
scripts and CI jobs call it to check the tool, and it should cost no more than Python's own start-up."""

from __future__ import annotations

import os
import signal
import sys


def _interrupted(signum: int, frame: object) -> None:
    os._exit(130)


def run() -> None:
    signal.signal(signal.SIGINT, _interrupted)
    if sys.argv[1:] == ["--version"]:
        from aigo_apply import __version__

        try:
            sys.stdout.write(f"aigo-apply, version {__version__}\n")
            sys.stdout.flush()
        except (OSError, ValueError):  # a closed pipe: nothing to say, as the CLI does
            pass
        os._exit(0)
    from aigo_apply.cli.main import entry

    entry()


if __name__ == "__main__":
    run()
