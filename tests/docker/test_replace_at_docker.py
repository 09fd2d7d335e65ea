"""Changing a running model without failing a request, on the real Docker engine and router with the
stub engine (it loads for a few seconds and holds each request a little, as a real one would), under a
bounded load through the router: a parallel replace moves the route to the new engine once it serves
and lets the old one drain; a new engine that never serves leaves the old one serving."""

from __future__ import annotations

import subprocess
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest

from aigo_apply.adapters.engine_http import call
from aigo_apply.desired.types import EngineAddress
from aigo_apply.platforms.docker.planning import load_desired
from aigo_apply.platforms.docker.platform import router_of

from helpers.cli import run_cli
from helpers.configs import free_port, model_folder, write_config
from helpers.load import Load

pytestmark = pytest.mark.slow


class Project:
    def __init__(self, tmp_path, name):
        self.tmp, self.name, self.port = tmp_path, name, free_port()
        self.env = {"AIGO_STATE_DIR": str(tmp_path / "state")}
        self.url = f"http://127.0.0.1:{self.port}"
        model_folder(tmp_path / "m")

    def write(self, context_length: int = 4096, extra_env: str = "", update: str = "") -> str:
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
                env: {{AIGO_STUB_LOAD_SECONDS: "3", AIGO_STUB_REPLY_SECONDS: "0.05"{extra_env}}}
            """) + (f"    update: {update}\n" if update else "")
        return str(write_config(self.tmp, text))

    def apply(self, path: str) -> subprocess.CompletedProcess:
        return run_cli("apply", "-f", path, "-y", env=self.env, timeout=180)

    def applied(self, path: str) -> None:
        result = self.apply(path)
        assert result.returncode == 0, result.stdout + result.stderr

    def max_model_len(self) -> int:
        return httpx.get(f"{self.url}/v1/models", timeout=5).json()["data"][0]["max_model_len"]


@pytest.fixture
def proj(tmp_path, project):
    return Project(tmp_path, project)


def test_a_parallel_replace_under_load_fails_no_request(proj, runtime):
    proj.applied(proj.write())
    old_id = runtime.api.inspect_container(f"aigo-{proj.name}-chat")["Id"]
    change = Load(proj.url, "chat", clients=12, seconds=90).across(lambda: proj.apply(proj.write(context_length=2048)))
    result = change.value
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(how: parallel: no GPU: the old and the new engine run side by side)" in result.stdout
    assert "drained in" in result.stdout
    assert not change.failed, change.failed[:5]
    assert len(change.during) >= 200, (len(change.during), len(change.results))
    # the new engine serves, under the model's own name, on the model's other socket; the old one is gone
    info = runtime.api.inspect_container(f"aigo-{proj.name}-chat")
    assert info["Id"] != old_id and info["Config"]["Labels"]["io.aigo-apply.slot"] == "b"
    assert proj.max_model_len() == 2048
    names = [c["Names"][0] for c in runtime.list_containers()]
    assert not [n for n in names if n.startswith(f"/aigo-{proj.name}-chat-aigo")]
    again = run_cli("plan", "-f", proj.write(context_length=2048), "--detailed-exitcode", env=proj.env)
    assert again.returncode == 0 and again.stdout.startswith("No changes."), again.stdout


def test_a_new_engine_that_never_serves_leaves_the_old_one_serving_with_no_failed_request(proj, runtime):
    proj.applied(proj.write())
    old_id = runtime.api.inspect_container(f"aigo-{proj.name}-chat")["Id"]
    failing = proj.write(context_length=2048, extra_env=', AIGO_STUB_FAIL_START: "1"')
    change = Load(proj.url, "chat", clients=8, seconds=90).across(lambda: proj.apply(failing))
    result = change.value
    assert result.returncode == 1, result.stdout + result.stderr
    assert "RuntimeError: stub engine told to fail at start-up" in result.stdout  # the engine's own words
    assert "the new engine was removed, and the previous" in result.stderr + result.stdout
    assert not change.failed, change.failed[:5]
    assert len(change.during) >= 50
    assert runtime.api.inspect_container(f"aigo-{proj.name}-chat")["Id"] == old_id
    assert proj.max_model_len() == 4096


def test_a_recreate_holds_the_models_requests_and_fails_none(proj, runtime):
    proj.applied(proj.write(update="recreate"))
    changed = proj.write(context_length=2048, update="recreate")
    change = Load(proj.url, "chat", clients=32, seconds=90).across(lambda: proj.apply(changed))
    result = change.value
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(how: recreate: models.chat.update is recreate)" in result.stdout
    assert "requests held by the router" in result.stdout
    assert not change.failed, change.failed[:5]
    assert len(change.during) >= 200, (len(change.during), len(change.results))
    waited = max(r.ended - r.started for r in change.during)
    assert waited > 2.0, waited  # some were held across the engine's 3 s start, and then served
    assert proj.max_model_len() == 2048


def _hold_one_second(path: str) -> str:
    text = open(path).read().replace("image_tag: bookworm}", "image_tag: bookworm, hold_seconds: 1}")
    open(path, "w").write(text)
    return path


def test_a_request_held_longer_than_hold_seconds_gets_a_503_with_retry_after(proj, runtime):
    proj.applied(_hold_one_second(proj.write(update="recreate")))
    changed = _hold_one_second(proj.write(context_length=2048, update="recreate"))
    change = Load(proj.url, "chat", clients=4, seconds=60).across(lambda: proj.apply(changed), steady=0.5)
    assert change.value.returncode == 0, change.value.stdout + change.value.stderr
    held_out = [r for r in change.results if r.status == 503]
    assert held_out and all("did not serve again within router.hold_seconds" in r.detail for r in held_out)
    assert {r.retry_after for r in held_out} == {"10"}
    assert not [r for r in change.results if r.status not in (200, 503)]


def test_the_router_itself_is_replaced_without_refusing_a_connection(proj, runtime):
    proj.applied(proj.write())
    router = f"aigo-{proj.name}-router"
    old_id = runtime.api.inspect_container(router)["Id"]
    path = proj.write()
    Path(path).write_text(
        Path(path).read_text().replace("image_tag: bookworm}", "image_tag: bookworm, max_body_mb: 17}")
    )
    change = Load(proj.url, "chat", clients=12, seconds=90).across(lambda: proj.apply(path))
    result = change.value
    assert result.returncode == 0, result.stdout + result.stderr
    assert "# router will be replaced" in result.stdout and "beside the serving one" in result.stdout
    assert not change.failed, change.failed[:5]
    assert len(change.during) >= 100
    assert runtime.api.inspect_container(router)["Id"] != old_id
    assert not [c for c in runtime.list_containers() if c["Names"][0] == f"/{router}-aigo-next"]


def test_a_request_held_by_a_worker_that_a_reload_stops_is_served_once_the_hold_ends(proj, runtime, monkeypatch):
    """HAProxy stops the health checks of a worker that a reload replaces: a request that worker holds
    must not wait for a check it will never run again (the engine it last saw down stays down in its
    eyes). Here the engine is down while the first holding worker is replaced, as it is when a recreate's
    new engine comes up after a reload."""
    path = proj.write(update="recreate")
    proj.applied(path)
    monkeypatch.setenv("AIGO_STATE_DIR", proj.env["AIGO_STATE_DIR"])
    desired = load_desired(path)
    router = router_of(proj.name, desired.router.spec, runtime, desired)
    engine = f"aigo-{proj.name}-chat"
    router.hold("chat", 120)  # worker A holds the model's requests
    runtime.stop(engine)
    answers: list[httpx.Response | Exception] = []

    def chat() -> None:
        try:
            answers.append(
                httpx.post(
                    f"{proj.url}/v1/chat/completions",
                    json={"model": "chat", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
                    timeout=30,
                )
            )
        except httpx.HTTPError as exc:
            answers.append(exc)

    client = threading.Thread(target=chat)
    client.start()
    time.sleep(3)  # held in worker A, whose checks (were there any) see the engine down by now
    router.hold("chat", 120)  # a reload: worker A stops, still holding the request
    runtime.start(engine)
    address = EngineAddress.of_route(router.routes["chat"], router.sockets_dir)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and call(address, "GET", "/health", 2)[0] != 200:
        time.sleep(0.2)  # the engine serves again (apply's own probe, not the router's view)
    router.release("chat")
    client.join(timeout=40)
    assert answers and isinstance(answers[0], httpx.Response), answers
    assert answers[0].status_code == 200, answers[0].text
