"""Fixtures for the tests that need the real Docker engine and the local test images
(tests/images/build.sh). Every test in this folder is marked `docker`, so `-m "not docker"` selects
exactly tests/unit/."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).parent
IDLE_IMAGE = ("aigo-test-idle", "1")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under tests/docker/ `docker`. tryfirst: before -m selects by marker. (This
    hook sees the whole session's items, hence the folder check.)"""
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.docker)


@pytest.fixture(scope="session")
def runtime(docker_missing):
    from aigo_apply.adapters.docker_engine import DockerRuntime
    from aigo_apply.errors import DockerUnavailable

    try:
        rt = DockerRuntime()
        rt.api.ping()
    except (DockerUnavailable, Exception) as exc:
        docker_missing(f"no Docker engine: {exc}")
    tags = {t for image in rt.list_images() for t in image.get("RepoTags") or []}
    for image in (":".join(IDLE_IMAGE), "aigo-stub-engine:1", "aigo-haproxy:bookworm"):
        if image not in tags:
            docker_missing(f"test image {image} missing; run tests/images/build.sh")
    return rt


@pytest.fixture
def project(runtime):
    """A fresh project name; every container of it, and its cache volumes, are removed afterwards."""
    from aigo_apply.desired import labels
    from aigo_apply.desired.engines.common import legacy_cache_volume

    name = "t" + uuid.uuid4().hex[:10]
    yield name
    for c in runtime.api.containers(all=True, filters=labels.project_filter(name)):
        runtime.api.remove_container(c["Id"], force=True)
    for volume in {v["Name"] for v in runtime.list_volumes(name)} | {legacy_cache_volume(name)}:
        runtime.remove_volume(volume)


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
