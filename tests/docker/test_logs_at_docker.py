"""`aigo-apply logs` on the real Docker engine with stub engines: the last lines of each model and
the router, prefixed with the alias when several are shown, secrets redacted (a careless engine
prints one), unknown names refused before anything is read, and --follow across a parallel replace
of the model's container until Ctrl-C (exit 130, no traceback)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from helpers.cli import ROOT, run_cli
from helpers.configs import free_port, model_folder, write_config

SECRET = "s3cr3t-value-of-the-test-93f1"


class Project:
    def __init__(self, tmp_path, name):
        self.tmp, self.name, self.port = tmp_path, name, free_port()
        self.env = {"AIGO_STATE_DIR": str(tmp_path / "state"), "LOGS_TEST_SECRET": SECRET}
        model_folder(tmp_path / "m")

    def write(self, context_length: int = 4096) -> str:
        text = textwrap.dedent(f"""
            version: 1
            project: {self.name}
            engines: {{vllm: {{image: aigo-stub-engine, image_tag: "1"}}}}
            router: {{port: {self.port}, image: aigo-haproxy, image_tag: bookworm}}
            defaults: {{ready_timeout: 60}}
            models:
              chat:
                source: {{path: m}}
                context_length: {context_length}
                gpus: none
                env:
                  AIGO_STUB_LOAD_SECONDS: "1"
                  AIGO_STUB_PRINT_ENV: SERVICE_TOKEN
                  SERVICE_TOKEN: {{from_env: LOGS_TEST_SECRET}}
              tools:
                source: {{path: m}}
                context_length: 4096
                gpus: none
            """)
        return str(write_config(self.tmp, text))

    def apply(self, path: str) -> None:
        result = run_cli("apply", "-f", path, "-y", env=self.env, timeout=180)
        assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture
def proj(tmp_path, project):
    p = Project(tmp_path, project)
    yield p
    run_cli("destroy", "-f", p.write(), "-y", env=p.env)


def test_logs_show_each_model_and_the_router_prefixed_with_secrets_redacted(proj):
    path = proj.write()
    proj.apply(path)
    every = run_cli("logs", "-f", path, env=proj.env)
    assert every.returncode == 0, every.stderr
    lines = every.stdout.splitlines()
    assert "chat | stub engine: SERVICE_TOKEN=***" in lines
    assert SECRET not in every.stdout + every.stderr
    assert any(line.startswith("tools | stub engine (vllm): serving ['tools']") for line in lines)
    assert any(line.startswith("router | ") for line in lines)
    assert {line.split(" | ")[0] for line in lines} == {"chat", "tools", "router"}
    one = run_cli("logs", "chat", "--tail", "1", "-f", path, env=proj.env)
    assert one.returncode == 0 and len(one.stdout.splitlines()) == 1, one.stdout
    assert " | " not in one.stdout  # one model: no prefix
    as_json = run_cli("logs", "chat", "-o", "json", "-f", path, env=proj.env)
    record = {"format_version": 1, "source": "chat", "line": "stub engine: SERVICE_TOKEN=***"}
    assert record in [json.loads(line) for line in as_json.stdout.splitlines()]
    refused = run_cli("logs", "chat", "nope", "-f", path, env=proj.env)
    assert refused.returncode == 64 and "no model 'nope'" in refused.stderr and refused.stdout == ""
    recent = run_cli("logs", "tools", "--since", "1h", "-f", path, env=proj.env)
    assert "serving ['tools']" in recent.stdout
    bad = run_cli("logs", "--since", "yesterday", "-f", path, env=proj.env)
    assert bad.returncode == 64 and "--since 'yesterday'" in bad.stderr


def test_follow_goes_on_across_a_replace_until_ctrl_c(proj):
    proj.apply(proj.write())
    follower = subprocess.Popen(
        [sys.executable, "-m", "aigo_apply", "logs", "chat", "--follow", "--tail", "0", "-f", proj.write()],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **proj.env},
        cwd=ROOT,
    )
    seen: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [seen.put(line) for line in follower.stdout], daemon=True).start()
    try:
        time.sleep(1.5)  # it is following (nothing printed: --tail 0)
        proj.apply(proj.write(context_length=2048))  # a parallel replace: a new container beside the old
        deadline, got = time.monotonic() + 30, []
        while time.monotonic() < deadline and not any("SERVICE_TOKEN" in g for g in got):
            try:
                got.append(seen.get(timeout=1))
            except queue.Empty:
                continue
        assert any("serving ['chat']" in g and "max_model_len=2048" in g for g in got), got
        assert "stub engine: SERVICE_TOKEN=***\n" in got and not [g for g in got if SECRET in g]
    finally:
        follower.send_signal(signal.SIGINT)
        _, err = follower.communicate(timeout=20)
    assert follower.returncode == 130, err
    assert "Traceback" not in err
