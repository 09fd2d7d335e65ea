"""What the benchmarks share: a generated aigo.yaml with N stub or idle models on local images,
and the removal of a benchmark project's containers."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aigo_apply.desired import labels  # noqa: E402


def cli_env(state_dir: str) -> dict[str, str]:
    """The environment the timed CLI runs in: a private state folder, and Python's bytecode cache
    allowed and warmed, as in any pip-installed copy (pip compiles the wheel's modules). A shell
    that sets PYTHONDONTWRITEBYTECODE would otherwise make every run compile ~40 modules again."""
    import compileall
    import os

    compileall.compile_dir(str(ROOT / "aigo_apply"), quiet=1)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["AIGO_STATE_DIR"] = state_dir
    return env


def write_config(folder: Path, project: str, engine_image: str, router_port: int, models: list[str]) -> Path:
    """`models` are the YAML flow mappings after `source`, e.g. 'context_length: 4096, gpus: none'."""
    (folder / "m").mkdir(exist_ok=True)
    repo, tag = engine_image.split(":")
    lines = [
        f'version: 1\nproject: {project}\nengines: {{vllm: {{image: {repo}, image_tag: "{tag}"}}}}\n'
        f"router: {{image: aigo-haproxy, image_tag: bookworm, port: {router_port}}}\nmodels:"
    ]
    lines += [f"  {entry}" for entry in models]
    path = folder / "aigo.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def remove_project(runtime, project: str) -> None:
    from aigo_apply.desired.engines.common import cache_volume

    for c in runtime.api.containers(all=True, filters=labels.project_filter(project)):
        runtime.api.remove_container(c["Id"], force=True)
    runtime.remove_volume(cache_volume(project))
