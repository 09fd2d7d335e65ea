"""Compile caches kept per engine image, on the real Docker daemon with two tags of the stub engine
image: each image gets its own labelled volume, shared by the models on it; moving the file to the
other tag replaces the engines onto a new, empty volume and the apply removes the old one (and an
earlier aigo-apply's one volume per project), saying so; status says each model's next start is warm
once a start served on its volume; an unchanged file plans nothing; destroy removes every one."""

from __future__ import annotations

import json

import pytest

from aigo_apply.desired import labels
from aigo_apply.desired.engines.common import cache_volume, legacy_cache_volume

from helpers.cli import run_cli
from helpers.stub_project import config


@pytest.fixture
def state(tmp_path, monkeypatch):
    path = tmp_path / "state"
    monkeypatch.setenv("AIGO_STATE_DIR", str(path))
    return {"AIGO_STATE_DIR": str(path)}


@pytest.fixture
def tags(runtime, project):
    """Two references of the stub engine image, this test's own: `aigo-stub-cache:PROJECT-1` and `-2`."""
    refs = [f"aigo-stub-cache:{project}-{n}" for n in (1, 2)]
    for ref in refs:
        runtime.api.tag("aigo-stub-engine:1", *ref.split(":"))
    yield refs
    for ref in refs:
        runtime.api.remove_image(ref)  # the tag only: the stub image keeps its own


def volumes(runtime, project) -> dict[str, dict]:
    """The project's volumes as Docker lists them: name -> labels."""
    return {v["Name"]: v["Labels"] for v in runtime.list_volumes(project)}


def cache_mounts(runtime, project) -> dict[str, list[str]]:
    out = {}
    for alias in ("chat", "tools"):
        mounts = runtime.api.inspect_container(f"aigo-{project}-{alias}")["Mounts"]
        out[alias] = [m["Name"] for m in mounts if m["Type"] == "volume" and m["Destination"] == "/root/.cache"]
    return out


def next_starts(project, path, state) -> dict[str, str | None]:
    status = run_cli("status", "-f", str(path), "-o", "json", env=state)
    assert status.returncode == 0, status.stdout + status.stderr
    return {r["model"]: r["next_start_cache"] for r in json.loads(status.stdout)["models"]}


def test_a_volume_per_image_pruned_when_no_model_uses_its_image_and_all_gone_with_destroy(
    runtime, project, tmp_path, state, tags
):
    first, second = tags
    one, two = cache_volume(project, first), cache_volume(project, second)
    path = config(tmp_path, project, engine_image=first)
    applied = run_cli("apply", "-f", str(path), "-y", env=state)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert cache_mounts(runtime, project) == {"chat": [one], "tools": [one]}  # one image: one volume, shared
    found = volumes(runtime, project)
    assert set(found) == {one}
    assert found[one][labels.IMAGE] == first and found[one][labels.ROLE] == labels.ROLE_CACHE
    assert next_starts(project, path, state) == {"chat": "warm", "tools": "warm"}  # each start served on it
    same = run_cli("plan", "-f", str(path), "--detailed-exitcode", env=state)
    assert same.returncode == 0 and same.stdout.startswith("No changes."), same.stdout + same.stderr
    assert runtime.exec(f"aigo-{project}-chat", ["touch", "/root/.cache/compiled-by-1"])[0] == 0

    # an earlier aigo-apply's one volume per project, which nothing mounts any more
    runtime.api.create_volume(name=legacy_cache_volume(project), labels=labels.for_volume(project))
    moved = config(tmp_path, project, engine_image=second)
    assert next_starts(project, moved, state) == {"chat": "cold", "tools": "cold"}  # the new image: nothing yet
    applied = run_cli("apply", "-f", str(moved), "-y", env=state)
    out = applied.stdout + applied.stderr
    assert applied.returncode == 0 and "2 replaced" in applied.stdout, out
    assert f"removed the cache volume {one} (the compile cache of {first}, which no model of the file uses now)" in out
    assert f"removed the cache volume {legacy_cache_volume(project)} (the one cache volume per project" in out
    assert cache_mounts(runtime, project) == {"chat": [two], "tools": [two]}
    assert set(volumes(runtime, project)) == {two}
    assert runtime.exec(f"aigo-{project}-chat", ["ls", "/root/.cache/compiled-by-1"])[0] != 0  # another image's: gone
    assert next_starts(project, moved, state) == {"chat": "warm", "tools": "warm"}
    again = run_cli("plan", "-f", str(moved), "--detailed-exitcode", env=state)
    assert again.returncode == 0 and again.stdout.startswith("No changes."), again.stdout + again.stderr

    gone = run_cli("destroy", "-f", str(moved), "-y", env=state)
    assert gone.returncode == 0 and f"removed the cache volume {two}" in gone.stdout, gone.stdout + gone.stderr
    assert volumes(runtime, project) == {}
