"""An apply that stops in the middle of a recreate leaves nothing held: SIGHUP (a closed terminal, a
dropped SSH session) ends it as Ctrl-C does (the model put back, exit 130), and after a SIGKILL, which
nothing can handle, the router stops holding the model's requests by itself once the hold's lease lapses
and the new engine answers, instead of making each request wait router.hold_seconds and fail for as
long as the hold's bound. Bounded in time; each test stops by itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest

from helpers.cli import run_cli
from helpers.configs import free_port, model_folder, router_yaml, write_config
from helpers.paths import ROOT

pytestmark = pytest.mark.docker


def _config(tmp_path: Path, project: str, port: int, load: str) -> str:
    model_folder(tmp_path / "m")
    return str(
        write_config(
            tmp_path,
            textwrap.dedent(f"""
            version: 1
            project: {project}
            engines: {{vllm: {{image: aigo-stub-engine, image_tag: "1"}}}}
            {router_yaml(port)}
            models:
              chat:
                source: {{path: m}}
                context_length: 4096
                gpus: none
                update: recreate
                env: {{AIGO_STUB_LOAD_SECONDS: "{load}"}}
            """),
        )
    )


def _journal(state: Path, project: str) -> list[dict]:
    try:
        text = (state / project / "journal.jsonl").read_text()
    except OSError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _apply_until_the_new_engine_starts(path: str, state: Path, project: str) -> subprocess.Popen:
    """An apply in a child process (its own session, as a terminal's would be), once it holds the
    model and has created its new engine."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "aigo_apply", "apply", "-f", path, "-y"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "AIGO_STATE_DIR": str(state)},
        cwd=ROOT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not any("creating the new" in str(e.get("message", "")) for e in _journal(state, project)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the recreate never began"
        time.sleep(0.02)
    assert any(e["step"] == "hold" for e in _journal(state, project))
    time.sleep(0.5)  # created and started: the new engine loads
    return proc


def _chat(port: int, timeout: float) -> tuple[int, float]:
    began = time.monotonic()
    try:
        reply = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={"model": "chat", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1},
            timeout=timeout,
        )
        return reply.status_code, time.monotonic() - began
    except httpx.HTTPError:
        return 0, time.monotonic() - began


def test_a_sigkilled_recreate_holds_requests_only_until_the_new_engine_serves(runtime, project, tmp_path):
    state, port = tmp_path / "state", free_port()
    assert (
        run_cli(
            "apply", "-f", _config(tmp_path, project, port, "0.3"), "-y", env={"AIGO_STATE_DIR": str(state)}
        ).returncode
        == 0
    )
    proc = _apply_until_the_new_engine_starts(_config(tmp_path, project, port, "4"), state, project)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    # each request waits for the held model; once the lease lapses (15 s) and the new engine answers
    # (4 s of loading), it goes on: never the hold's own bound (~40 min) nor hold_seconds (300 s) each
    results: list[tuple[int, float]] = []
    clients = [threading.Thread(target=lambda: results.append(_chat(port, 60))) for _ in range(3)]
    for c in clients:
        c.start()
    for c in clients:
        c.join(timeout=90)
    assert [code for code, _ in results] == [200, 200, 200], results
    assert max(seconds for _, seconds in results) < 30, results
    # the plan names what the killed apply left: the kept copy of the old engine, and the router's hold
    plan = run_cli("plan", "-f", _config(tmp_path, project, port, "4"), env={"AIGO_STATE_DIR": str(state)})
    assert f"aigo-{project}-chat-aigo-previous" in plan.stdout, plan.stdout
    assert "the router holds the requests of 'chat' for a replace that did not finish" in plan.stdout, plan.stdout
    status = run_cli("status", "-f", _config(tmp_path, project, port, "4"), env={"AIGO_STATE_DIR": str(state)})
    assert f"aigo-{project}-chat-aigo-previous" in status.stdout, status.stdout
    again = run_cli("apply", "-f", _config(tmp_path, project, port, "4"), "-y", env={"AIGO_STATE_DIR": str(state)})
    assert again.returncode == 0, again.stdout + again.stderr
    final = run_cli(
        "plan", "-f", _config(tmp_path, project, port, "4"), "--detailed-exitcode", env={"AIGO_STATE_DIR": str(state)}
    )
    assert final.returncode == 0 and final.stdout.startswith("No changes."), final.stdout
    assert not list((state / project / "router" / "holds" / "models").glob("*"))


def test_sighup_ends_a_recreate_as_ctrl_c_does_and_leaves_nothing_held(runtime, project, tmp_path):
    state, port = tmp_path / "state", free_port()
    env = {"AIGO_STATE_DIR": str(state)}
    assert run_cli("apply", "-f", _config(tmp_path, project, port, "0.3"), "-y", env=env).returncode == 0
    proc = _apply_until_the_new_engine_starts(_config(tmp_path, project, port, "20"), state, project)
    os.killpg(proc.pid, signal.SIGHUP)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 130, (proc.returncode, out, err)
    assert "Traceback" not in err
    steps = [(e["step"], e["outcome"]) for e in _journal(state, project) if e["address"] == "model.chat"]
    assert ("recreate", "interrupted") in steps, steps
    assert not list((state / project / "router" / "holds" / "models").glob("*"))  # released
    deadline = time.monotonic() + 15  # the previous engine, started again (not waited for), serves
    while (code := _chat(port, 5)[0]) != 200:
        assert time.monotonic() < deadline, code
        time.sleep(0.2)
    names = {
        c["Names"][0].lstrip("/")
        for c in runtime.api.containers(all=True, filters={"label": f"io.aigo-apply.project={project}"})
    }
    assert names == {f"aigo-{project}-chat", f"aigo-{project}-router"}, names
