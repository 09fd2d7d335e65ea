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
from aigo_apply.desired.engines.common import cache_volume

from helpers import tiny_model
from helpers.paths import ROOT

IMAGE = tiny_model.IMAGE
CLI_TIMEOUT = 900  # an apply waits for a real engine start (about 25 s alone; slower on a busy 2-core CI)
ENGINES_YAML = f'engines: {{vllm: {{image: {IMAGE.partition(":")[0]}, image_tag: "{IMAGE.partition(":")[2]}"}}}}'


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
    """destroy, then whatever of the project is left (a test that failed half-way), and its cache volume."""
    cli(env, "destroy", "-f", str(path), "-y")
    for c in runtime.api.containers(all=True, filters=labels.project_filter(project)):
        runtime.api.remove_container(c["Id"], force=True)
    runtime.remove_volume(cache_volume(project))
