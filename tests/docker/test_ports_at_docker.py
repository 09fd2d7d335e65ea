"""A port held outside Docker: people moving from llama-swap, Ollama, Open WebUI or a
hand-run `vllm serve` have a program on the router's port, and most answer /health with 200. Here a
real Python process listens on the router's port (on 127.0.0.1, and on every address) and answers
200 everywhere: `plan` blocks naming the port, the address and the process, `apply` refuses and
creates nothing; with the check ignored, the router that cannot bind is never said to serve and is
not left restarting. This project's own router (and an engine's published port) on the same ports
after an apply is no clash: the next plan says "No changes."."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from aigo_apply.desired import labels

from helpers.cli import run_cli
from helpers.configs import free_port, model_folder, router_yaml, write_config

SERVER = """
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

class Ok(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"status": "ok"}')

    def log_message(self, *args):
        pass

server = HTTPServer((sys.argv[1], int(sys.argv[2])), Ok)
print("listening", flush=True)
server.serve_forever()
"""


@pytest.fixture
def other_program():
    """Start a program that holds (address, port) and answers 200 to any GET; stopped afterwards."""
    started: list[subprocess.Popen] = []

    def start(address: str, port: int) -> subprocess.Popen:
        child = subprocess.Popen([sys.executable, "-c", SERVER, address, str(port)], stdout=subprocess.PIPE, text=True)
        started.append(child)
        assert child.stdout is not None and child.stdout.readline().strip() == "listening"
        return child

    yield start
    for child in started:
        child.kill()
        child.wait(timeout=10)


def _config(tmp_path: Path, project: str, router_port: int, model_port: int | None = None) -> Path:
    model_folder(tmp_path / "m")
    port_line = f"\n            port: {model_port}" if model_port else ""
    return write_config(
        tmp_path,
        textwrap.dedent(f"""
        version: 1
        project: {project}
        engines: {{vllm: {{image: aigo-stub-engine, image_tag: "1"}}}}
        {router_yaml(router_port)}
        defaults: {{ready_timeout: 60}}
        models:
          chat:
            source: {{path: m}}
            context_length: 4096
            gpus: none
            env: {{AIGO_STUB_LOAD_SECONDS: "0.2"}}{port_line}
        """),
    )


def _containers(runtime, project: str) -> list[str]:
    return [c["Names"][0] for c in runtime.api.containers(all=True, filters=labels.project_filter(project))]


@pytest.mark.parametrize("address", ["127.0.0.1", "0.0.0.0"])
def test_a_program_on_the_routers_port_blocks_plan_and_apply_creates_nothing(
    runtime, project, tmp_path, other_program, address
):
    port = free_port()
    held = other_program(address, port)
    process = Path(f"/proc/{held.pid}/comm").read_text().strip()
    path = _config(tmp_path, project, port)
    env = {"AIGO_STATE_DIR": str(tmp_path / "state")}

    plan = run_cli("plan", "-f", str(path), env=env)
    out = plan.stdout + plan.stderr
    assert plan.returncode == 1 and "Traceback" not in out, out
    assert f"host.port: router.port {port}: {address}:{port} is already in use by {process} (pid {held.pid})" in out
    assert "fix: stop it, or choose another router.port" in out

    applied = run_cli("apply", "-f", str(path), "-y", env=env)
    assert applied.returncode == 1 and "the plan is blocked" in applied.stderr, applied.stdout + applied.stderr
    assert _containers(runtime, project) == []  # nothing was created


def test_with_the_check_ignored_the_router_is_never_said_to_serve_and_is_not_left_restarting(
    runtime, project, tmp_path, other_program
):
    port = free_port()
    other_program("127.0.0.1", port)
    path = _config(tmp_path, project, port)
    env = {"AIGO_STATE_DIR": str(tmp_path / "state")}

    began = time.monotonic()
    applied = run_cli("apply", "-f", str(path), "-y", "--ignore-readiness", "host.port", env=env, timeout=120)
    out = applied.stdout + applied.stderr
    assert applied.returncode == 1 and "Traceback" not in out, out
    assert "router serving" not in out, out
    assert "cannot bind socket" in out  # HAProxy's own words, from its log
    assert f"HAProxy cannot listen on 127.0.0.1:{port}: another program holds the port" in out, out
    assert f"the router container aigo-{project}-router was removed" in out, out
    assert time.monotonic() - began < 25, "the router's exit is seen at once, not after the 30 s wait"
    assert f"/aigo-{project}-router" not in _containers(runtime, project)  # not restarting forever


def test_our_own_router_and_engine_ports_are_no_clash(runtime, project, tmp_path):
    path = _config(tmp_path, project, free_port(), model_port=free_port())
    env = {"AIGO_STATE_DIR": str(tmp_path / "state")}
    applied = run_cli("apply", "-f", str(path), "-y", env=env, timeout=120)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "router serving on" in applied.stdout + applied.stderr

    again = run_cli("plan", "-f", str(path), env=env)
    out = again.stdout + again.stderr
    assert again.returncode == 0 and "No changes." in out and "host.port" not in out, out
