#!/usr/bin/env python3
"""Time to first token of a model in a swap group that sleeps, against a cold start, on
the stub engine, through the real router (HAProxy 2.6 and its Lua), side by side in one run.

Two on-demand stub models `alpha` and `beta` in one swap group (max_awake 1, `gpus: none`). The stub's
own delays stand in for the engine's: AIGO_STUB_LOAD_SECONDS (a cold start: loading the weights) and
AIGO_STUB_SLEEP_SECONDS / AIGO_STUB_WAKE_SECONDS (vLLM's /sleep and /wake_up at level 1). So the
figures show what aigo-apply's router adds around a wake, not what a real engine takes: vLLM's sleep
mode runs on CUDA only, and no GPU was here (its real wake time is unmeasured by this script).

  awake        a streamed chat completion for the model that is awake: the first token through the router;
  asleep       the same for the model that sleeps: the router puts the awake one to sleep (its requests
               finished), wakes this one, then forwards; each row alternates the two models;
  cold start   the model's container stopped, then `docker start` and the first token, polled the way a
               client retries (what running the model without a swap group costs after it was stopped).

    python bench/swap.py [--load 3] [--wake 0.3] [--sleep 0.1] [--repeat 5]
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

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common

from aigo_apply.adapters.docker_engine import DockerRuntime

ROUTER_PORT = 18996


def write_config(folder: Path, project: str, load: float, wake: float, sleep: float) -> Path:
    env = f'AIGO_STUB_LOAD_SECONDS: "{load}", AIGO_STUB_WAKE_SECONDS: "{wake}", AIGO_STUB_SLEEP_SECONDS: "{sleep}"'
    return common.write_config(
        folder,
        project,
        "aigo-stub-engine:1",
        ROUTER_PORT,
        [
            f"{alias}: {{source: {{path: m}}, context_length: 4096, gpus: none, swap_group: bench, env: {{{env}}}}}"
            for alias in ("alpha", "beta")
        ],
    )


def first_token(http: httpx.Client, url: str, model: str, deadline: float = 120.0) -> float:
    """Seconds from sending a streamed chat completion to its first content event; a refused or
    unanswered attempt (an engine still loading) is retried until `deadline`."""
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream": True}
    start = time.perf_counter()
    while time.perf_counter() - start < deadline:
        try:
            with http.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=60) as reply:
                if reply.status_code == 200:
                    for line in reply.iter_lines():
                        if line.startswith("data: ") and '"content"' in line:
                            return time.perf_counter() - start
        except httpx.HTTPError:
            pass
        time.sleep(0.01)
    raise TimeoutError(f"no first token from {model} within {deadline} s")


def engine(state: str, project: str, alias: str) -> httpx.Client:
    """A client straight to an engine's Unix socket (on-demand engines publish no port)."""
    socket = os.path.join(state, project, "sockets", alias, "engine.sock")
    return httpx.Client(transport=httpx.HTTPTransport(uds=socket), base_url="http://engine", timeout=60)


def asleep(direct: httpx.Client) -> bool:
    return direct.get("/is_sleeping").json()["is_sleeping"]


def run(load: float = 3.0, wake: float = 0.3, sleep: float = 0.1, repeat: int = 5) -> str:
    runtime = DockerRuntime()
    project = "bswap" + uuid.uuid4().hex[:6]
    awake_t, asleep_t, cold_t = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        env = common.cli_env(os.path.join(tmp, "state"))
        path = write_config(Path(tmp), project, load, wake, sleep)
        try:
            done = subprocess.run(
                [sys.executable, "-m", "aigo_apply", "apply", "-f", str(path), "-y"],
                capture_output=True,
                text=True,
                env=env,
            )
            assert done.returncode == 0, done.stdout + done.stderr
            router = f"http://127.0.0.1:{ROUTER_PORT}"
            direct = {alias: engine(os.path.join(tmp, "state"), project, alias) for alias in ("alpha", "beta")}
            with httpx.Client() as http:
                for i in range(repeat):
                    for alias in ("beta", "alpha") if i % 2 == 0 else ("alpha", "beta"):
                        if not asleep(direct[alias]):  # the other one: make it the sleeping one first
                            continue
                        awake_alias = "alpha" if alias == "beta" else "beta"
                        awake_t.append(first_token(http, router, awake_alias))
                        asleep_t.append(first_token(http, router, alias))
                        break
                name = f"aigo-{project}-alpha"
                for _ in range(max(1, repeat // 2)):
                    runtime.stop(name, timeout=10)
                    start = time.perf_counter()
                    runtime.start(name)
                    first_token(direct["alpha"], "http://engine", "alpha")
                    cold_t.append(time.perf_counter() - start)
        finally:
            common.remove_project(runtime, project)
    med = statistics.median
    lines = [
        f"time to first token on the stub engine (cold start: a {load:g} s load; /wake_up {wake:g} s, /sleep "
        f"{sleep:g} s), through the router; median of {len(asleep_t)} swaps and {len(cold_t)} cold starts",
        "",
        "| path | first token (s) | min (s) | max (s) |",
        "|---|---:|---:|---:|",
    ]
    for label, values in (
        ("awake model", awake_t),
        ("asleep model (swap: sleep + wake)", asleep_t),
        ("cold start", cold_t),
    ):
        lines.append(f"| {label} | {med(values):.3f} | {min(values):.3f} | {max(values):.3f} |")
    overhead = med(asleep_t) - wake - sleep - med(awake_t)
    lines += [
        "",
        f"- the router's swap adds {overhead * 1000:.0f} ms beyond the stub's own sleep and wake delays "
        "(draining, two /is_sleeping reads, the calls themselves)",
        f"- an asleep model's first token came {med(cold_t) / med(asleep_t):.1f}x sooner than a cold start's",
        "- a real vLLM's wake is unmeasured here: its sleep mode is CUDA-only and no GPU was available",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--load", type=float, default=3.0, help="stub engine load time in seconds (cold start)")
    parser.add_argument("--wake", type=float, default=0.3, help="stub /wake_up time in seconds")
    parser.add_argument("--sleep", type=float, default=0.1, help="stub /sleep time in seconds")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(run(args.load, args.wake, args.sleep, args.repeat))


if __name__ == "__main__":
    main()
