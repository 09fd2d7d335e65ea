#!/usr/bin/env python3
"""What `aigo-apply apply` adds on top of the engines' own start time, side by side in one run.

The engines are stub engines with a fixed warm-up (AIGO_STUB_LOAD_SECONDS), no GPU. For 1 model and
for 4 models (each `gpus: none`, so they start in parallel, as models on disjoint GPUs do):

  direct   create + start the same containers through the Docker API and poll /health every 10 ms
           until every engine answers: the engines' own start time, with no tool in the way;
  apply    the real CLI, `aigo-apply apply -y` from nothing to ready (a fresh process, as a user runs it);
  no-op    `aigo-apply apply -y` again with nothing to change.

Overhead = apply - direct. Targets: under 1 s for one model, under 2 s for four, no-op under 1 s.

    python bench/apply.py [--warmup 3] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common

from aigo_apply.adapters.docker_engine import DockerRuntime
from aigo_apply.desired.types import EngineAddress
from aigo_apply.platforms.docker.planning import load_desired


def write_config(folder: Path, project: str, n: int, warmup: float) -> Path:
    return common.write_config(
        folder,
        project,
        "aigo-stub-engine:1",
        18997,
        [
            f'm{i}: {{source: {{path: m}}, context_length: 4096, gpus: none, env: {{AIGO_STUB_LOAD_SECONDS: "{warmup}"}}}}'
            for i in range(n)
        ],
    )


def wait_health(address: EngineAddress) -> None:
    common.wait_health(address)


def direct(runtime: DockerRuntime, path: Path) -> float:
    models = list(load_desired(str(path)).models.values())
    start = time.perf_counter()

    def one(model):
        runtime.start(runtime.create(model.container, dict(model.container.env)))
        wait_health(EngineAddress.of(model.spec))

    with ThreadPoolExecutor(len(models)) as pool:
        list(pool.map(one, models))
    return time.perf_counter() - start


def cli(path: Path, env: dict) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "aigo_apply", "apply", "-f", str(path), "-y"], capture_output=True, text=True, env=env
    )
    elapsed = time.perf_counter() - start
    assert done.returncode == 0, done.stdout + done.stderr
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--warmup", type=float, default=3.0, help="stub engine load time in seconds")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(run(args.warmup, args.repeat))


def run(warmup: float = 3.0, repeat: int = 3) -> str:
    args = argparse.Namespace(warmup=warmup, repeat=repeat)
    runtime = DockerRuntime()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        env = common.cli_env(os.path.join(tmp, "state"))
        for n in (1, 4):
            base, applied, noop = [], [], []
            for _ in range(args.repeat):
                project = "bench" + uuid.uuid4().hex[:6]
                path = write_config(Path(tmp), project, n, args.warmup)
                try:
                    base.append(direct(runtime, path))
                finally:
                    common.remove_project(runtime, project)
                try:
                    applied.append(cli(path, env))
                    noop.append(cli(path, env))
                finally:
                    common.remove_project(runtime, project)
            rows.append((n, statistics.median(base), statistics.median(applied), statistics.median(noop)))
    lines = [
        f"apply overhead, stub engines with a {args.warmup:g} s warm-up, median of {args.repeat} runs",
        "",
        "| models | direct: docker + engine ready (s) | `aigo-apply apply` (s) | overhead (s) | no-op apply (s) |",
        "|---:|---:|---:|---:|---:|",
    ]
    lines += [f"| {n} | {b:.2f} | {a:.2f} | {a - b:.2f} | {z:.2f} |" for n, b, a, z in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
