"""A stalled engine, on the real Docker engine and HAProxy with the stub engine: it passes /health
while it holds a request and makes no token (AIGO_STUB_HOLD_MAX_TOKENS holds one without generating),
so once router.stall_seconds pass the router's /metrics says aigo_engine_stalled 1 and `status` says
stalled; the other model, idle, is not stalled, and the stalled one is not once its request ends. The
router reads each engine's own names (vLLM's, SGLang's and llama.cpp's running gauge and token counter)."""

from __future__ import annotations

import json
import textwrap
import threading
import time

import httpx
import pytest

from helpers.cli import run_cli
from helpers.configs import free_port, model_folder, write_config

SOURCES = {"vllm": "{path: m}", "sglang": "{path: m}", "llama.cpp": "{path: gguf/tiny-Q4_K_M.gguf}"}


@pytest.fixture(params=sorted(SOURCES))
def proj(request, tmp_path, project):
    engine = request.param
    model_folder(tmp_path / "m")
    (tmp_path / "gguf").mkdir()
    (tmp_path / "gguf" / "tiny-Q4_K_M.gguf").write_bytes(b"GGUF")
    port = free_port()
    env = {"AIGO_STATE_DIR": str(tmp_path / "state")}
    stub = '{image: aigo-stub-engine, image_tag: "1"}'
    path = write_config(
        tmp_path,
        textwrap.dedent(f"""
        version: 1
        project: {project}
        engines: {{vllm: {stub}, sglang: {stub}, llama.cpp: {stub}}}
        router: {{port: {port}, image: aigo-haproxy, image_tag: bookworm, stall_seconds: 3}}
        models:
          slow:
            engine: {engine}
            source: {SOURCES[engine]}
            context_length: 4096
            gpus: none
            env: {{AIGO_STUB_HOLD_MAX_TOKENS: "7:12"}}
          idle:
            source: {{path: m}}
            context_length: 4096
            gpus: none
        """),
    )
    result = run_cli("apply", "-f", str(path), "-y", env=env, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    yield path, env, f"http://127.0.0.1:{port}", project
    run_cli("destroy", "-f", str(path), "-y", env=env)


def stalled(url: str, project: str) -> dict[str, str]:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    out = {}
    for line in text.splitlines():
        if line.startswith("aigo_engine_stalled{") and f'project="{project}"' in line:
            out[line.split('model="')[1].split('"')[0]] = line.rsplit(" ", 1)[1]
    return out


def test_an_engine_holding_a_request_without_a_token_is_stalled(proj):
    path, env, url, project = proj
    assert stalled(url, project) == {"slow": "0", "idle": "0"}
    body = {"model": "slow", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 7}  # held 12 s
    held = threading.Thread(target=lambda: httpx.post(f"{url}/v1/chat/completions", json=body, timeout=60))
    held.start()
    try:
        deadline, seen = time.monotonic() + 10, {}
        while time.monotonic() < deadline and seen.get("slow") != "1":
            time.sleep(0.5)
            seen = stalled(url, project)
        assert seen == {"slow": "1", "idle": "0"}
        rows = {
            r["model"]: r
            for r in json.loads(run_cli("status", "-f", str(path), "-o", "json", env=env).stdout)["models"]
        }
        assert rows["slow"]["stalled"] is True and rows["idle"]["stalled"] is False
        text = run_cli("status", "-f", str(path), env=env).stdout
        assert "running (stalled)" in text
    finally:
        held.join(timeout=30)
    assert stalled(url, project)["slow"] == "0"  # its request ended: nothing runs
