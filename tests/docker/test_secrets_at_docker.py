"""Secrets against the real daemon: a reference that cannot or must not be read
(a FIFO, a NUL byte, an oversized file, a link to /etc/shadow, the Hugging Face token under another
name) is a plan blocker: apply refuses in bounded time, before any change, never prints a value,
and leaves the project's lock free."""

from __future__ import annotations

import json
import os
import time
import uuid

import pytest

from aigo_apply.desired import labels

from helpers.cli import run_cli
from helpers.stub_project import config

VALUE = "s3cr3t-Sec5-" + uuid.uuid4().hex[:8]


@pytest.fixture
def sec5(runtime):
    """A fresh project name (prefix sec5); anything made under it is removed afterwards."""
    name = "sec5" + uuid.uuid4().hex[:8]
    yield name
    for c in runtime.api.containers(all=True, filters=labels.project_filter(name)):
        runtime.api.remove_container(c["Id"], force=True)


def containers(runtime, project):
    return [c["Id"] for c in runtime.api.containers(all=True, filters=labels.project_filter(project))]


def test_a_fifo_secret_is_refused_at_once_and_the_lock_is_free(runtime, sec5, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    path = config(tmp_path, sec5, chat_env=f", MY_SECRET: {{from_file: {fifo}}}")
    state = {"AIGO_STATE_DIR": str(tmp_path / "state")}
    for _ in range(2):  # the second run finds the lock free: the first one did not hang holding it
        start = time.monotonic()
        result = run_cli("apply", "-f", str(path), "-y", "--lock-timeout", "1", env=state)
        elapsed = time.monotonic() - start
        output = result.stdout + result.stderr
        assert result.returncode == 1, output
        assert elapsed < 20, f"apply took {elapsed:.1f} s"
        assert "secrets.reference: models.chat.env.MY_SECRET: the secret file" in output
        assert "is a FIFO (named pipe), not a regular file" in output and "Traceback" not in output
    assert containers(runtime, sec5) == []


def test_unreadable_and_unsafe_secrets_are_plan_blockers_and_never_printed(runtime, sec5, tmp_path):
    (tmp_path / "nul").write_bytes(VALUE.encode() + b"\x00tail")
    (tmp_path / "big").write_bytes(VALUE.encode() * 6000)
    (tmp_path / "shadow").symlink_to("/etc/shadow")
    refs = (
        f", NUL: {{from_file: {tmp_path / 'nul'}}}, BIG: {{from_file: {tmp_path / 'big'}}}"
        f", SHADOW: {{from_file: {tmp_path / 'shadow'}}}, HUB: {{from_env: SEC5_INNOCENT}}"
    )
    path = config(tmp_path, sec5, chat_env=refs)
    env = {"AIGO_STATE_DIR": str(tmp_path / "state"), "HF_TOKEN": VALUE + "-hub", "SEC5_INNOCENT": VALUE + "-hub"}
    plan = run_cli("plan", "-f", str(path), "--output", "json", env=env)
    assert plan.returncode == 1, plan.stderr
    blockers = {
        b["message"].split(":")[0]: b for b in json.loads(plan.stdout)["blockers"] if b["id"] == "secrets.reference"
    }
    assert sorted(blockers) == [f"models.chat.env.{n}" for n in ("BIG", "HUB", "NUL", "SHADOW")]
    assert "holds a control character" in blockers["models.chat.env.NUL"]["message"]
    assert "is larger than 65536 bytes" in blockers["models.chat.env.BIG"]["message"]
    assert "(a link to /etc/shadow) is inside the system folder /etc" in blockers["models.chat.env.SHADOW"]["message"]
    assert "holds the Hugging Face token" in blockers["models.chat.env.HUB"]["message"]
    for output in ("text", "json"):
        result = run_cli("apply", "-f", str(path), "-y", "--output", output, env=env)
        everything = result.stdout + result.stderr
        assert result.returncode == 1 and "the plan is blocked" in everything, everything
        assert VALUE not in everything and "Traceback" not in everything
    assert containers(runtime, sec5) == []
    journal = tmp_path / "state" / sec5 / "journal.jsonl"
    assert not journal.exists() or VALUE not in journal.read_text()


def test_a_plan_needs_only_the_secrets_of_what_it_changes(runtime, sec5, tmp_path):
    """Applied with the secret set; then, in a shell without it (a CI job), a plan of the same file is
    "No changes", and a change to another model is planned; only recreating the model that names the
    secret is blocked, before anything changes."""
    state = {"AIGO_STATE_DIR": str(tmp_path / "state")}
    path = config(tmp_path, sec5, chat_env=", MY_SECRET: {from_env: SEC5_VALUE}")
    applied = run_cli("apply", "-f", str(path), "-y", env={**state, "SEC5_VALUE": VALUE})
    assert applied.returncode == 0, applied.stdout + applied.stderr
    ids = sorted(containers(runtime, sec5))
    without = {**state, "SEC5_VALUE": ""}
    same = run_cli("plan", "-f", str(path), "--detailed-exitcode", env=without)
    assert same.returncode == 0 and same.stdout.startswith("No changes."), same.stdout + same.stderr
    other = config(tmp_path, sec5, chat_env=", MY_SECRET: {from_env: SEC5_VALUE}", tools_parser="hermes")
    planned = run_cli("plan", "-f", str(other), "--detailed-exitcode", env=without)
    assert planned.returncode == 2 and "blocked" not in planned.stdout, planned.stdout
    changed = config(tmp_path, sec5, chat_env=', MY_SECRET: {from_env: SEC5_VALUE}, LOG: "1"')
    blocked = run_cli("apply", "-f", str(changed), "-y", env=without)
    assert blocked.returncode == 1 and "secrets.reference: models.chat.env.MY_SECRET" in blocked.stdout
    assert sorted(containers(runtime, sec5)) == ids and VALUE not in blocked.stdout + blocked.stderr
