"""Fault tests against the real daemon, each bounded in time and stopping by itself: SIGINT at every
step of an apply (read from the apply journal as it is written), a full disk under the state
directory, and the Docker daemon restarted during `status` and during `apply`. Marked disruptive,
so they run after every other test (tests/conftest.py): the daemon restart touches every container
on the machine."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from helpers.cli import run_cli
from helpers.paths import ROOT
from helpers.stub_project import ROUTER_PORTS, chat, config, engine_addresses

pytestmark = pytest.mark.disruptive


def journal_lines(state_dir: Path, project: str) -> list[dict]:
    path = state_dir / project / "journal.jsonl"
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return []


def converged(runtime, project, path, state) -> None:
    again = run_cli("apply", "-f", str(path), "-y", env=state)
    assert again.returncode == 0, again.stdout + again.stderr
    final = run_cli("plan", "-f", str(path), "--detailed-exitcode", env=state)
    assert final.returncode == 0 and final.stdout.startswith("No changes."), final.stdout
    for alias, port in engine_addresses(runtime, project).items():
        # after a daemon restart Docker restarts the engines (unless-stopped), which load again first
        deadline = time.monotonic() + 30
        while True:
            try:
                assert chat(port, alias)["model"] == alias
                break
            except (OSError, httpx.HTTPError):  # refused on its socket (or port) while it loads
                assert time.monotonic() < deadline, f"{alias} did not serve again within 30 s"
                time.sleep(0.2)


def test_sigint_at_every_step_of_an_apply_then_apply_converges(runtime, project, tmp_path):
    state = {"AIGO_STATE_DIR": str(tmp_path / "state")}
    path = config(
        tmp_path,
        project,
        load="0.5",
        extra="  third:\n    source: {path: m}\n    context_length: 2048\n    gpus: none\n",
    )
    # how many journal steps a full apply from nothing writes
    assert run_cli("apply", "-f", str(path), "-y", env=state).returncode == 0
    steps = len(journal_lines(tmp_path / "state", project))
    assert steps >= 8
    for index in range(1, steps):
        assert run_cli("destroy", "-f", str(path), "-y", env=state).returncode == 0
        (tmp_path / "state" / project / "journal.jsonl").unlink(missing_ok=True)
        proc = subprocess.Popen(
            [sys.executable, "-m", "aigo_apply", "apply", "-f", str(path), "-y"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **state},
            cwd=ROOT,
        )
        deadline = time.monotonic() + 30
        while len(journal_lines(tmp_path / "state", project)) < index and proc.poll() is None:
            assert time.monotonic() < deadline, f"step {index} never came"
            time.sleep(0.005)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode in (0, 130), (index, out, err)
        assert "Traceback" not in err, err
        converged(runtime, project, path, state)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("mount"), reason="mounting a small tmpfs needs root")
def test_a_full_state_directory_is_a_clear_error_and_changes_nothing(runtime, project, tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        # the state root is an empty folder of its own on the full disk: a root that holds
        # another program's files is refused before anything is written, which is not this test
        state_root = full / "state"
        state_root.mkdir()
        subprocess.run(["dd", "if=/dev/zero", f"of={full / 'filler'}", "bs=4k"], capture_output=True)
        result = run_cli("apply", "-f", str(config(tmp_path, project)), "-y", env={"AIGO_STATE_DIR": str(state_root)})
        assert result.returncode == 1, result.stdout + result.stderr
        assert "No space left on device" in result.stderr and "Traceback" not in result.stderr, result.stderr
        assert "AIGO_STATE_DIR" in result.stderr  # the message says how to point it elsewhere
        assert not runtime.api.containers(all=True, filters={"label": f"io.aigo-apply.project={project}"})
    finally:
        subprocess.run(["umount", "-l", str(full)], check=False)


def _own_dockerd() -> bool:
    """Only restart a daemon this test run may restart: root, dockerd started by scripts/setup."""
    if os.geteuid() != 0 or not shutil.which("dockerd"):
        return False
    if subprocess.run(["systemctl", "is-active", "--quiet", "docker"], capture_output=True).returncode == 0:
        return False
    return subprocess.run(["pgrep", "-x", "dockerd"], capture_output=True).returncode == 0


def restart_dockerd() -> None:
    subprocess.run(["pkill", "-TERM", "-x", "dockerd"], check=False)
    deadline = time.monotonic() + 60
    while subprocess.run(["pgrep", "-x", "dockerd"], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, "dockerd did not stop"
        time.sleep(0.2)
    subprocess.Popen(
        ["dockerd"], stdout=open("/tmp/aigo-dockerd.log", "a"), stderr=subprocess.STDOUT, start_new_session=True
    )
    while subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        assert time.monotonic() < deadline, "dockerd did not come back"
        time.sleep(0.3)


@pytest.mark.skipif(not _own_dockerd(), reason="restarts the Docker daemon: only where the tests started it")
def test_docker_daemon_restarts_during_status_and_apply(runtime, project, tmp_path):
    state = {"AIGO_STATE_DIR": str(tmp_path / "state")}
    path = config(tmp_path, project, load="3")
    assert run_cli("apply", "-f", str(path), "-y", env=state).returncode == 0
    subprocess.run(["pkill", "-TERM", "-x", "dockerd"], check=False)
    time.sleep(1.0)
    status = run_cli("status", "-f", str(path), env=state)  # the daemon is going or gone
    assert status.returncode == 1 and "Traceback" not in status.stderr, status.stdout + status.stderr
    assert "Docker" in status.stderr
    restart_dockerd()

    changed = config(tmp_path, project, load="3", tools_parser="hermes")
    proc = subprocess.Popen(
        [sys.executable, "-m", "aigo_apply", "apply", "-f", str(changed), "-y"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **state},
        cwd=ROOT,
    )
    time.sleep(1.5)  # the new engine is loading
    restart_dockerd()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode in (0, 1), out + err
    assert "Traceback" not in err and "internal error" not in err, err
    converged(runtime, project, changed, state)


@pytest.mark.skipif(not _own_dockerd(), reason="restarts the Docker daemon: only where the tests started it")
def test_after_a_daemon_restart_everything_serves_again_with_nobody_running_apply(runtime, project, tmp_path):
    """A reboot needs nobody: the engines and the router (whose reloads never made Docker count it as
    stopped by hand) come back by their restart policy, the routes follow the engines' health, and the
    plan says no changes. A crashed engine is restarted the same way and its route follows."""
    state = {"AIGO_STATE_DIR": str(tmp_path / "state")}
    path = config(tmp_path, project, load="3")  # long enough for the router to see a restarted engine down
    assert run_cli("apply", "-f", str(path), "-y", env=state).returncode == 0
    # a replace reloads the router several times, as every apply that changes a model does
    assert run_cli("apply", "-f", str(path), "-y", "--replace", "chat", env=state).returncode == 0
    port = ROUTER_PORTS[project]
    restart_dockerd()
    deadline = time.monotonic() + 60
    while True:
        try:
            listed = {m["id"] for m in httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=3).json()["data"]}
            if listed == {"chat", "tools"} and all(_router_chat(port, a) == 200 for a in ("chat", "tools")):
                break
        except (httpx.HTTPError, ValueError, KeyError):
            pass
        assert time.monotonic() < deadline, "the router and its engines did not serve again within 60 s by themselves"
        time.sleep(0.5)
    final = run_cli("plan", "-f", str(path), "--detailed-exitcode", env=state)
    assert final.returncode == 0 and final.stdout.startswith("No changes."), final.stdout + final.stderr
    # an engine that crashes: out of the list while down, back once Docker restarted it and it loads
    engine = runtime.api.inspect_container(f"aigo-{project}-tools")
    os.kill(engine["State"]["Pid"], signal.SIGKILL)
    deadline, seen_down = time.monotonic() + 30, False
    while True:
        listed = {m["id"] for m in httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=3).json()["data"]}
        seen_down = seen_down or "tools" not in listed
        if seen_down and "tools" in listed and _router_chat(port, "tools") == 200:
            break
        assert time.monotonic() < deadline, f"tools did not come back (listed {listed}, seen down {seen_down})"
        time.sleep(0.1)


def _router_chat(port: int, alias: str) -> int:
    reply = httpx.post(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        json={"model": alias, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1},
        timeout=5,
    )
    return reply.status_code
