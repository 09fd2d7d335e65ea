#!/usr/bin/env python3
"""How long `aigo-apply plan` takes, and how many Docker API calls it makes, with N models whose
containers are all running (the local idle image stands in for the engine; nothing needs a GPU).

Prints a markdown table: for each N, the median wall time of the real CLI (`aigo-apply plan`,
a fresh process each time, as a user runs it), the median time of the planning work in-process
(load + validate + observe + plan), and the Docker API calls per plan, which must not grow with N.

    python bench/plan.py                 # N = 1, 10, 50, 5 runs each
    python bench/plan.py --sizes 1,50,200 --repeat 9
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
from aigo_apply.docker_runtime import DockerRuntime  # noqa: E402
from aigo_apply.session import load_desired, make_plan  # noqa: E402

def write_config(folder: Path, project: str, n: int) -> Path:
    return common.write_config(folder, project, "aigo-test-idle:1", 18996, [
        f"model-{i:03d}: {{source: {{path: m}}, context_length: 4096, gpus: none, vllm: {{max_num_seqs: {8 + i % 4}}}}}"
        for i in range(n)])


def measure(runtime: DockerRuntime, n: int, repeat: int) -> dict:
    project = "bench" + uuid.uuid4().hex[:6]
    with tempfile.TemporaryDirectory() as tmp:
        env = common.cli_env(os.path.join(tmp, "state"))
        os.environ["AIGO_STATE_DIR"] = env["AIGO_STATE_DIR"]  # the in-process plans read the same state
        path = write_config(Path(tmp), project, n)
        try:
            for model in load_desired(str(path)).models.values():
                runtime.start(runtime.create(model.container, {}))
            # the router: made by a real apply, which finds the engines as they should be
            subprocess.run([sys.executable, "-m", "aigo_apply", "apply", "-f", str(path), "-y"], check=True,
                           capture_output=True, env=env)
            cli, core, calls = [], [], []
            for _ in range(repeat):
                start = time.perf_counter()
                done = subprocess.run([sys.executable, "-m", "aigo_apply", "plan", "-f", str(path), "--detailed-exitcode"],
                                      capture_output=True, text=True, env=env)
                cli.append(time.perf_counter() - start)
                assert done.returncode == 0 and done.stdout.startswith("No changes."), done.stdout + done.stderr
                before = runtime.calls
                start = time.perf_counter()
                plan = make_plan(str(path), runtime=runtime)
                core.append(time.perf_counter() - start)
                calls.append(runtime.calls - before)
                assert not plan.has_changes
        finally:
            common.remove_project(runtime, project)
    return {"n": n, "cli": statistics.median(cli), "core": statistics.median(core), "calls": max(calls)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,10,50")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    runtime = DockerRuntime()
    rows = [measure(runtime, int(n), args.repeat) for n in args.sizes.split(",")]
    print(f"plan with N running models, median of {args.repeat} runs\n")
    print("| models | `aigo-apply plan` wall (s) | plan work in-process (s) | Docker API calls per plan |")
    print("|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['n']} | {r['cli']:.3f} | {r['core']:.3f} | {r['calls']} |")
    if len({r["calls"] for r in rows}) != 1:
        sys.exit("FAIL: the number of Docker API calls grows with the number of models")


if __name__ == "__main__":
    main()
