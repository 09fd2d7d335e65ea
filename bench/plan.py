#!/usr/bin/env python3
"""How long `aigo-apply plan` and a no-op `aigo-apply apply` take, and how many Docker API calls a
plan makes, with N models whose containers are all running (the local idle image stands in for the
engine; nothing needs a GPU), side by side with Debian's docker-compose converging an equivalent
compose file (same image, command, published ports, N containers) with nothing to change.

Prints a markdown table: for each N, the median wall time of the real CLI (a fresh process each
time, as a user runs it), the planning work in-process (load + validate + observe + plan), the
no-op apply, `docker-compose up -d` with nothing to change, and the Docker API calls per plan,
which must not grow with N.

    python bench/plan.py                 # N = 1, 10, 50, 5 runs each
    python bench/plan.py --sizes 1,50,200 --repeat 9
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common

from aigo_apply.adapters.docker_engine import DockerRuntime
from aigo_apply.app.planning import load_desired, make_plan


def write_config(folder: Path, project: str, n: int) -> Path:
    return common.write_config(
        folder,
        project,
        "aigo-test-idle:1",
        18996,
        [
            f"model-{i:03d}: {{source: {{path: m}}, context_length: 4096, gpus: none, vllm: {{max_num_seqs: {8 + i % 4}}}}}"
            for i in range(n)
        ],
    )


def measure(runtime: DockerRuntime, n: int, repeat: int, peer: bool = True) -> dict:
    project = "bench" + uuid.uuid4().hex[:6]
    with tempfile.TemporaryDirectory() as tmp:
        env = common.cli_env(os.path.join(tmp, "state"))
        os.environ["AIGO_STATE_DIR"] = env["AIGO_STATE_DIR"]  # the in-process plans read the same state
        path = write_config(Path(tmp), project, n)
        try:
            for model in load_desired(str(path)).models.values():
                runtime.start(runtime.create(model.container, {}))
            # the router: made by a real apply, which finds the engines as they should be
            subprocess.run(
                [sys.executable, "-m", "aigo_apply", "apply", "-f", str(path), "-y"],
                check=True,
                capture_output=True,
                env=env,
            )
            compose = None
            if peer and shutil.which("docker-compose"):
                compose = Compose(Path(tmp), project, load_desired(str(path)))
                if not compose.ready:
                    compose.down()
                    compose = None
            cli, core, calls, noop, peer = [], [], [], [], []
            for _ in range(repeat):
                start = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, "-m", "aigo_apply", "apply", "-f", str(path), "-y"],
                    capture_output=True,
                    text=True,
                    env=env,
                )
                noop.append(time.perf_counter() - start)
                assert done.returncode == 0 and "No changes." in done.stdout, done.stdout + done.stderr
                if compose:
                    peer.append(compose.up())
                start = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, "-m", "aigo_apply", "plan", "-f", str(path), "--detailed-exitcode"],
                    capture_output=True,
                    text=True,
                    env=env,
                )
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
            if compose:
                compose.down()
    return {
        "n": n,
        "cli": statistics.median(cli),
        "core": statistics.median(core),
        "calls": max(calls),
        "noop": statistics.median(noop),
        "compose": statistics.median(peer) if peer else None,
    }


class Compose:
    """The same N containers declared for docker-compose (v1, Debian's package): image, command,
    127.0.0.1 ports, ipc and restart policy as aigo-apply makes them, on ports of their own."""

    def __init__(self, folder: Path, project: str, desired):
        self.file, self.project = folder / "docker-compose.yml", project + "c"
        services = {}
        for i, model in enumerate(desired.models.values()):
            c = model.container
            services[f"s{i:03d}"] = {
                "image": c.image,
                "command": list(c.command),
                "ipc": "host",
                "restart": "unless-stopped",
                "ports": [f"127.0.0.1:{30000 + i}:{c.container_port}"],
            }
        self.file.write_text(json.dumps({"version": "2.4", "services": services}))
        # docker-compose 1.x stalls creating a couple of hundred services in one `up` (its parallel
        # executor; docker/compose#8161, #7486): create them 40 at a time, each batch bounded. The timed
        # `up -d` that follows covers every service at once, with nothing left to create.
        names, self.ready = sorted(services), True
        for start in range(0, len(names), 40):
            try:
                done = subprocess.run(
                    self._cmd("up", "-d", *names[start : start + 40]), capture_output=True, timeout=300
                )
            except subprocess.TimeoutExpired:
                done = None
            if not done or done.returncode != 0:
                self.ready = False
                return

    def _cmd(self, *args: str) -> list[str]:
        return ["docker-compose", "-p", self.project, "-f", str(self.file), *args]

    def up(self) -> float:
        start = time.perf_counter()
        done = subprocess.run(self._cmd("up", "-d"), capture_output=True, text=True, timeout=300)
        elapsed = time.perf_counter() - start
        assert done.returncode == 0 and "Creating" not in done.stderr and "Recreating" not in done.stderr, done.stderr
        return elapsed

    def down(self) -> None:
        subprocess.run(self._cmd("down", "-t", "1"), capture_output=True)


def run(sizes: str = "1,10,50", repeat: int = 5, peer_max: int = 200) -> str:
    """The markdown table (and a failure line when API calls grow with N). docker-compose runs
    beside up to `peer_max` models (n/a above it, or when it does not finish creating them)."""
    runtime = DockerRuntime()
    rows = [measure(runtime, int(n), repeat, int(n) <= peer_max) for n in sizes.split(",")]
    lines = [
        f"plan and no-op apply with N running models vs `docker-compose up -d` with nothing to change, "
        f"median of {repeat} runs",
        "",
        "| models | `aigo-apply plan` (s) | plan work in-process (s) | no-op `aigo-apply apply` (s) | "
        "no-op `docker-compose up -d` (s) | apply / compose | Docker API calls per plan |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        peer = f"{r['compose']:.3f}" if r["compose"] is not None else "n/a"
        ratio = f"{r['noop'] / r['compose']:.2f}" if r["compose"] else "n/a"
        lines.append(
            f"| {r['n']} | {r['cli']:.3f} | {r['core']:.3f} | {r['noop']:.3f} | {peer} | {ratio} | {r['calls']} |"
        )
    if len({r["calls"] for r in rows}) != 1:
        lines.append("\nFAIL: the number of Docker API calls grows with the number of models")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,10,50")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    text = run(args.sizes, args.repeat)
    print(text)
    if "FAIL" in text:
        sys.exit(1)


if __name__ == "__main__":
    main()
