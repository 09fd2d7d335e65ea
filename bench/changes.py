#!/usr/bin/env python3
"""What changing a running model costs its clients, side by side in one run: a bounded load through
the router (a few clients, a fixed count and time: tests/helpers/load.py) while the model's engine
is replaced because a recreate-class setting changed (context_length), three ways:

  parallel   `update: parallel` (what `auto` picks when both engines fit): the new engine starts
             beside the old one and takes the route once it serves; the old one drains
  recreate   `update: recreate`: the old engine stops first and the router holds the model's requests
             until the new one serves
  by hand    the reference: the engine restarted behind the router's back (`docker restart`), as
             without aigo-apply's replace; its requests fail while it loads

For each: requests sent and failed, latency p50 and p99 in steady state (before the change) and
during it, the apply's own time, and the time from the change's start to the new engine serving
(the router's /v1/models showing its new context length). On the stub engine (a 3 s load, 50 ms per
request) and, unless skipped, on the real vLLM CPU engine (the tiny generated model), whose
recreate runs twice: plain requests, and streamed ones. Clients wait as long as the OpenAI SDKs do
(600 s): a recreate holds requests for as long as the new engine takes to start, and a client whose
own timeout is shorter gives up on a request the router still holds (that, not an error of the
router, was how 4 of 471 requests "failed" in an earlier run of this bench, with a 60 s client
timeout and a 97 s start).

    python bench/changes.py [--skip-real-engine]
"""

from __future__ import annotations

import argparse
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
sys.path.insert(0, str(ROOT / "tests"))
import common  # noqa: E402
import httpx  # noqa: E402

from helpers.load import Load, Result  # noqa: E402

ROUTER_PORT = 18996
STEADY_S = 4.0  # load before the change, for the steady-state figures


def _config(folder: Path, project: str, image: str, model: str, context: int, update: str, env: str) -> Path:
    text = (
        f"version: 1\nproject: {project}\nengines: {{vllm: {{image: {image.partition(':')[0]}, "
        f'image_tag: "{image.partition(":")[2]}"}}}}\n'
        f"router: {{image: aigo-haproxy, image_tag: bookworm, port: {ROUTER_PORT}}}\n"
        f"defaults: {{ready_timeout: 900}}\nmodels:\n  chat:\n    source: {{path: {model}}}\n"
        f"    context_length: {context}\n    gpus: none\n    update: {update}\n    env: {{{env}}}\n"
    )
    path = folder / "aigo.yaml"
    path.write_text(text)
    return path


def _serving_context(url: str) -> int | None:
    try:
        data = httpx.get(f"{url}/v1/models", timeout=2).json()["data"]
        return int(data[0]["max_model_len"]) if data else None
    except (httpx.HTTPError, ValueError, KeyError, IndexError):
        return None


def _when_serving(url: str, context: int, began: float, stop: threading.Event, out: list[float]) -> None:
    while not stop.is_set():
        if _serving_context(url) == context:
            out.append(time.monotonic() - began)
            return
        time.sleep(0.05)


def _ms(results: list[Result], q: float) -> float:
    times = sorted((r.ended - r.started) * 1000 for r in results if r.status == 200)
    if not times:
        return float("nan")
    return times[min(len(times) - 1, int(q * len(times)))]


CLIENT_TIMEOUT = 600.0  # the OpenAI SDKs' default


def one(image: str, model: str, env: str, way: str, clients: int, max_tokens: int, stream: bool = False) -> dict:
    project = "bchg" + uuid.uuid4().hex[:6]
    runtime_cmd = [sys.executable, "-m", "aigo_apply"]
    url = f"http://127.0.0.1:{ROUTER_PORT}"
    with tempfile.TemporaryDirectory() as tmp:
        env_vars = common.cli_env(str(Path(tmp) / "state"))
        update = "parallel" if way == "parallel" else "recreate"
        path = _config(Path(tmp), project, image, model, 1024, update, env)
        subprocess.run(runtime_cmd + ["apply", "-f", str(path), "-y"], check=True, capture_output=True, env=env_vars)
        load = Load(
            url,
            "chat",
            clients=clients,
            max_tokens=max_tokens,
            seconds=900,
            limit=100_000,
            timeout=CLIENT_TIMEOUT,
            stream=stream,
        ).start()
        try:
            time.sleep(STEADY_S)
            changed_at = time.monotonic()
            seen: list[float] = []
            stop = threading.Event()
            watcher = threading.Thread(target=_when_serving, args=(url, 512, changed_at, stop, seen), daemon=True)
            if way == "by hand":
                watcher = threading.Thread(target=_when_back, args=(url, changed_at, stop, seen), daemon=True)
                watcher.start()
                subprocess.run(
                    ["docker", "restart", "-t", "30", f"aigo-{project}-chat"], check=True, capture_output=True
                )
            else:
                watcher.start()
                path = _config(Path(tmp), project, image, model, 512, update, env)
                done = subprocess.run(runtime_cmd + ["apply", "-f", str(path), "-y"], capture_output=True, env=env_vars)
                if done.returncode != 0:
                    raise SystemExit(f"apply failed ({way}):\n{done.stdout}{done.stderr}")
            applied = time.monotonic() - changed_at
            watcher.join(timeout=900)
            stop.set()
            time.sleep(1.0)
        finally:
            results = load.stop()
            subprocess.run(runtime_cmd + ["destroy", "-f", str(path), "-y"], capture_output=True, env=env_vars)
    steady = [r for r in results if r.ended <= changed_at]
    during = Load.during(results, changed_at, changed_at + applied)
    return {
        "way": way + (" (streamed)" if stream else ""),
        "sent": len(results),
        "during": len(during),
        "failed": len(Load.failed(results)),
        # what failed, when (seconds from the change's start), for every way but the restart by hand
        "failures": [
            f"{r.started - changed_at:+.1f} s to {r.ended - changed_at:+.1f} s: {r.status or 'no answer'} {r.detail[:100]}"
            for r in Load.failed(results)[:5]
        ]
        if way != "by hand"
        else [],
        "steady": (_ms(steady, 0.5), _ms(steady, 0.99)),
        "change": (_ms(during, 0.5), _ms(during, 0.99)),
        "applied": applied,
        "serving": seen[0] if seen else float("nan"),
    }


def _when_back(url: str, began: float, stop: threading.Event, out: list[float]) -> None:
    """A restart by hand: the model serves again when a request for it succeeds once more."""
    time.sleep(0.5)
    while not stop.is_set():
        try:
            body = {"model": "chat", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
            if httpx.post(f"{url}/v1/chat/completions", json=body, timeout=5).status_code == 200:
                out.append(time.monotonic() - began)
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)


def table(title: str, rows: list[dict]) -> str:
    lines = [
        title,
        "",
        "| way | requests (in the change) | failed | steady p50 / p99 (ms) | during the change p50 / p99 (ms) "
        "| apply (s) | change to the new engine serving (s) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        apply_s = "-" if r["way"] == "by hand" else f"{r['applied']:.1f}"
        lines.append(
            f"| {r['way']} | {r['sent']} ({r['during']}) | {r['failed']} | {r['steady'][0]:.0f} / {r['steady'][1]:.0f} "
            f"| {r['change'][0]:.0f} / {r['change'][1]:.0f} | {apply_s} | {r['serving']:.1f} |"
        )
    failures = [f"- {r['way']}: {f}" for r in rows for f in r["failures"]]
    return "\n".join(lines + (["", "What failed (the first five of each way):", *failures] if failures else []))


def run(real_engine: bool = True) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        stub_env = 'AIGO_STUB_LOAD_SECONDS: "3", AIGO_STUB_REPLY_SECONDS: "0.05"'
        model = Path(tmp) / "m"
        model.mkdir()
        (model / "config.json").write_text('{"architectures": ["LlamaForCausalLM"], "model_type": "llama"}\n')
        ways = ("parallel", "recreate", "by hand")
        rows = [one("aigo-stub-engine:1", str(model), stub_env, way, 8, 2) for way in ways]
        out = [
            table(
                "A model's engine replaced under load (8 clients through the router; the stub engine loads in "
                f"3 s and holds each request 50 ms; 1-minute load {common.load():.1f})",
                rows,
            )
        ]
    if real_engine:
        from helpers import tiny_model

        with tempfile.TemporaryDirectory() as tmp:
            model = tiny_model.make(Path(tmp) / "tiny", tiny_model.IMAGE)
            # nobind: vLLM's CPU build binds each engine's worker to the cores it picks, the same ones for
            # both engines of a parallel replace ("core ids=[0]" on 2 cores); the new engine then stalled in
            # the kernel's sched_setaffinity for minutes beside the serving one under load. Unbound, the
            # scheduler shares the cores between them, as it would between two containers on any host.
            real_env = 'VLLM_CPU_KVCACHE_SPACE: "1", VLLM_CPU_OMP_THREADS_BIND: nobind'
            rows = [one(tiny_model.IMAGE, str(model), real_env, way, 4, 1) for way in ways]
            rows.insert(2, one(tiny_model.IMAGE, str(model), real_env, "recreate", 4, 4, stream=True))
            out.append(
                table(
                    "The same on the real vLLM CPU engine (the tiny generated model, 4 clients, one token each, "
                    f"four when streamed; 1-minute load {common.load():.1f})",
                    rows,
                )
            )
    return "\n\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-real-engine", action="store_true")
    args = parser.parse_args()
    print(run(real_engine=not args.skip_real_engine))


if __name__ == "__main__":
    main()
