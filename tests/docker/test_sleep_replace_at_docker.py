"""A replace that puts the old engine to sleep instead of stopping it (the plan's `sleep` way,
platforms/docker/sleep_replace.py), on the real Docker engine, the real router and the stub engine's
sleep API: a new engine that fails gives the model back by waking the old one, in far less time than the old
one's start; a new engine that serves takes the route and the old one goes. Requests sent through
the router meanwhile, under a bounded load, all succeed (held, then answered by whichever serves).

The plan chooses this way only for a vLLM engine on a GPU (vLLM's sleep mode needs CUDA) from NVML's
figures and the host's free memory; that choice and its reasons are the pure planner's
(tests/unit/plan/test_replace_strategy.py). This host has no GPU, so the test runs `apply` in this
process with that one decision made `sleep` for the model, and the stub engine is started with
AIGO_STUB_SLEEP_MODE (its sleep API without --enable-sleep-mode, which aigo-apply passes on a GPU
only). Everything else is the real apply: plan, hold, sleep, start, wait, route, wake, journal."""

from __future__ import annotations

import json
import textwrap
import threading
import time

import httpx
import pytest

import aigo_apply.plan.planner as planner
from aigo_apply.app.apply import ApplyRequest, run_apply
from aigo_apply.cli.reporter import TextReporter
from aigo_apply.desired import labels
from aigo_apply.desired.types import socket_file
from aigo_apply.plan.replace_strategy import Strategy

from helpers.cli import run_cli
from helpers.configs import free_port, model_folder, router_yaml, write_config

pytestmark = pytest.mark.docker

OLD_LOAD_S = 20  # the old engine's start: a restart of it instead of a wake would take at least this
LOAD_S = 60  # the load's bound in seconds (it also stops when told)


def _config(tmp_path, project, port, env: str):
    model_folder(tmp_path / "m")
    return write_config(
        tmp_path,
        textwrap.dedent(f"""
        version: 1
        project: {project}
        engines: {{vllm: {{image: aigo-stub-engine, image_tag: "1"}}}}
        {router_yaml(port)}
        defaults: {{ready_timeout: 90}}
        models:
          chat:
            source: {{path: m}}
            context_length: 4096
            gpus: none
            env: {{AIGO_STUB_SLEEP_MODE: "1", {env}}}
        """),
    )


class Load:
    """Clients asking the router for `chat` one request after another, until stopped or LOAD_S."""

    def __init__(self, port: int, clients: int = 4):
        self.url = f"http://127.0.0.1:{port}/v1/chat/completions"
        self.stop = threading.Event()
        self.ok = 0
        self.failed: list[str] = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._client) for _ in range(clients)]
        for thread in self.threads:
            thread.start()

    def _client(self) -> None:
        body = {"model": "chat", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        deadline = time.monotonic() + LOAD_S
        with httpx.Client(timeout=120) as client:
            while not self.stop.is_set() and time.monotonic() < deadline:
                try:
                    reply = client.post(self.url, json=body)
                    outcome = None if reply.status_code == 200 else f"{reply.status_code} {reply.text[:200]}"
                except httpx.HTTPError as exc:
                    outcome = repr(exc)
                with self.lock:
                    if outcome is None:
                        self.ok += 1
                    else:
                        self.failed.append(outcome)
                time.sleep(0.05)

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=150)


def _engines(runtime, project) -> list[dict]:
    return [
        c
        for c in runtime.list_containers()
        if c["Labels"].get(labels.PROJECT) == project and c["Labels"].get(labels.MODEL) == "chat"
    ]


def _stats(runtime, project) -> dict:
    """The stub's sleep counts of the one engine serving chat, read on its socket."""
    (engine,) = _engines(runtime, project)
    socket = next(m["Source"] for m in engine["Mounts"] if m["Destination"] == "/run/aigo")
    slot = engine["Labels"].get(labels.SLOT, "a")
    with httpx.Client(transport=httpx.HTTPTransport(uds=f"{socket}/{socket_file(slot)}")) as c:
        return c.get("http://engine/stub/stats", timeout=5).json()


def test_a_failed_new_engine_wakes_the_sleeping_old_one_and_a_good_one_replaces_it(
    runtime, project, tmp_path, monkeypatch, capsys
):
    port = free_port()
    state = tmp_path / "state"
    monkeypatch.setenv("AIGO_STATE_DIR", str(state))
    first = _config(tmp_path, project, port, f'AIGO_STUB_LOAD_SECONDS: "{OLD_LOAD_S}"')
    started = run_cli("apply", "-f", str(first), "-y", env={"AIGO_STATE_DIR": str(state)})
    assert started.returncode == 0, started.stdout + started.stderr
    (old,) = _engines(runtime, project)
    old_started = runtime.api.inspect_container(old["Id"])["State"]["StartedAt"]

    real_choose = planner.choose
    chosen: list[str] = []

    def sleep_way(alias, *args, **kwargs):  # the one decision this GPU-less host cannot reach itself
        real = real_choose(alias, *args, **kwargs)
        chosen.append(f"{alias}: {real}")
        return Strategy("sleep", "the old engine sleeps (chosen by the test: this host has no GPU)")

    monkeypatch.setattr(planner, "choose", sleep_way)

    # 1. the new engine fails its start: the old one, asleep meanwhile, wakes and serves again
    failing = _config(tmp_path, project, port, 'AIGO_STUB_LOAD_SECONDS: "1", AIGO_STUB_FAIL_START: "1"')
    load = Load(port)
    time.sleep(1)
    began = time.monotonic()
    try:
        code = run_apply(ApplyRequest(file=str(failing), yes=True), TextReporter())
        took = time.monotonic() - began
        time.sleep(1)
    finally:
        load.finish()
    out = capsys.readouterr()
    text = out.out + out.err
    assert chosen and code == 1, text
    assert "sleeps (its weights in host memory" in text, text
    assert "serves again" in text and "woke in" in text, text
    woke_s = float(text.split("woke in ", 1)[1].split(" s", 1)[0])
    assert woke_s < 5, text  # a wake, not a start of OLD_LOAD_S
    assert took < OLD_LOAD_S, (took, text)  # the whole failed replace took less than the old one's start
    (after,) = _engines(runtime, project)
    assert after["Id"] == old["Id"], "the old engine was woken, not replaced or recreated"
    assert runtime.api.inspect_container(old["Id"])["State"]["StartedAt"] == old_started, "it was not restarted"
    stats = _stats(runtime, project)
    assert stats["sleeps"] == 1 and stats["wakes"] == 1 and not stats["asleep"], stats
    assert stats["arrived_asleep"] == 0, stats  # the router held every request while it slept
    assert load.failed == [] and load.ok > 0, (load.ok, load.failed[:5])
    status = run_cli("status", "-f", str(failing), "-o", "json", env={"AIGO_STATE_DIR": str(state)})
    (model,) = json.loads(status.stdout)["models"]
    assert model["last_failed_start"] is not None, model  # the failed engine's evidence is kept

    # 2. a new engine that serves: the route moves to it, and the old one, asleep, goes
    good = _config(tmp_path, project, port, 'AIGO_STUB_LOAD_SECONDS: "2"')
    load = Load(port)
    time.sleep(1)
    try:
        code = run_apply(ApplyRequest(file=str(good), yes=True), TextReporter())
        time.sleep(1)
    finally:
        load.finish()
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == 0, text
    assert ", asleep, was removed" in text, text
    (new,) = _engines(runtime, project)
    assert new["Id"] != old["Id"] and new["Labels"].get(labels.SLOT) == "b", new["Labels"]
    assert load.failed == [] and load.ok > 0, (load.ok, load.failed[:5])
    stats = _stats(runtime, project)
    assert stats["sleeps"] == 0 and stats["completions"] > 0, stats  # the new one serves, awake
    plan = run_cli("plan", "-f", str(good), "--detailed-exitcode", env={"AIGO_STATE_DIR": str(state)})
    assert plan.returncode == 0, plan.stdout + plan.stderr  # nothing left to do, nothing left behind
