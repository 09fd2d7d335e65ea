"""The canary gate end to end on the real vLLM CPU engine (aigo-vllm-cpu, the tiny generated model of
tests/helpers/tiny_model.py with its real tokenizer.json): a parallel replace of a changed setting
starts the new engine beside the serving one, measures both with the same seeded token-id prompts as
streamed /v1/completions with ignore_eos, and moves the route; the report holds both engines' figures,
real vLLM answered every request, and `bench` measures what runs afterwards."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from helpers import tiny_model
from helpers.configs import free_port, router_yaml
from helpers.real_engine import cli as real_cli
from helpers.real_engine import config_yaml, model_yaml, remove_project, require_image

pytestmark = pytest.mark.slow
IMAGE = tiny_model.IMAGE
GATE = "{requests: 8, concurrency: 4, prompt_tokens: 16, max_tokens: 8, max_slowdown: 0.95, compare_output: true}"


def config(root: Path, project: str, port: int, context_length: int) -> Path:
    path = root / "aigo.yaml"
    model = model_yaml(context_length=context_length, more=f"update: parallel\ncanary: {GATE}")
    path.write_text(config_yaml(project, router_yaml(port), model, ready_timeout=600))
    return path


def cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    return real_cli({"AIGO_STATE_DIR": str(root / "state")}, *args)


def test_the_gate_measures_two_real_engines_and_lets_the_new_one_in(runtime, docker_missing, tmp_path):
    require_image(runtime, docker_missing)
    tiny_model.make(tmp_path / "tiny", IMAGE)
    project, port = "test_canary_real-" + uuid.uuid4().hex[:6], free_port()
    try:
        first = cli(tmp_path, "apply", "-f", str(config(tmp_path, project, port, 512)), "-y")
        assert first.returncode == 0, first.stdout + first.stderr
        changed = cli(tmp_path, "apply", "-f", str(config(tmp_path, project, port, 640)), "-y", "-o", "json")
        assert changed.returncode == 0, changed.stdout + changed.stderr
        events = [json.loads(line) for line in changed.stdout.splitlines() if line.startswith("{")]
        (gate,) = [e for e in events if e["event"] == "result"][-1]["canaries"]
        assert gate["passed"], gate
        for side in ("old", "new"):  # real vLLM took the token-id prompts, streamed, and counted its tokens
            assert gate[side]["requests"] == 8 and gate[side]["errors"] == 0, gate
            assert gate[side]["output_tokens_per_second"] > 0 and gate[side]["ttft_p50_seconds"] > 0, gate
        assert gate["outputs_compared"] == 3
        measured = cli(tmp_path, "bench", "-f", str(tmp_path / "aigo.yaml"), "-o", "json")
        assert measured.returncode == 0, measured.stdout + measured.stderr
        (row,) = json.loads(measured.stdout)["models"]
        assert row["errors"] == 0 and row["output_tokens_per_second"] > 0
    finally:
        remove_project(runtime, project, {"AIGO_STATE_DIR": str(tmp_path / "state")}, tmp_path / "aigo.yaml")
