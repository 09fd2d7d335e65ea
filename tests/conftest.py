"""Shared fixtures and hooks, for tests/unit/ and tests/integration/ (no Docker daemon needed) and
tests/docker/ (the real daemon with the local images made by tests/images/build.sh; its fixtures are
in tests/docker/conftest.py). In CI (CI=true) a missing daemon or image is a failure, never a skip.
Helpers that are not fixtures live in tests/helpers/."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def docker_missing():
    """What a Docker test does when the daemon or a test image is missing: skip it on a developer's
    machine, fail it in CI (CI=true), where the Docker tests must run."""

    def missing(reason: str):
        if os.environ.get("CI"):
            pytest.fail(f"Docker tests must run in CI: {reason}")
        pytest.skip(reason)

    return missing


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the tests marked `disruptive` after every other test, in their own order. They restart the
    Docker daemon and fill disks, which would disturb whatever runs after them (a daemon restart
    touches every container on the machine), so the order is made explicit here instead of by a
    file name that sorts last. trylast: after the selection by -m/-k, and after any other reordering."""
    disruptive = [item for item in items if item.get_closest_marker("disruptive")]
    if disruptive:
        items[:] = [item for item in items if not item.get_closest_marker("disruptive")] + disruptive
