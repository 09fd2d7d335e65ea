#!/usr/bin/env python3
"""The router's cost, side by side in one run: the same chat completion request sent straight to a
stub engine's port and through the router (HAProxy), at 1 and 64 connections, with wrk on 127.0.0.1.

Prints a markdown table of p50 and p99 latency and throughput for each, plus the router's added p50
and its throughput as a share of direct. Targets: added p50 under 1 ms; at 64 connections at least
90% of direct throughput. The stub engine is a small Python server, so absolute numbers are the
stub's; the ratios are the router's. Needs `wrk` (apt-get install wrk) and scripts/setup.

    python bench/router.py [--seconds 10]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
LUA = textwrap.dedent("""
    wrk.method = "POST"
    wrk.headers["Content-Type"] = "application/json"
    wrk.body = '{"messages": [{"role": "user", "content": "hi"}], "model": "bench", "max_tokens": 1}'
""")


def wrk(url: str, connections: int, seconds: int, script: str) -> dict:
    out = subprocess.run(["wrk", "-t", "2" if connections > 1 else "1", "-c", str(connections), "-d", f"{seconds}s",
                          "--latency", "-s", script, url], capture_output=True, text=True, check=True).stdout
    def ms(label: str) -> float:
        value, unit = re.search(rf"^\s+{label}\s+([\d.]+)(us|ms|s)\s*$", out, re.M).groups()
        return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket_errors = re.search(r"Socket errors: (.*)", out)
    return {"p50": ms("50%"), "p99": ms("99%"), "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
            "errors": int(errors.group(1)) if errors else 0, "socket_errors": socket_errors.group(1) if socket_errors else ""}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=10)
    args = parser.parse_args()
    if not shutil.which("wrk"):
        sys.exit("bench/router.py needs wrk: apt-get install wrk")
    print(run(args.seconds))


def reload_loop(container: str, stop: threading.Event, every: float = 0.5) -> int:
    """Reload the router (SIGUSR2 to the HAProxy master, as every route change does) until `stop`."""
    from aigo_apply.docker_runtime import DockerRuntime

    runtime, count = DockerRuntime(), 0
    while not stop.wait(every):
        runtime.kill(container, "SIGUSR2")
        count += 1
    return count


def run(seconds: int = 10) -> str:
    args = argparse.Namespace(seconds=seconds)
    project, router_port = "bench" + uuid.uuid4().hex[:6], 18999
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "m").mkdir()
        config = Path(tmp) / "aigo.yaml"
        config.write_text(textwrap.dedent(f"""
            version: 1
            project: {project}
            engines: {{vllm: {{image: aigo-stub-engine, image_tag: "1"}}}}
            router: {{image: aigo-haproxy, image_tag: bookworm, port: {router_port}}}
            models:
              bench: {{source: {{path: m}}, context_length: 4096, gpus: none, port: 18998}}
            """))
        script = Path(tmp) / "chat.lua"
        script.write_text(LUA)
        env = common.cli_env(str(Path(tmp) / "state"))
        cli = [sys.executable, "-m", "aigo_apply"]
        subprocess.run(cli + ["apply", "-f", str(config), "-y"], check=True, capture_output=True, env=env, cwd=ROOT)
        try:
            rows = []
            for connections in (1, 64):
                direct = wrk("http://127.0.0.1:18998/v1/chat/completions", connections, args.seconds, str(script))
                routed = wrk(f"http://127.0.0.1:{router_port}/v1/chat/completions", connections, args.seconds, str(script))
                rows.append((connections, direct, routed))
            stop = threading.Event()
            with ThreadPoolExecutor(1) as pool:
                reloads = pool.submit(reload_loop, f"aigo-{project}-router", stop)
                under_reloads = wrk(f"http://127.0.0.1:{router_port}/v1/chat/completions", 64, args.seconds, str(script))
                stop.set()
                reload_count = reloads.result()
        finally:
            subprocess.run(cli + ["destroy", "-f", str(config), "-y"], capture_output=True, env=env, cwd=ROOT)
    lines = [f"router vs direct, stub engine, wrk {args.seconds} s per cell on 127.0.0.1", "",
             "| connections | path | p50 (ms) | p99 (ms) | req/s | errors |", "|---:|---|---:|---:|---:|---:|"]
    cells = [(c, name, r) for c, direct, routed in rows for name, r in (("direct", direct), ("router", routed))]
    cells.append((64, f"router, reloaded every 0.5 s ({reload_count} reloads)", under_reloads))
    for connections, name, r in cells:
        lines.append(f"| {connections} | {name} | {r['p50']:.2f} | {r['p99']:.2f} | {r['rps']:.0f} | "
                     f"{r['errors']}{' ' + r['socket_errors'] if r['socket_errors'] else ''} |")
    lines.append("")
    for connections, direct, routed in rows:
        lines.append(f"- {connections} connection(s): router adds {routed['p50'] - direct['p50']:+.2f} ms at p50; "
                     f"throughput {100 * routed['rps'] / direct['rps']:.0f}% of direct")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
