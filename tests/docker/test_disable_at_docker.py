"""`enabled: false` on the real Docker engine and router: the container goes, the route goes, the
other model keeps serving untouched, status says disabled; enabled again, it comes back on its port."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from helpers.cli import run_cli
from helpers.stub_project import ROUTER_PORTS, chat, config, engine_addresses


@pytest.fixture
def state(tmp_path, monkeypatch):
    path = tmp_path / "state"
    monkeypatch.setenv("AIGO_STATE_DIR", str(path))
    return {"AIGO_STATE_DIR": str(path)}


def listed(port: int) -> list[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as reply:
        return sorted(m["id"] for m in json.load(reply)["data"])


def disabled(tmp_path, project):
    path = config(tmp_path, project)
    marker = "    vllm: {tool_call_parser: llama3_json}\n"
    text = path.read_text().replace(marker, marker + "    enabled: false\n")
    assert "enabled: false" in text
    path.write_text(text)
    return path


def test_disable_then_enable_a_model(runtime, project, tmp_path, state):
    path = config(tmp_path, project)
    assert run_cli("apply", "-f", str(path), "-y", env=state).returncode == 0
    before = engine_addresses(runtime, project)
    router = ROUTER_PORTS[project]
    chat_id = next(c["Id"] for c in runtime.list_containers() if c["Names"][0].endswith(f"{project}-chat"))

    path = disabled(tmp_path, project)
    plan = run_cli("plan", "-f", str(path), env=state)
    assert "model.tools" in plan.stdout and "disabled" in plan.stdout and "enabled: false" in plan.stdout, plan.stdout
    result = run_cli("apply", "-f", str(path), "-y", env=state)
    assert result.returncode == 0, result.stdout + result.stderr
    assert set(engine_addresses(runtime, project)) == {"chat"}
    assert listed(router) == ["chat"]
    assert chat(router, "chat")["model"] == "chat"
    with pytest.raises(urllib.error.HTTPError) as gone:
        chat(router, "tools")
    assert gone.value.code == 404
    assert any(c["Id"] == chat_id for c in runtime.list_containers())  # the other model was not touched
    status = run_cli("status", "-f", str(path), env=state)
    row = next(line for line in status.stdout.splitlines() if line.startswith("tools"))
    assert "disabled" in row, status.stdout
    again = run_cli("plan", "-f", str(path), env=state)
    assert again.returncode == 0 and again.stdout.startswith("No changes."), again.stdout

    path = config(tmp_path, project)
    assert run_cli("apply", "-f", str(path), "-y", env=state).returncode == 0
    assert engine_addresses(runtime, project) == before
    assert listed(router) == ["chat", "tools"] and chat(router, "tools")["model"] == "tools"
