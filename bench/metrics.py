#!/usr/bin/env python3
"""What one scrape of the router's merged /metrics costs, at 1 and 20 engines (stub engines writing
vLLM's families), side by side in one run with the reference: reading every engine's own /metrics
directly (in parallel, over their sockets, as the router does) and the router's own HAProxy page
alone. Median and p90 wall time of a scrape, and the page's size.

    python bench/metrics.py [--sizes 1,20] [--repeat 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import common  # noqa: E402
import httpx  # noqa: E402

ROUTER_PORT = 18997


def _timed(call, repeat: int) -> tuple[float, float, int]:
    """(median, p90) milliseconds of `repeat` calls, and the size of the last answer."""
    times, size = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        size = call()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.9 * (len(times) - 1))], size


def measure(n: int, repeat: int) -> list[str]:
    from aigo_apply.adapters.docker_engine import DockerRuntime
    from aigo_apply.adapters.engine_http import EngineClient
    from aigo_apply.desired.types import EngineAddress

    runtime = DockerRuntime()
    folder = Path(tempfile.mkdtemp(prefix="aigo-bench-metrics-"))
    project = "bm" + uuid.uuid4().hex[:8]
    models = [f"m{i}: {{source: {{path: m}}, context_length: 4096, gpus: none}}" for i in range(n)]
    path = common.write_config(folder, project, "aigo-stub-engine:1", ROUTER_PORT, models)
    env = common.cli_env(str(folder / "state"))
    try:
        common.apply_or_exit(path, env, f"N={n}")
        url = f"http://127.0.0.1:{ROUTER_PORT}/metrics"
        sockets = folder / "state" / project / "sockets"
        clients = [EngineClient(EngineAddress(socket=str(sockets / f"m{i}" / "engine.sock")), 5) for i in range(n)]
        pool = ThreadPoolExecutor(max_workers=n)
        with httpx.Client(timeout=30) as http:
            http.get(url)  # warm: the first scrape after a start pays for the workers' first Lua run

            def merged() -> int:
                return len(http.get(url).content)

            def direct() -> int:
                return sum(pool.map(lambda c: len(c.get("/metrics").content), clients))

            rows = []
            for label, call in (("router's merged /metrics", merged), ("each engine's /metrics, directly", direct)):
                p50, p90, size = _timed(call, repeat)
                rows.append(f"| {n} | {label} | {p50:.1f} | {p90:.1f} | {size / 1024:.0f} |")
        pool.shutdown()
        for c in clients:
            c.close()
        return rows
    finally:
        common.remove_project(runtime, project)


def run(sizes: str = "1,20", repeat: int = 30) -> str:
    rows = []
    for n in (int(s) for s in sizes.split(",")):
        rows += measure(n, repeat)
    return "\n".join(
        [
            f"A scrape of the router's one /metrics (stub engines writing vLLM's families), {repeat} scrapes each,",
            "beside reading every engine's own /metrics directly in parallel (what the router does for each scrape)",
            "",
            "| engines | scrape | p50 (ms) | p90 (ms) | size (KiB) |",
            "|---:|---|---:|---:|---:|",
            *rows,
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,20")
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    print(run(args.sizes, args.repeat))


if __name__ == "__main__":
    main()
