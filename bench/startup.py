#!/usr/bin/env python3
"""Engine starts measured by phase, and a replace's downtime beside the plan's prediction, on the real
engine (vLLM's CPU build, the tiny random-weight Llama of tests/helpers/tiny_model.py, torch.compile on:
no enforce_eager; one model with `update: recreate`, so the old engine stops first). Per repetition,
in a fresh project with its cache volume empty:

  cold     `aigo-apply apply` from nothing: the compile cache is empty;
  replace  `aigo-apply plan --replace` (its expected_downtime_s, predicted from the cold start), then
           `apply --replace`: the new engine finds the compiled graphs in the volume (warm);
  again    the same once more, predicted from the warm start now recorded.

Each start's seconds, phases and cache verdict are what apply recorded (`status -o json`'s
last_start); a replace's measured downtime is, from apply's journal, the time from the old engine's
stop to the new engine's route (the router holds the model's requests meanwhile).

    python bench/startup.py [--repeat 2]

Needs aigo-vllm-cpu:v0.32.0-cpu (tests/images/build-vllm-cpu.sh, run by scripts/setup). GPU starts are
not measured here (no GPU): their phases (CUDA graph capture among them) come from the same log lines.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import uuid
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
import common  # noqa: E402

from aigo_apply.adapters.docker_engine import DockerRuntime  # noqa: E402

from helpers.real_engine import ENGINES_YAML, IMAGE  # noqa: E402

ROUTER_PORT = 18998
PHASES = ("inspect", "weights", "compile", "engine_init", "other")


def image_ready() -> bool:
    return subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode == 0


def config(folder: Path, project: str, model: Path) -> Path:
    path = folder / f"{project}.yaml"
    path.write_text(
        f"version: 1\nproject: {project}\n{ENGINES_YAML}\n"
        f"router: {{image: aigo-haproxy, image_tag: bookworm, port: {ROUTER_PORT}}}\n"
        "defaults: {ready_timeout: 900}\nmodels:\n"
        f"  tiny:\n    source: {{path: {model}}}\n    context_length: 1024\n    gpus: none\n    update: recreate\n"
        '    env: {VLLM_CPU_KVCACHE_SPACE: "1"}\n    vllm: {max_num_seqs: 4}\n'
    )
    return path


def cli(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "aigo_apply", *args], capture_output=True, text=True, env=env, timeout=1800
    )
    if done.returncode != 0:
        raise SystemExit(f"aigo-apply {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def last_start(env: dict[str, str], path: Path) -> dict:
    (row,) = json.loads(cli(env, "status", "-f", str(path), "-o", "json"))["models"]
    return row["last_start"]


def predicted(env: dict[str, str], path: Path) -> float | None:
    plan = json.loads(cli(env, "plan", "-f", str(path), "--replace", "tiny", "-o", "json"))
    return next(a for a in plan["actions"] if a["address"] == "model.tiny")["expected_downtime_s"]


def downtime(journal: Path) -> float:
    """The last replace's downtime by apply's journal: its old engine's stop to the new one's route."""
    entries = [json.loads(line) for line in journal.read_text().splitlines()]
    run = entries[-1]["run"]
    mine = [e for e in entries if e["run"] == run and e["address"] == "model.tiny"]
    stop = next(e for e in mine if e["step"] == "recreate" and e.get("message", "").startswith("stopping"))
    route = next(e for e in mine if e["step"] == "route_add" and e["outcome"] == "ok")
    return (datetime.fromisoformat(route["time"]) - datetime.fromisoformat(stop["time"])).total_seconds()


def one(runtime: DockerRuntime, folder: Path, model: Path, env: dict[str, str]) -> dict:
    project = "benchst" + uuid.uuid4().hex[:6]
    path = config(folder, project, model)
    common.remove_project(runtime, project)  # its cache volume too: the first start is cold
    journal = Path(env["AIGO_STATE_DIR"]) / project / "journal.jsonl"
    try:
        cli(env, "apply", "-f", str(path), "-y")
        out = {"cold": last_start(env, path)}
        for name in ("replace", "again"):
            guess = predicted(env, path)
            cli(env, "apply", "-f", str(path), "--replace", "tiny", "-y")
            out[name] = {**last_start(env, path), "predicted": guess, "downtime": downtime(journal)}
        return out
    finally:
        cli(env, "destroy", "-f", str(path), "-y")
        common.remove_project(runtime, project)


def run(repeat: int = 2) -> str:
    from helpers import tiny_model

    runtime = DockerRuntime()
    loads = [common.load()]
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env = common.cli_env(str(folder / "state"))
        model = tiny_model.make(folder / "tiny", image=IMAGE)
        for _ in range(repeat):
            runs.append(one(runtime, folder, model, env))
            loads.append(common.load())
            print(json.dumps(runs[-1]), file=sys.stderr)  # each run's figures as measured
    return table(runs, loads)


def table(runs: list[dict], loads: list[float]) -> str:
    repeat = len(runs)

    def med(key: str, field: str) -> float:
        return statistics.median(r[key][field] for r in runs)

    def phase(key: str, name: str) -> str:
        values = [r[key]["phases"].get(name) for r in runs]
        return f"{statistics.median(values):.1f}" if all(v is not None for v in values) else "-"

    caches = {key: "/".join(sorted({str(r[key]["cache"]) for r in runs})) for key in ("cold", "replace", "again")}
    rows = [
        f"| {label} | {caches[key]} | {med(key, 'seconds'):.1f} | " + " | ".join(phase(key, p) for p in PHASES) + " |"
        for key, label in (
            ("cold", "first apply, empty cache volume"),
            ("replace", "`--replace`"),
            ("again", "`--replace` again"),
        )
    ]
    away = [
        f"| `--replace` predicted from the {source} start | {med(key, 'predicted'):.1f} | {med(key, 'downtime'):.1f} | "
        f"{med(key, 'seconds'):.1f} | {statistics.median(abs(r[key]['predicted'] - r[key]['downtime']) / r[key]['downtime'] for r in runs) * 100:.0f}% |"
        for key, source in (("replace", "cold"), ("again", "warm"))
    ]
    return "\n".join(
        [
            f"engine starts by phase: vLLM's CPU build 0.32.0 ({IMAGE}), the tiny Llama, torch.compile on, "
            f"median of {repeat} runs (1-minute load {min(loads):.1f}-{max(loads):.1f}); GPU starts not measured here",
            "",
            "| start | cache | to serving (s) | " + " | ".join(f"{p} (s)" for p in PHASES) + " |",
            "|---|---|---:|" + "---:|" * len(PHASES),
            *rows,
            "",
            "| replace (update: recreate) | plan's expected_downtime_s | measured: old engine stopped to new one routed (s) "
            "| the new start (s) | prediction off by |",
            "|---|---:|---:|---:|---:|",
            *away,
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    print(run(args.repeat))


if __name__ == "__main__":
    main()
