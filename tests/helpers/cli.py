"""The real command line in a child process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers.paths import ROOT


def run_cli(
    *args: str, env: dict | None = None, cwd: Path | None = None, timeout: float = 60
) -> subprocess.CompletedProcess:
    """Run the real `aigo-apply` entry point in a child process (real exit codes, real output)."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("AIGO_FILE", None) if env is None or "AIGO_FILE" not in env else None
    return subprocess.run(
        [sys.executable, "-m", "aigo_apply", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd or ROOT,
        timeout=timeout,
    )
