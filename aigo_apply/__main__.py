"""`python -m aigo_apply` and the `aigo-apply` console script. Ctrl-C exits 130 quietly, without a
traceback, at any moment: while the program loads and after the CLI's error boundary (cli/main.py)
has finished, this module's handler ends the process at once; inside the boundary, Ctrl-C is a
KeyboardInterrupt that the boundary reports as "interrupted". Every argument, `--version` included,
is parsed by click."""

from __future__ import annotations

import os
import signal


def _interrupted(signum: int, frame: object) -> None:
    os._exit(130)


def run() -> None:
    signal.signal(signal.SIGINT, _interrupted)
    from aigo_apply.cli.main import entry

    entry()


if __name__ == "__main__":
    run()
