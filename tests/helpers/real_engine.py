"""What the Docker tests on the real vLLM CPU engine share: its image (the tiny generated model is
made in it, tests/helpers/tiny_model.py), the `engines:` line that names it, the real `aigo-apply`
in a child process with time for a real engine to start, and the clean-up of a project."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from aigo_apply.desired import labels
from aigo_apply.desired.engines.common import legacy_cache_volume

from helpers import tiny_model
from helpers.paths import ROOT

IMAGE = tiny_model.IMAGE
CLI_TIMEOUT = 900  # an apply waits for a real engine start (about 25 s alone; slower on a busy 2-core CI)
ENGINES_YAML = f'engines: {{vllm: {{image: {IMAGE.partition(":")[0]}, image_tag: "{IMAGE.partition(":")[2]}"}}}}'


def model_yaml(alias: str = "chat", context_length: int = 512, max_num_seqs: int = 4, more: str = "") -> str:
    """One model on the real engine, as a `models:` entry (two spaces in): the tiny generated model in
    the folder `tiny` beside the file, no GPU, a 1 GiB KV cache, eager mode (no compile on 2 cores);
    `more`: further keys of the model, one per line at the model's indentation ("update: parallel")."""
    extra = "".join(f"    {line}\n" for line in more.splitlines() if line.strip())
    return (
        f"  {alias}:\n    source: {{path: tiny}}\n    context_length: {context_length}\n    gpus: none\n{extra}"
        f'    env: {{VLLM_CPU_KVCACHE_SPACE: "1"}}\n'
        f"    vllm: {{enforce_eager: true, max_num_seqs: {max_num_seqs}}}\n"
    )


def config_yaml(project: str, router: str, models: str, ready_timeout: int = 900) -> str:
    """A whole aigo.yaml on the real engine: `router` is its `router:` line (configs.router_yaml),
    `models` the entries (model_yaml)."""
    return (
        f"version: 1\nproject: {project}\n{ENGINES_YAML}\n{router}\n"
        f"defaults: {{ready_timeout: {ready_timeout}}}\nmodels:\n{models}"
    )


def require_image(runtime: Any, docker_missing: Any) -> None:
    """Skip (or, where the real engine is required, fail) when the real-engine image is not built."""
    if IMAGE not in {tag for image in runtime.list_images() for tag in image.get("RepoTags") or []}:
        docker_missing(f"real-engine image {IMAGE} missing; run tests/images/build-vllm-cpu.sh")


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """The real `aigo-apply` in a child process (AIGO_FILE of the test run left out), `env` over ours."""
    full = {k: v for k, v in os.environ.items() if k != "AIGO_FILE"} | env
    return subprocess.run(
        [sys.executable, "-m", "aigo_apply", *args],
        capture_output=True,
        text=True,
        env=full,
        cwd=ROOT,
        timeout=CLI_TIMEOUT,
    )


def remove_project(runtime: Any, project: str, env: dict[str, str], path: Path) -> None:
    """destroy, then whatever of the project is left (a test that failed half-way), and its cache volumes."""
    cli(env, "destroy", "-f", str(path), "-y")
    for c in runtime.api.containers(all=True, filters=labels.project_filter(project)):
        runtime.api.remove_container(c["Id"], force=True)
    for volume in {v["Name"] for v in runtime.list_volumes(project)} | {legacy_cache_volume(project)}:
        runtime.remove_volume(volume)
