#!/usr/bin/env python3
"""What the router's CPU weight does while the real vLLM CPU engine keeps the cores busy generating
(tests/helpers/tiny_model.py's model, streamed requests through the router, `--streams` at a time).
Side by side in one run, in alternating rounds on the same router, switched live with `docker update`:
the router at Docker's default weight (1024, an engine's, what it had before) and at the weight
aigo-apply gives it (desired/engines/router.py, ROUTER_CPU_SHARES). Per weight: the wall time of a
GET /metrics (Lua: every engine's page merged), a GET /v1/models (Lua) and a request HAProxy answers
itself (a 404, no Lua), and how long HAProxy's threads waited for a CPU during those requests (from
/proc/PID/task/*/schedstat, where this machine's /proc shows the container's processes). Busy loops
alone (containers spinning on every core) do not starve the router at either weight; the real engine
did. Bounded: the load stops after the rounds, or after `--seconds` at most.

    python bench/router_contention.py [--rounds 6] [--requests 10] [--streams 2]
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import common  # noqa: E402
import httpx  # noqa: E402

ROUTER_PORT = 18995
DEFAULT_SHARES = 1024  # Docker's own, an engine's


def _haproxy_pids(runtime, container: str) -> list[int]:
    """The router container's processes as this machine's /proc numbers them (empty where not visible)."""
    import docker.errors

    try:
        top = runtime.api.top(container, ps_args="-o pid")
    except docker.errors.APIError:  # only the wait line needs it
        return []
    return [int(row[0]) for row in top.get("Processes") or [] if row and row[0].isdigit()]


def _waited(pids: list[int]) -> float | None:
    """Seconds the processes' threads have waited on a run queue so far (None: not readable here)."""
    total, seen = 0, False
    for pid in pids:
        for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
            try:
                total += int(Path(path).read_text().split()[1])
                seen = True
            except (OSError, IndexError, ValueError):
                pass
    return total / 1e9 if seen else None


def _row(label: str, shares: int, times: list[float], failed: list[int]) -> str:
    times = sorted(times)
    p90 = times[int(0.9 * (len(times) - 1))]
    wrong = ", ".join(f"{failed.count(code)} x {code}" for code in sorted(set(failed))) or "0"
    return (
        f"| {label} | {shares} | {statistics.median(times) * 1000:.0f} | {p90 * 1000:.0f} | {times[-1] * 1000:.0f} "
        f"| {wrong} of {len(times)} |"
    )


def measure(rounds: int, requests: int, streams: int, seconds: float) -> tuple[list[str], str]:
    import threading

    from aigo_apply.adapters.docker_engine import DockerRuntime
    from aigo_apply.desired.engines.router import ROUTER_CPU_SHARES

    sys.path.insert(0, str(ROOT / "tests"))
    from helpers import tiny_model
    from helpers.real_engine import config_yaml, model_yaml

    runtime = DockerRuntime()
    folder = Path(tempfile.mkdtemp(prefix="aigo-bench-contention-"))
    tiny_model.make(folder / "tiny", tiny_model.IMAGE)
    project = "bc" + uuid.uuid4().hex[:8]
    path = folder / "aigo.yaml"
    router_line = f"router: {{image: aigo-haproxy, image_tag: bookworm, port: {ROUTER_PORT}}}"
    path.write_text(config_yaml(project, router_line, model_yaml("chat")), encoding="utf-8")
    env = common.cli_env(str(folder / "state"))
    router = f"aigo-{project}-router"
    base = f"http://127.0.0.1:{ROUTER_PORT}"
    stop = threading.Event()
    deadline = time.monotonic() + seconds

    def stream() -> None:  # one streamed completion after another, until the rounds end
        body = {"model": "chat", "prompt": "Hello!", "max_tokens": 480, "ignore_eos": True, "stream": True}
        with httpx.Client(timeout=300) as http:
            while not stop.is_set() and time.monotonic() < deadline:
                try:
                    with http.stream("POST", base + "/v1/completions", json=body) as answer:
                        for _ in answer.iter_bytes():
                            if stop.is_set():
                                break
                except httpx.HTTPError:  # the load goes on; the table counts only the measured requests
                    time.sleep(0.5)

    writers = [threading.Thread(target=stream, daemon=True) for _ in range(streams)]
    try:
        common.apply_or_exit(path, env)
        for writer in writers:
            writer.start()
        time.sleep(3)  # the engine is generating
        pids = _haproxy_pids(runtime, router)
        times: dict[tuple[str, int], list[float]] = {}
        waits: dict[int, list[float]] = {DEFAULT_SHARES: [], ROUTER_CPU_SHARES: []}
        failed: dict[tuple[str, int], list[int]] = {}
        with httpx.Client(timeout=60) as http:
            for _ in range(rounds):
                for shares in (DEFAULT_SHARES, ROUTER_CPU_SHARES):
                    runtime.api.update_container(router, cpu_shares=shares)
                    for _ in range(requests):
                        if time.monotonic() > deadline:
                            break
                        before = _waited(pids)
                        for label, where, status in (
                            ("GET /metrics", "/metrics", 200),
                            ("GET /v1/models", "/v1/models", 200),
                            ("GET /nothing (HAProxy's own 404)", "/nothing", 404),
                        ):
                            start = time.perf_counter()
                            answer = http.get(base + where)
                            times.setdefault((label, shares), []).append(time.perf_counter() - start)
                            if answer.status_code != status:  # counted and shown: what a scraper would get
                                failed.setdefault((label, shares), []).append(answer.status_code)
                        after = _waited(pids)
                        if before is not None and after is not None:
                            waits[shares].append(after - before)
                        time.sleep(0.1)
        if failed:  # HAProxy's own words for them, where it logged any
            sys.stderr.write(runtime.api.logs(router, tail=30).decode(errors="replace"))
        rows = [_row(label, shares, t, failed.get((label, shares), [])) for (label, shares), t in sorted(times.items())]
        if all(waits.values()):
            wait = ", ".join(
                f"{statistics.median(w) * 1000:.0f} ms at weight {s} (max {max(w) * 1000:.0f})"
                for s, w in waits.items()
            )
            wait = f"HAProxy's threads waited for a CPU, per three requests, median {wait}."
        else:
            wait = "(HAProxy's wait for a CPU is not readable on this machine: its /proc does not show the router's processes)"
        return rows, wait
    finally:
        stop.set()
        for writer in writers:
            writer.join(timeout=30)
        common.remove_project(runtime, project)


def run(rounds: int = 6, requests: int = 10, streams: int = 2, seconds: float = 300) -> str:
    cores = os.cpu_count() or 2
    load = common.load()
    rows, wait = measure(rounds, requests, streams, seconds)
    return "\n".join(
        [
            f"The router while the real vLLM CPU engine generates {streams} streams on {cores} cores (1-minute load "
            f"{load:.1f} before), {rounds} alternating rounds of {requests} of each request per CPU weight, the same "
            "router switched live",
            "",
            "| request through the router | router's CPU weight | p50 (ms) | p90 (ms) | max (ms) | other answers |",
            "|---|---:|---:|---:|---:|---|",
            *rows,
            "",
            wait,
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--streams", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=300, help="the longest the load runs")
    args = parser.parse_args()
    print(run(args.rounds, args.requests, args.streams, args.seconds))


if __name__ == "__main__":
    main()
