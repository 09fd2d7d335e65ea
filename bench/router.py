#!/usr/bin/env python3
"""The router's cost, side by side in one run: the same chat completion request sent straight to a
stub engine's published port and through the router (HAProxy), at 1 and 64 connections, with wrk on
127.0.0.1. Direct and routed cells alternate, each repeated; every figure is the median.

Three stub engines run behind one router:
  engine-like  holds each request 50 ms before answering, without using the CPU, as a real engine's
               GPU time does (a one-token completion in a batch of 64 on a GPU takes tens of
               milliseconds; longer replies take seconds). This is the
               case the targets are about: the router's added p50 under 1 ms, and at 64 connections
               at least 90% of direct throughput, also while the router reloads every 0.5 s.
  instant      answers at once, so wrk, docker-proxy, HAProxy and the Python stub all compete for the
               same cores; on a small machine that cell shows CPU contention more than the router.
  on-socket    the engine-like stub serving on its Unix socket, as every vLLM engine does unless it
               asks for a port: the router reaches it there (wrk cannot open a Unix socket, so its
               routed cells are compared with the engine-like direct ones, whose engine is the same).
The engine-like and instant stubs set `port:` so that wrk can reach them directly.
The router's own CPU time per request (HAProxy's user + system time over the requests it served) is
printed for each routed cell at 64 connections (at one connection its health checks would dominate):
that figure does not depend on how the machine is shared.

Needs `wrk` (apt-get install wrk) and scripts/setup.

    python bench/router.py [--seconds 5] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
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

REPLY_SECONDS = 0.05
ROUTER_PORT = 18999
STUBS = {"engine-like": ("engine", 18997, REPLY_SECONDS), "instant": ("instant", 18998, 0.0)}
ON_SOCKET = "onsocket"  # the engine-like stub on its Unix socket (no port: the default for vLLM models)
LUA = textwrap.dedent("""
    wrk.method = "POST"
    wrk.headers["Content-Type"] = "application/json"
    wrk.body = '{"messages": [{"role": "user", "content": "hi"}], "model": "%s", "max_tokens": 1}'
""")


def wrk(url: str, connections: int, seconds: int, script: str) -> dict:
    out = subprocess.run(
        [
            "wrk",
            "-t",
            "2" if connections > 1 else "1",
            "-c",
            str(connections),
            "-d",
            f"{seconds}s",
            "--latency",
            "-s",
            script,
            url,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    def ms(label: str) -> float:
        value, unit = re.search(rf"^\s+{label}\s+([\d.]+)(us|ms|s)\s*$", out, re.M).groups()
        return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]

    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket_errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    return {
        "p50": ms("50%"),
        "p99": ms("99%"),
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
        "requests": int(re.search(r"(\d+) requests in", out).group(1)),
        "errors": (int(errors.group(1)) if errors else 0)
        + (sum(int(n) for n in socket_errors.groups()) if socket_errors else 0),
    }


class RouterCpu:
    """HAProxy's CPU seconds (user + system, every process of the router container), read from /proc
    on the host, so a cell can report the router's own cost per request."""

    def __init__(self, runtime, container: str) -> None:
        self.runtime, self.container = runtime, container

    def seconds(self) -> float:
        total = 0.0
        for row in self.runtime.api.top(self.container, ps_args="-eo pid")["Processes"] or []:
            try:
                fields = Path(f"/proc/{row[0]}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # a worker that left during a reload
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total


def router_failures() -> dict[str, float]:
    """What the router's own /metrics say went wrong so far: 5xx answers it gave, and failed health
    checks (a server taken out under load would show as both)."""
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{ROUTER_PORT}/metrics", timeout=5).read().decode()
    counts = {"5xx answers": 0.0, "failed health checks": 0.0}
    for line in text.splitlines():
        if line.startswith('haproxy_frontend_http_responses_total{proxy="openai",code="5xx"}'):
            counts["5xx answers"] += float(line.split()[-1])
        elif line.startswith("haproxy_server_check_failures_total{"):
            counts["failed health checks"] += float(line.split()[-1])
    return counts


def reload_loop(runtime, container: str, stop: threading.Event, every: float = 0.5) -> int:
    """Reload the router (SIGUSR2 to the HAProxy master, as every route change does) until `stop`."""
    count = 0
    while not stop.wait(every):
        runtime.kill(container, "SIGUSR2")
        count += 1
    return count


def median(runs: list[dict]) -> dict:
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]} | {
        "errors": sum(r["errors"] for r in runs)
    }


def run(seconds: int = 5, repeat: int = 5) -> str:
    from aigo_apply.adapters.docker_engine import DockerRuntime

    project = "bench" + uuid.uuid4().hex[:6]
    runtime, router = DockerRuntime(), f"aigo-{project}-router"
    with tempfile.TemporaryDirectory() as tmp:
        models = [
            f"{alias}: {{source: {{path: m}}, context_length: 4096, gpus: none, port: {port}, "
            f'env: {{AIGO_STUB_REPLY_SECONDS: "{reply}"}}}}'
            for alias, port, reply in STUBS.values()
        ]
        models.append(
            f'{ON_SOCKET}: {{source: {{path: m}}, context_length: 4096, gpus: none, env: {{AIGO_STUB_REPLY_SECONDS: "{REPLY_SECONDS}"}}}}'
        )
        config = common.write_config(Path(tmp), project, "aigo-stub-engine:1", ROUTER_PORT, models)
        scripts = {}
        for alias in [a for a, _, _ in STUBS.values()] + [ON_SOCKET]:
            scripts[alias] = Path(tmp) / f"{alias}.lua"
            scripts[alias].write_text(LUA % alias)
        env = common.cli_env(str(Path(tmp) / "state"))
        cli = [sys.executable, "-m", "aigo_apply"]
        subprocess.run(cli + ["apply", "-f", str(config), "-y"], check=True, capture_output=True, env=env, cwd=ROOT)
        cpu = RouterCpu(runtime, router)
        try:
            cells = []
            for kind, (alias, port, _) in STUBS.items():
                for connections in (1, 64):
                    direct, routed, per_request, on_socket = [], [], [], []
                    for _ in range(repeat):  # alternate, so drift on the machine hits both paths alike
                        direct.append(
                            wrk(
                                f"http://127.0.0.1:{port}/v1/chat/completions",
                                connections,
                                seconds,
                                str(scripts[alias]),
                            )
                        )
                        before = cpu.seconds()
                        routed.append(
                            wrk(
                                f"http://127.0.0.1:{ROUTER_PORT}/v1/chat/completions",
                                connections,
                                seconds,
                                str(scripts[alias]),
                            )
                        )
                        per_request.append((cpu.seconds() - before) / max(routed[-1]["requests"], 1) * 1e6)
                        if kind == "engine-like":
                            url = f"http://127.0.0.1:{ROUTER_PORT}/v1/chat/completions"
                            on_socket.append(wrk(url, connections, seconds, str(scripts[ON_SOCKET])))
                    cells.append(
                        (
                            kind,
                            connections,
                            median(direct),
                            median(routed),
                            statistics.median(per_request),
                            median(on_socket) if on_socket else None,
                        )
                    )
                    if kind == "engine-like" and cells[-1][2]["p50"] < REPLY_SECONDS * 1000:
                        raise SystemExit(
                            "the stub engine answered before its reply time: its image predates "
                            "AIGO_STUB_REPLY_SECONDS; rebuild it with tests/images/build.sh"
                        )
            failures = router_failures()
            stop, under_reloads = threading.Event(), []
            alias = STUBS["engine-like"][0]
            with ThreadPoolExecutor(1) as pool:
                reloads = pool.submit(reload_loop, runtime, router, stop)
                for _ in range(repeat):
                    under_reloads.append(
                        wrk(f"http://127.0.0.1:{ROUTER_PORT}/v1/chat/completions", 64, seconds, str(scripts[alias]))
                    )
                stop.set()
                reload_count = reloads.result()
        finally:
            subprocess.run(cli + ["destroy", "-f", str(config), "-y"], capture_output=True, env=env, cwd=ROOT)
    return render(cells, median(under_reloads), reload_count, seconds, repeat, failures)


def render(
    cells: list, under_reloads: dict, reload_count: int, seconds: int, repeat: int, failures: dict[str, float]
) -> str:
    lines = [
        f"router vs direct, wrk on 127.0.0.1, median of {repeat} alternating runs of {seconds} s per cell; "
        f"the engine-like stub holds each request {REPLY_SECONDS * 1000:.0f} ms, the instant one answers at once",
        "",
        "| stub | connections | path | p50 (ms) | p99 (ms) | req/s | errors | router CPU per request (µs) |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]

    def row(kind: str, connections: int, path: str, r: dict, cpu: str = "") -> str:
        return (
            f"| {kind} | {connections} | {path} | {r['p50']:.2f} | {r['p99']:.2f} | {r['rps']:.0f} | "
            f"{r['errors']} | {cpu} |"
        )

    for kind, connections, direct, routed, per_request, on_socket in cells:
        lines.append(row(kind, connections, "direct", direct))
        lines.append(row(kind, connections, "router", routed, f"{per_request:.0f}" if connections > 1 else ""))
        if on_socket is not None:
            lines.append(row(kind, connections, "router -> the engine's Unix socket", on_socket))
    lines.append(row("engine-like", 64, f"router, reloaded every 0.5 s ({reload_count} reloads)", under_reloads))
    lines.append("")
    for kind, connections, direct, routed, _, on_socket in cells:
        if on_socket is not None:
            added, share = on_socket["p50"] - direct["p50"], 100 * on_socket["rps"] / direct["rps"]
            lines.append(
                f"- {kind} on its Unix socket, {connections} connection(s): router adds {added:+.2f} ms at p50 "
                f"over the direct port; throughput {share:.0f}% of direct"
            )
        added, share = routed["p50"] - direct["p50"], 100 * routed["rps"] / direct["rps"]
        verdict = ""
        if kind == "engine-like":
            met = added < 1.0 and (connections == 1 or share >= 90)
            verdict = " — target met" if met else " — TARGET NOT MET"
        lines.append(
            f"- {kind}, {connections} connection(s): router adds {added:+.2f} ms at p50; "
            f"throughput {share:.0f}% of direct{verdict}"
        )
    engine_64 = next(d for k, c, d, *_ in cells if k == "engine-like" and c == 64)
    lines.append(
        f"- engine-like, 64 connections while reloading: {under_reloads['errors']} errors, throughput "
        f"{100 * under_reloads['rps'] / engine_64['rps']:.0f}% of direct"
    )
    lines.append(
        "- the router's own counters over the cells without reloads: "
        + ", ".join(f"{int(n)} {what}" for what, n in failures.items())
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if not shutil.which("wrk"):
        sys.exit("bench/router.py needs wrk: apt-get install wrk")
    print(run(args.seconds, args.repeat))


if __name__ == "__main__":
    main()
