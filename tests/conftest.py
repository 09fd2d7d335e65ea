"""Shared fixtures. Docker tests run against the real daemon with the local images made by
tests/images/build.sh; in CI (CI=true) a missing daemon or image is a failure, never a skip."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
IDLE_IMAGE = ("aigo-test-idle", "1")


def _docker_missing(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"Docker tests must run in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def runtime():
    from aigo_apply.adapters.docker_engine import DockerRuntime
    from aigo_apply.errors import DockerUnavailable

    try:
        rt = DockerRuntime()
        rt.api.ping()
    except (DockerUnavailable, Exception) as exc:
        _docker_missing(f"no Docker engine: {exc}")
    tags = {t for image in rt.list_images() for t in image.get("RepoTags") or []}
    for image in (":".join(IDLE_IMAGE), "aigo-stub-engine:1", "aigo-haproxy:bookworm"):
        if image not in tags:
            _docker_missing(f"test image {image} missing; run tests/images/build.sh")
    return rt


@pytest.fixture
def project(runtime):
    """A fresh project name; every container of it, and its cache volume, is removed afterwards."""
    from aigo_apply.desired import labels
    from aigo_apply.desired.engines.common import cache_volume

    name = "t" + uuid.uuid4().hex[:10]
    yield name
    for c in runtime.api.containers(all=True, filters=labels.project_filter(name)):
        runtime.api.remove_container(c["Id"], force=True)
    runtime.remove_volume(cache_volume(name))


@pytest.fixture
def foreign(runtime):
    """Start containers that aigo-apply does not manage; removed afterwards."""
    made = []

    def start(name: str, host_port: int | None = None) -> str:
        host_config = runtime.api.create_host_config(
            port_bindings={9000: ("127.0.0.1", host_port)} if host_port else None
        )
        cid = runtime.api.create_container(
            ":".join(IDLE_IMAGE), name=name, host_config=host_config, ports=[9000] if host_port else None
        )["Id"]
        made.append(cid)
        runtime.api.start(cid)
        return cid

    yield start
    for cid in made:
        runtime.api.remove_container(cid, force=True)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def router_yaml(port: int | None = None) -> str:
    """A router section using the local image with Debian's haproxy, on a free port."""
    return f"router: {{image: aigo-haproxy, image_tag: bookworm, port: {port or free_port()}}}"


def write_config(tmp_path: Path, text: str, name: str = "aigo.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def run_cli(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run the real `aigo-apply` entry point in a child process (real exit codes, real output)."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("AIGO_FILE", None) if env is None or "AIGO_FILE" not in env else None
    return subprocess.run(
        [sys.executable, "-m", "aigo_apply", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd or ROOT,
        timeout=60,
    )


def host_context(models_dir: Path | None = None):
    """This process's host context (as the CLI reads it), with the model store moved where a test
    wants it (a path that need not exist: desired state reads nothing from the machine)."""
    from dataclasses import replace

    from aigo_apply.app.host_context import current_host

    host = current_host()
    return replace(host, models_dir=models_dir) if models_dir is not None else host
