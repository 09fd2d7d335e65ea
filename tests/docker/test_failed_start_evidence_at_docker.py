"""A failed start keeps its evidence: the engine's whole log, kept in the state folder before apply
removes the container, named by apply (with the line that says what went wrong, though it came long
before the end), printed by `logs ALIAS --failed` and named by `status` until the model starts well.
The stub engine fails as vLLM does: the cause, then 40 lines of a traceback that only points back."""

from __future__ import annotations

import json

import pytest

from helpers.cli import run_cli
from helpers.stub_project import config

pytestmark = pytest.mark.docker

CAUSE = "torch.OutOfMemoryError: CUDA out of memory"


def test_a_failed_create_and_a_failed_replace_keep_the_whole_log(runtime, project, tmp_path):
    state = {"AIGO_STATE_DIR": str(tmp_path / "state")}
    failing = str(config(tmp_path, project, chat_env=', AIGO_STUB_FAIL_START: "vllm"'))

    applied = run_cli("apply", "-f", failing, "-y", env=state)
    assert applied.returncode == 1, applied.stdout + applied.stderr
    said = applied.stdout + applied.stderr
    assert CAUSE in said, said  # 40 lines before the end: not in the tail apply shows
    assert "aigo-apply logs chat --failed" in said
    assert not runtime.api.containers(all=True, filters={"name": f"aigo-{project}-chat"})  # removed, as before

    kept = run_cli("logs", "chat", "--failed", "-f", failing, env=state)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert "== the start of chat failed at" in kept.stdout and "== the log says: ERROR" in kept.stdout
    assert CAUSE in kept.stdout and "See root cause above" in kept.stdout  # the whole log, its end too
    assert "--served-model-name chat" in kept.stdout  # the command line it ran
    tail = run_cli("logs", "chat", "--failed", "--tail", "1", "-f", failing, env=state)
    assert tail.stdout.splitlines()[-1].startswith("RuntimeError: Engine core initialization failed")

    status = run_cli("status", "-f", failing, "-o", "json", env=state)
    chat = next(m for m in json.loads(status.stdout)["models"] if m["model"] == "chat")
    assert chat["last_failed_start"] and CAUSE in chat["last_failed_start"]["error"]
    text = run_cli("status", "-f", failing, env=state).stdout
    assert "chat: its last start failed at" in text and "aigo-apply logs chat --failed" in text

    # a good start: status no longer says the last start failed; the evidence stays for logs --failed
    good = str(config(tmp_path, project))
    assert run_cli("apply", "-f", good, "-y", env=state).returncode == 0
    status = run_cli("status", "-f", good, "-o", "json", env=state)
    chat = next(m for m in json.loads(status.stdout)["models"] if m["model"] == "chat")
    assert chat["last_failed_start"] is None and chat["ready"]

    # a replace that fails: the old engine is put back, the new one's log is kept, status says so
    failing = str(config(tmp_path, project, chat_env=', AIGO_STUB_FAIL_START: "vllm"'))  # the same file, again
    replaced = run_cli("apply", "-f", failing, "-y", env=state)
    assert replaced.returncode == 1, replaced.stdout + replaced.stderr
    status = run_cli("status", "-f", failing, "-o", "json", env=state)
    chat = next(m for m in json.loads(status.stdout)["models"] if m["model"] == "chat")
    assert chat["ready"] and chat["last_failed_start"] and CAUSE in chat["last_failed_start"]["error"]

    # destroy takes the kept logs with it
    assert run_cli("destroy", "-f", good, "-y", env=state).returncode == 0
    assert not (tmp_path / "state" / project / "failed-starts").exists()


def test_logs_failed_without_a_kept_start_says_so(runtime, project, tmp_path):
    state = {"AIGO_STATE_DIR": str(tmp_path / "state")}
    path = str(config(tmp_path, project))
    result = run_cli("logs", "chat", "--failed", "-f", path, env=state)
    assert result.returncode == 64 and "no failed start of chat is kept" in result.stderr, result.stderr
    both = run_cli("logs", "chat", "--failed", "--follow", "-f", path, env=state)
    assert both.returncode == 64 and "neither --follow nor --since" in both.stderr
