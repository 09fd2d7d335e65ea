"""The router comes back by itself: its reloads are signals sent inside the container, which Docker does
not count as a manual stop, so `unless-stopped` restarts a router whose HAProxy died (and would after a
reboot); a router that did stop is started by the next apply, and the plan says why. Bounded in time."""

from __future__ import annotations

import os
import signal
import time

import httpx
import pytest

from helpers.cli import run_cli
from helpers.stub_project import ROUTER_PORTS, config

pytestmark = pytest.mark.docker


def _router(runtime, project: str) -> dict:
    return runtime.api.inspect_container(f"aigo-{project}-router")


def _serves(port: int, alias: str, within: float) -> None:
    deadline = time.monotonic() + within
    while True:
        try:
            reply = httpx.post(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                json={"model": alias, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1},
                timeout=3,
            )
            if reply.status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"the router did not serve {alias} again within {within:.0f} s"
        time.sleep(0.1)


@pytest.mark.skipif(os.geteuid() != 0, reason="killing the router's HAProxy from the host needs root")
def test_a_router_reloaded_by_apply_is_restarted_by_docker_after_its_haproxy_dies(runtime, project, tmp_path):
    state = {"AIGO_STATE_DIR": str(tmp_path / "state")}
    path = str(config(tmp_path, project))
    assert run_cli("apply", "-f", path, "-y", env=state).returncode == 0
    # a replace holds the model's requests and reloads the router several times (hold, route, release)
    replaced = run_cli("apply", "-f", path, "-y", "--replace", "chat", env=state)
    assert replaced.returncode == 0, replaced.stdout + replaced.stderr
    before = _router(runtime, project)
    assert before["State"]["Running"] and before["HostConfig"]["RestartPolicy"]["Name"] == "unless-stopped"
    os.kill(before["State"]["Pid"], signal.SIGKILL)  # HAProxy's master, as the host sees it: a crash
    deadline = time.monotonic() + 20
    while True:
        now = _router(runtime, project)
        if now["State"]["Running"] and now["State"]["Pid"] != before["State"]["Pid"]:
            break
        assert time.monotonic() < deadline, (
            f"Docker did not restart the router (state {now['State']['Status']}, restarts {now['RestartCount']}): "
            "it counts the router as stopped by hand"
        )
        time.sleep(0.2)
    assert now["RestartCount"] == before["RestartCount"] + 1
    _serves(ROUTER_PORTS[project], "chat", within=15)
    again = run_cli("plan", "-f", path, "--detailed-exitcode", env=state)
    assert again.returncode == 0 and again.stdout.startswith("No changes."), again.stdout + again.stderr


def test_a_stopped_router_is_started_by_the_next_apply_which_says_why(runtime, project, tmp_path):
    state = {"AIGO_STATE_DIR": str(tmp_path / "state")}
    path = str(config(tmp_path, project))
    assert run_cli("apply", "-f", path, "-y", env=state).returncode == 0
    runtime.api.stop(f"aigo-{project}-router", timeout=5)
    plan = run_cli("plan", "-f", path, env=state)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "router container is exited" in plan.stdout and "Docker did not restart it" in plan.stdout, plan.stdout
    assert "docker kill --signal" in plan.stdout  # the cause earlier versions had, named
    applied = run_cli("apply", "-f", path, "-y", env=state)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    _serves(ROUTER_PORTS[project], "tools", within=15)
