"""`aigo-apply top --once` on the real Docker engine with stub engines: each model's state, requests,
tokens per second (measured between two reads while a client generates) and KV cache use, as JSON
for scripts and as a table for people."""

from __future__ import annotations

import json
import textwrap
import threading

import httpx
import pytest

from helpers.cli import run_cli
from helpers.configs import free_port, model_folder, write_config


@pytest.fixture
def proj(tmp_path, project):
    model_folder(tmp_path / "m")
    port = free_port()
    env = {"AIGO_STATE_DIR": str(tmp_path / "state")}
    path = write_config(
        tmp_path,
        textwrap.dedent(f"""
        version: 1
        project: {project}
        engines: {{vllm: {{image: aigo-stub-engine, image_tag: "1"}}}}
        router: {{port: {port}, image: aigo-haproxy, image_tag: bookworm}}
        models:
          busy:
            source: {{path: m}}
            context_length: 4096
            gpus: none
          quiet:
            source: {{path: m}}
            context_length: 4096
            gpus: none
        """),
    )
    result = run_cli("apply", "-f", str(path), "-y", env=env, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    yield path, env, f"http://127.0.0.1:{port}"
    run_cli("destroy", "-f", str(path), "-y", env=env)


def test_top_once_reads_each_engine_and_measures_tokens_per_second(proj):
    path, env, url = proj
    stop = threading.Event()

    def generate():
        body = {"model": "busy", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        with httpx.Client(timeout=10) as client:
            for _ in range(2000):  # bounded; stops with the view
                if stop.is_set():
                    return
                client.post(f"{url}/v1/chat/completions", json=body)

    load = threading.Thread(target=generate)
    load.start()
    try:
        result = run_cli("top", "--once", "--interval", "1", "-o", "json", "-f", str(path), env=env)
    finally:
        stop.set()
        load.join(timeout=30)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    rows = {r["model"]: r for r in report["models"]}
    assert set(rows) == {"busy", "quiet"} and report["gpus"] == []  # no GPU on this machine
    assert rows["busy"]["state"] == "running" and rows["busy"]["tokens_per_second"] > 0
    assert rows["quiet"]["tokens_per_second"] == 0 and rows["quiet"]["requests_running"] == 0
    assert rows["quiet"]["kv_cache_usage"] == 0 and rows["quiet"]["sleep"] == "awake"
    text = run_cli("top", "--once", "--interval", "0.5", "-f", str(path), env=env)
    assert text.returncode == 0 and "TOKENS/S" in text.stdout and "quiet" in text.stdout, text.stdout + text.stderr
