"""Mounts at the real Docker daemon: a model folder swapped for a symlink to
/etc after `plan --out` is refused at apply with nothing created; a missing local source blocks the
plan and Docker never creates the folder."""

from __future__ import annotations

import json
import os

import pytest

from aigo_apply.desired import labels

from helpers.cli import run_cli
from helpers.stub_project import config


@pytest.fixture
def state(tmp_path):
    return {"AIGO_STATE_DIR": str(tmp_path / "state")}


def _ours(runtime, project):
    return runtime.api.containers(all=True, filters=labels.project_filter(project))


def test_a_folder_swapped_for_a_symlink_after_plan_is_refused_at_apply(runtime, project, tmp_path, state):
    path = config(tmp_path, project)
    saved = tmp_path / "plan.json"
    assert run_cli("plan", "-f", str(path), "--out", str(saved), env=state).returncode in (0, 2)
    os.rename(tmp_path / "m", tmp_path / "m.real")
    os.symlink("/etc", tmp_path / "m")
    for args in (["apply", str(saved), "-y"], ["apply", "-f", str(path), "-y"]):
        result = run_cli(*args, env=state)
        output = result.stdout + result.stderr
        assert result.returncode == 1 and "Traceback" not in output, output
        assert "system folder /etc" in output, output
    assert _ours(runtime, project) == []


def test_a_missing_local_source_blocks_the_plan_and_docker_creates_nothing(runtime, project, tmp_path, state):
    path = config(tmp_path, project)
    (tmp_path / "m" / "config.json").unlink()
    os.rmdir(tmp_path / "m")
    plan = run_cli("plan", "-f", str(path), "-o", "json", env=state)
    blockers = json.loads(plan.stdout)["blockers"]
    assert [b["id"] for b in blockers] == ["model.path", "model.path"], plan.stdout
    assert "does not exist on this machine" in blockers[0]["message"]
    result = run_cli("apply", "-f", str(path), "-y", env=state)
    assert result.returncode == 1 and "the plan is blocked" in result.stdout + result.stderr
    assert not (tmp_path / "m").exists() and _ours(runtime, project) == []
