#!/usr/bin/env python3
"""Check `python3 -m sglang.launch_server` command lines with SGLang 0.5.6's own server-argument code.

Runs inside the SGLang venv (scripts/setup-sglang-venv), never in aigo-apply's own: it imports sglang.
Reads a JSON list of argument lists (what follows `-m sglang.launch_server`) on stdin and writes one JSON
result per command line on stdout: {"accepted": bool, "stage": ..., "error": ..., "deferred": [...]}.

The stages are the ones SGLang runs before it loads any weights, in its order:
  parse      what sglang.launch_server's prepare_server_args does: an argparse parser filled by
             ServerArgs.add_cli_args, then parse_args (argparse types and choices);
  post_init  ServerArgs.__post_init__ (run by ServerArgs.from_cli_args), one step at a time, in the
             order its own source calls them;
  launch     ServerArgs.check_server_args, which the engine runs before it starts the scheduler.
Two things differ from a GPU host, and both are SGLang's hardware probes, not our values:
  - the device: SGLang detects "cuda" on a GPU host and raises "No accelerator (CUDA, XPU, HPU) is
    available" here, so a line without --device gets the "cuda" detection would have found;
  - the NVIDIA driver: some steps import sgl_kernel (SGLang's CUDA kernels), whose import needs the
    driver's libcuda.so.1 (and after it the model's config.json, read from --model-path). The venv leaves
    sgl_kernel out; a step that stops on that import is skipped, named in `deferred`, and the rest run.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import json
import re
import sys
from typing import Any

NEEDS_GPU_DRIVER = {"sgl_kernel"}  # modules whose import needs the NVIDIA driver: their steps are deferred


def parse(argv: list[str]) -> argparse.Namespace:
    """prepare_server_args' parser; argparse prints its complaint and exits: turn that into a ValueError."""
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return parser.parse_args(argv)
    except SystemExit as exc:
        text = err.getvalue().strip()
        raise ValueError(text.splitlines()[-1] if text else str(exc)) from None


def post_init_steps() -> list[str]:
    """The methods ServerArgs.__post_init__ calls, in its order (read from SGLang's own source)."""
    from sglang.srt.server_args import ServerArgs

    steps = re.findall(r"self\.(_handle_\w+)\(", inspect.getsource(ServerArgs.__post_init__))
    if len(steps) < 10 or steps[0] != "_handle_deprecated_args":
        raise RuntimeError(f"ServerArgs.__post_init__ no longer reads as this script expects: {steps}")
    return steps


def server_args(raw: argparse.Namespace) -> Any:
    """ServerArgs.from_cli_args' object, before __post_init__ runs: SGLang's own __post_init__ returns at
    once for the model path "dummy", so that is the path while the object is built, then the real one."""
    from sglang.srt.server_args import ServerArgs

    model_path, raw.model_path = raw.model_path, "dummy"
    args = ServerArgs.from_cli_args(raw)
    args.model_path = model_path
    return args


def needs_gpu_driver(exc: BaseException) -> bool:
    """True when the step stopped on importing a module that needs the NVIDIA driver."""
    return isinstance(exc, ImportError) and (exc.name or "").split(".")[0] in NEEDS_GPU_DRIVER


def run_step(args: Any, name: str, deferred: list[str]) -> None:
    """One method of ServerArgs; a stop on the driver-only import is deferred, anything else is raised."""
    from sglang.srt.utils.common import get_device_memory_capacity

    method = getattr(args, name)
    try:
        if inspect.signature(method).parameters:  # _handle_gpu_memory_settings(gpu_mem), as __post_init__ calls it
            method(get_device_memory_capacity(args.device))
        else:
            method()
    except ImportError as exc:
        if not needs_gpu_driver(exc):
            raise
        deferred.append(f"{name}: {type(exc).__name__}: {exc}")


def check(argv: list[str], steps: list[str]) -> dict[str, Any]:
    """Run every stage on one command line; the first refusal ends it."""
    stage = "parse"
    deferred: list[str] = []
    try:
        raw = parse(argv)
        if raw.device is None:
            raw.device = "cuda"  # what get_device() detects on a GPU host
        args = server_args(raw)
        stage = "post_init"
        if args.model_path.lower() not in ("none", "dummy"):  # __post_init__ skips dummy models, as here
            for name in steps:
                run_step(args, name, deferred)
        stage = "launch"
        run_step(args, "check_server_args", deferred)
    except Exception as exc:  # every refusal SGLang raises (argparse, assert, ValueError) is a reason to report
        return {"accepted": False, "stage": stage, "error": f"{type(exc).__name__}: {exc}", "deferred": deferred}
    return {"accepted": True, "stage": "done", "error": None, "deferred": deferred}


def main() -> int:
    """stdin: JSON list of argument lists; stdout: JSON list of results, same order."""
    command_lines = json.load(sys.stdin)
    steps = post_init_steps()
    results = [check(argv, steps) for argv in command_lines]
    json.dump(results, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
