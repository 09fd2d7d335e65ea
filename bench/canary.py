#!/usr/bin/env python3
"""The canary gate on the real engine (vLLM's CPU build, the tiny random-weight Llama of
tests/helpers/tiny_model.py with its real tokenizer): one model applied with a gate, then two
changes through it, each a parallel replace measured against the serving engine before the route
moves:

  slower   vllm.max_num_seqs 4 -> 1: the new engine runs one request at a time while the gate sends 4
           at once; expected: refused (the old engine keeps serving, apply exits 1);
  neutral  context_length 512 -> 640, same batch: expected: passed.

Prints each apply's gate table as apply printed it, and aigo.lock's record (markdown; bench/run.py
runs it with the other real-engine tables).

    python bench/canary.py

Needs aigo-vllm-cpu:v0.32.0-cpu (tests/images/build-vllm-cpu.sh, run by scripts/setup).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
import common  # noqa: E402

from aigo_apply.adapters.docker_engine import DockerRuntime  # noqa: E402

from helpers.real_engine import IMAGE, config_yaml, model_yaml  # noqa: E402

ROUTER_PORT = 18997
GATE = "{requests: 16, concurrency: 4, prompt_tokens: 32, max_tokens: 16, max_slowdown: 0.10}"


def config(folder: Path, project: str, context_length: int, max_num_seqs: int) -> Path:
    """The model as the canary test has it (tests/helpers/real_engine.py), with this benchmark's gate."""
    path = folder / "aigo.yaml"
    model = model_yaml("chat", context_length, max_num_seqs, more=f"update: parallel\ncanary: {GATE}")
    path.write_text(
        config_yaml(project, f"router: {{port: {ROUTER_PORT}, image: aigo-haproxy, image_tag: bookworm}}", model)
    )
    return path


def apply(folder: Path, env: dict[str, str], path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "aigo_apply", "apply", "-f", str(path), "-y", *extra],
        capture_output=True,
        text=True,
        env=env,
        cwd=HERE.parent,
        timeout=1800,
    )


def gate_lines(output: str) -> str:
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if "canary passed" in line or "canary refused" in line), None)
    return "\n".join(lines[start : start + 6]) if start is not None else "(no gate ran)\n" + output[-2000:]


def run() -> str:
    """The two changes through the gate, as markdown (bench/run.py puts it beside the other tables)."""
    from helpers import tiny_model

    runtime = DockerRuntime()
    folder = Path(tempfile.mkdtemp(prefix="aigo-canary-"))
    project = "canary" + uuid.uuid4().hex[:6]
    env = common.cli_env(str(folder / "state"))
    tiny_model.make(folder / "tiny", IMAGE)
    try:
        first = apply(folder, env, config(folder, project, 512, 4))
        if first.returncode != 0:
            return f"(the canary run could not start its engine: {(first.stdout + first.stderr)[-500:]})"
        out = [f"The canary gate on the real engine ({GATE}):\n"]
        for name, change in (
            ("slower (max_num_seqs 4 -> 1)", (512, 1)),
            ("neutral (context_length 512 -> 640)", (640, 4)),
        ):
            result = apply(folder, env, config(folder, project, *change))
            out.append(f"{name}: apply exit {result.returncode}\n\n```\n{gate_lines(result.stdout)}\n```\n")
            if result.returncode != 0:  # refused: the file goes back to what runs, for the next change
                config(folder, project, 512, 4)
        lock = json.loads((folder / "aigo.lock").read_text()).get("canary", {})
        out.append("aigo.lock's record:\n\n```\n" + json.dumps(lock, indent=2) + "\n```")
        return "\n".join(out)
    finally:
        subprocess.run(
            [sys.executable, "-m", "aigo_apply", "destroy", "-f", str(folder / "aigo.yaml"), "-y"],
            capture_output=True,
            env=env,
            cwd=HERE.parent,
            timeout=300,
        )
        common.remove_project(runtime, project)


if __name__ == "__main__":
    print(run())
