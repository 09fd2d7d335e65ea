#!/usr/bin/env python3
"""The router's merged /metrics while engines are busy and some misbehave: the real vLLM CPU engine
generating `--streams` streams on the machine's cores, beside two stub engines (serving as SGLang): one
that answers /metrics only after 30 s, one that writes lines Prometheus refuses a whole page for
(a value of 1e999, a timestamp beyond int64, an unknown escape, a repeated series). Scrapes as
Prometheus sends them (its scrape timeout in X-Prometheus-Scrape-Timeout-Seconds: 10 s, its default,
and 1 s), one after the other: wall time p50/p90/max, answers other than 200, answers later than the
timeout said (Prometheus gave up on them), pages Debian's promtool refuses, and pages without the busy
engine's numbers: each is a scrape that loses every engine's numbers. Bounded:
`--scrapes` per timeout, each read given 15 s at most, and the load stops after `--seconds` at most.
Run it in two checkouts to compare two versions of the router's files, one after the other.

    python bench/metrics_faults.py [--scrapes 20] [--streams 2]
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
import threading
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import common  # noqa: E402
import httpx  # noqa: E402

ROUTER_PORT = 18993
# What a hostile engine writes after its own families: each line makes Prometheus refuse a page that holds it.
HOSTILE = [
    "sglang:huge_value 1e999",
    "sglang:future 1 9223372036854775808",
    r'sglang:odd{a="x\q"} 1',
    'sglang:num_running_reqs{model_name="odd",engine_type="unified",tp_rank="0",pp_rank="0"} 9',
]


def measure(scrapes: int, streams: int, seconds: float) -> list[str]:
    from aigo_apply.adapters.docker_engine import DockerRuntime

    sys.path.insert(0, str(ROOT / "tests"))
    from helpers import tiny_model
    from helpers.real_engine import IMAGE, model_yaml

    runtime = DockerRuntime()
    folder = Path(tempfile.mkdtemp(prefix="aigo-bench-metrics-faults-"))
    tiny_model.make(folder / "tiny", tiny_model.IMAGE)
    project = "bf" + uuid.uuid4().hex[:8]
    stub = "    source: {{path: tiny}}\n    engine: sglang\n    context_length: 512\n    gpus: none\n    env: {{{}}}\n"
    extra = json.dumps(HOSTILE)
    text = (
        f"version: 1\nproject: {project}\n"
        f'engines: {{vllm: {{image: {IMAGE.partition(":")[0]}, image_tag: "{IMAGE.partition(":")[2]}"}}, '
        'sglang: {image: aigo-stub-engine, image_tag: "1"}}\n'
        f"router: {{image: aigo-haproxy, image_tag: bookworm, port: {ROUTER_PORT}}}\n"
        "defaults: {ready_timeout: 900}\nmodels:\n"
        + model_yaml("chat")
        + "  slow:\n"
        + stub.format('AIGO_STUB_METRICS_SECONDS: "30"')
        + "  odd:\n"
        + stub.format(f"AIGO_STUB_METRICS_EXTRA: '{extra}'")
    )
    path = folder / "aigo.yaml"
    path.write_text(text, encoding="utf-8")
    env = common.cli_env(str(folder / "state"))
    base = f"http://127.0.0.1:{ROUTER_PORT}"
    stop = threading.Event()
    deadline = time.monotonic() + seconds

    def stream() -> None:  # one streamed completion after another, until the scrapes end
        body = {"model": "chat", "prompt": "Hello!", "max_tokens": 480, "ignore_eos": True, "stream": True}
        with httpx.Client(timeout=300) as http:
            while not stop.is_set() and time.monotonic() < deadline:
                try:
                    with http.stream("POST", base + "/v1/completions", json=body) as answer:
                        for _ in answer.iter_bytes():
                            if stop.is_set():
                                break
                except httpx.HTTPError:
                    time.sleep(0.5)

    writers = [threading.Thread(target=stream, daemon=True) for _ in range(streams)]
    rows = []
    try:
        common.apply_or_exit(path, env)
        for writer in writers:
            writer.start()
        time.sleep(3)  # the engine is generating
        with httpx.Client(timeout=15) as http:
            for said in ("10", "1"):
                times, wrong, refused, lost = [], [], 0, 0
                for _ in range(scrapes):
                    if time.monotonic() > deadline:
                        break
                    started = time.perf_counter()
                    try:
                        answer = http.get(base + "/metrics", headers={"X-Prometheus-Scrape-Timeout-Seconds": said})
                        status, page = answer.status_code, answer.content
                    except httpx.HTTPError as exc:
                        status, page = type(exc).__name__, b""
                    times.append(time.perf_counter() - started)
                    if status != 200:
                        wrong.append(str(status))
                    elif shutil.which("promtool"):
                        checked = subprocess.run(["promtool", "check", "metrics"], input=page, capture_output=True)
                        refused += checked.returncode not in (0, 3)  # 3: lint remarks only
                    lost += b'vllm:num_requests_running{project="' + project.encode() not in page
                    time.sleep(0.2)
                late = sum(t > float(said) for t in times)  # Prometheus had given up on these
                rows.append(_row(said, times, wrong, late, refused, lost))
        return rows
    finally:
        stop.set()
        for writer in writers:
            writer.join(timeout=30)
        common.remove_project(runtime, project)


def _row(said: str, times: list[float], wrong: list[str], late: int, refused: int, lost: int) -> str:
    times = sorted(times)
    p90 = times[int(0.9 * (len(times) - 1))]
    others = ", ".join(f"{wrong.count(w)} x {w}" for w in sorted(set(wrong))) or "0"
    return (
        f"| {said} s | {statistics.median(times) * 1000:.0f} | {p90 * 1000:.0f} | {times[-1] * 1000:.0f} "
        f"| {others} of {len(times)} | {late} | {refused} | {lost} |"
    )


def run(scrapes: int = 20, streams: int = 2, seconds: float = 300) -> str:
    load = common.load()
    rows = measure(scrapes, streams, seconds)
    return "\n".join(
        [
            f"The router's /metrics while the real vLLM CPU engine generates {streams} streams on "
            f"{os.cpu_count() or 2} cores (1-minute load {load:.1f} before), beside an engine that answers /metrics "
            f"after 30 s and one that writes lines Prometheus refuses; {scrapes} scrapes per scrape timeout",
            "",
            "| scrape timeout said | p50 (ms) | p90 (ms) | max (ms) | other answers | later than the timeout "
            "| pages promtool refuses | pages without the busy engine |",
            "|---|---:|---:|---:|---|---:|---:|---:|",
            *rows,
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scrapes", type=int, default=20)
    parser.add_argument("--streams", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=300, help="the longest the load runs")
    args = parser.parse_args()
    print(run(args.scrapes, args.streams, args.seconds))


if __name__ == "__main__":
    main()
