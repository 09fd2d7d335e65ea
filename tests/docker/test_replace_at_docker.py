"""Changing a running model without failing a request, on the real Docker engine and router with the
stub engine (it loads for a few seconds and holds each request a little, as a real one would), under a
bounded load through the router: a parallel replace moves the route to the new engine once it serves
and lets the old one drain; a new engine that never serves leaves the old one serving."""

from __future__ import annotations

import subprocess
import textwrap
import time

import httpx
import pytest

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

    def apply(self, path: str) -> tuple[subprocess.CompletedProcess, float, float]:
        began = time.monotonic()
        result = run_cli("apply", "-f", path, "-y", env=self.env, timeout=180)
        return result, began, time.monotonic()

    def max_model_len(self) -> int:
        return httpx.get(f"{self.url}/v1/models", timeout=5).json()["data"][0]["max_model_len"]


@pytest.fixture
def proj(tmp_path, project):
    return Project(tmp_path, project)


def test_a_parallel_replace_under_load_fails_no_request(proj, runtime):
    first, _, _ = proj.apply(proj.write())
    assert first.returncode == 0, first.stdout + first.stderr
    old_id = runtime.api.inspect_container(f"aigo-{proj.name}-chat")["Id"]
    load = Load(proj.url, "chat", clients=12, seconds=90).start()
    time.sleep(1.0)  # steady state first
    result, began, ended = proj.apply(proj.write(context_length=2048))
    time.sleep(0.5)
    results = load.stop()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(how: parallel: no GPU: the old and the new engine run side by side)" in result.stdout
    assert "drained in" in result.stdout
    failed = Load.failed(results)
    during = Load.during(results, began, ended)
    assert not failed, failed[:5]
    assert len(during) >= 200, (len(during), len(results))
    # the new engine serves, under the model's own name, on the model's other socket; the old one is gone
    info = runtime.api.inspect_container(f"aigo-{proj.name}-chat")
    assert info["Id"] != old_id and info["Config"]["Labels"]["io.aigo-apply.slot"] == "b"
    assert proj.max_model_len() == 2048
    names = [c["Names"][0] for c in runtime.list_containers()]
    assert not [n for n in names if n.startswith(f"/aigo-{proj.name}-chat-aigo")]
    again = run_cli("plan", "-f", proj.write(context_length=2048), "--detailed-exitcode", env=proj.env)
    assert again.returncode == 0 and again.stdout.startswith("No changes."), again.stdout


def test_a_new_engine_that_never_serves_leaves_the_old_one_serving_with_no_failed_request(proj, runtime):
    first, _, _ = proj.apply(proj.write())
    assert first.returncode == 0, first.stdout + first.stderr
    old_id = runtime.api.inspect_container(f"aigo-{proj.name}-chat")["Id"]
    load = Load(proj.url, "chat", clients=8, seconds=90).start()
    time.sleep(1.0)
    result, began, ended = proj.apply(proj.write(context_length=2048, extra_env=', AIGO_STUB_FAIL_START: "1"'))
    time.sleep(0.5)
    results = load.stop()
    assert result.returncode == 1, result.stdout + result.stderr
    assert "RuntimeError: stub engine told to fail at start-up" in result.stdout  # the engine's own words
    assert "the new engine was removed, and the previous" in result.stderr + result.stdout
    assert not Load.failed(results), Load.failed(results)[:5]
    assert len(Load.during(results, began, ended)) >= 50
    assert runtime.api.inspect_container(f"aigo-{proj.name}-chat")["Id"] == old_id
    assert proj.max_model_len() == 4096


def test_a_recreate_holds_the_models_requests_and_fails_none(proj, runtime):
    first, _, _ = proj.apply(proj.write(update="recreate"))
    assert first.returncode == 0, first.stdout + first.stderr
    load = Load(proj.url, "chat", clients=32, seconds=90).start()
    time.sleep(1.0)
    result, began, ended = proj.apply(proj.write(context_length=2048, update="recreate"))
    time.sleep(0.5)
    results = load.stop()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(how: recreate: models.chat.update is recreate)" in result.stdout
    assert "requests held by the router" in result.stdout
    assert not Load.failed(results), Load.failed(results)[:5]
    during = Load.during(results, began, ended)
    assert len(during) >= 200, (len(during), len(results))
    waited = max(r.ended - r.started for r in during)
    assert waited > 2.0, waited  # some were held across the engine's 3 s start, and then served
    assert proj.max_model_len() == 2048


def test_a_request_held_longer_than_hold_seconds_gets_a_503_with_retry_after(proj, runtime):
    path = proj.write(update="recreate").replace("", "")
    text = open(path).read().replace("image_tag: bookworm}", "image_tag: bookworm, hold_seconds: 1}")
    open(path, "w").write(text)
    first, _, _ = proj.apply(path)
    assert first.returncode == 0, first.stdout + first.stderr
    changed = open(proj.write(context_length=2048, update="recreate")).read()
    open(path, "w").write(changed.replace("image_tag: bookworm}", "image_tag: bookworm, hold_seconds: 1}"))
    load = Load(proj.url, "chat", clients=4, seconds=60).start()
    time.sleep(0.5)
    result, _, _ = proj.apply(path)
    results = load.stop()
    assert result.returncode == 0, result.stdout + result.stderr
    held_out = [r for r in results if r.status == 503]
    assert held_out and all("did not serve again within router.hold_seconds" in r.detail for r in held_out)
    assert not [r for r in results if r.status not in (200, 503)]


def test_the_router_itself_is_replaced_without_refusing_a_connection(proj, runtime):
    first, _, _ = proj.apply(proj.write())
    assert first.returncode == 0, first.stdout + first.stderr
    router = f"aigo-{proj.name}-router"
    old_id = runtime.api.inspect_container(router)["Id"]
    load = Load(proj.url, "chat", clients=12, seconds=90).start()
    time.sleep(1.0)
    path = proj.write()
    text = open(path).read().replace("image_tag: bookworm}", "image_tag: bookworm, max_body_mb: 17}")
    open(path, "w").write(text)
    result, began, ended = proj.apply(path)
    time.sleep(0.5)
    results = load.stop()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "# router will be replaced" in result.stdout and "beside the serving one" in result.stdout
    assert not Load.failed(results), Load.failed(results)[:5]
    assert len(Load.during(results, began, ended)) >= 100
    assert runtime.api.inspect_container(router)["Id"] != old_id
    assert not [c for c in runtime.list_containers() if c["Names"][0] == f"/{router}-aigo-next"]
