"""The canary gate end to end on the real vLLM CPU engine (aigo-vllm-cpu, the tiny generated model of
tests/helpers/tiny_model.py with its real tokenizer.json): a parallel replace of a changed setting
starts the new engine beside the serving one, measures both with the same seeded token-id prompts as
streamed /v1/completions with ignore_eos, and moves the route; the report holds both engines' figures,
real vLLM answered every request, and `bench` measures what runs afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from aigo_apply.desired import labels
from aigo_apply.desired.engines.common import cache_volume

from helpers import tiny_model
from helpers.configs import free_port, router_yaml
from helpers.paths import ROOT

pytestmark = pytest.mark.slow
IMAGE = tiny_model.IMAGE
GATE = "{requests: 8, concurrency: 4, prompt_tokens: 16, max_tokens: 8, max_slowdown: 0.95, compare_output: true}"


def config(root: Path, project: str, port: int, context_length: int) -> Path:
    path = root / "aigo.yaml"
    path.write_text(
        textwrap.dedent(f"""
        version: 1
        project: {project}
        engines: {{vllm: {{image: {IMAGE.partition(":")[0]}, image_tag: "{IMAGE.partition(":")[2]}"}}}}
        {router_yaml(port)}
        defaults: {{ready_timeout: 600}}
        models:
          chat:
            source: {{path: tiny}}
            context_length: {context_length}
            gpus: none
            update: parallel
            canary: {GATE}
            env: {{VLLM_CPU_KVCACHE_SPACE: "1"}}
            vllm: {{enforce_eager: true, max_num_seqs: 4}}
        """).lstrip()
    )
    return path


def cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "AIGO_FILE"} | {"AIGO_STATE_DIR": str(root / "state")}
    return subprocess.run(
        [sys.executable, "-m", "aigo_apply", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=1200
    )


def test_the_gate_measures_two_real_engines_and_lets_the_new_one_in(runtime, docker_missing, tmp_path):
    if IMAGE not in {tag for image in runtime.list_images() for tag in image.get("RepoTags") or []}:
        docker_missing(f"real-engine image {IMAGE} missing; run tests/images/build-vllm-cpu.sh")
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
        cli(tmp_path, "destroy", "-f", str(tmp_path / "aigo.yaml"), "-y")
        for c in runtime.api.containers(all=True, filters=labels.project_filter(project)):
            runtime.api.remove_container(c["Id"], force=True)
        runtime.remove_volume(cache_volume(project))
