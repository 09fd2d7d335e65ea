"""`python -m aigo_apply` and the `aigo-apply` console script. A Ctrl-C that lands while the
program is still loading exits 130 quietly, without a traceback; once the CLI is loaded, its own
error boundary (cli/main.py) handles interrupts."""

from __future__ import annotations

import os
import signal


def _interrupted_while_loading(signum: int, frame: object) -> None:
    os._exit(130)


def run() -> None:
    signal.signal(signal.SIGINT, _interrupted_while_loading)
    from aigo_apply.cli.main import entry

    entry()


if __name__ == "__main__":
    run()
