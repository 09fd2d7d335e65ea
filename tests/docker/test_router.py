"""The real router: HAProxy in a container from the local image (Debian's haproxy), stub engines
behind it, everything over 127.0.0.1. Load and fault tests are bounded in time and count."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time

import httpx
import pytest

from helpers.cli import run_cli
from helpers.configs import free_port, model_folder, router_yaml, write_config
from helpers.paths import ROOT


class Project:
    """One applied project with a router on a free port; `apply(models)` converges it to a model set."""

    def __init__(self, tmp_path, name, monkeypatch):
        self.tmp, self.name, self.port = tmp_path, name, free_port()
        self.env = {"AIGO_STATE_DIR": str(tmp_path / "state")}
        monkeypatch.setenv("AIGO_STATE_DIR", self.env["AIGO_STATE_DIR"])
        model_folder(tmp_path / "m")
        self.url = f"http://127.0.0.1:{self.port}"

    def write(self, models: dict[str, str], router_extra: str = "") -> str:
        body = "".join(
            f"  {alias}:\n    source: {{path: m}}\n    context_length: 4096\n    gpus: none\n"
            f'    env: {{AIGO_STUB_LOAD_SECONDS: "0.2"{env}}}\n'
            for alias, env in models.items()
        )
        router = router_yaml(self.port)[:-1] + router_extra + "}"
        return str(
            write_config(
                self.tmp,
                textwrap.dedent(f"""
            version: 1
            project: {self.name}
            engines: {{vllm: {{image: aigo-stub-engine, image_tag: "1"}}}}
            {router}
            models:
            """)
                + body,
            )
        )

    def apply(self, models: dict[str, str], router_extra: str = "", extra_env=None) -> subprocess.CompletedProcess:
        result = run_cli("apply", "-f", self.write(models, router_extra), "-y", env={**self.env, **(extra_env or {})})
        assert result.returncode == 0, result.stdout + result.stderr
        return result

    def models(self, headers=None) -> list[str]:
        return sorted(m["id"] for m in httpx.get(f"{self.url}/v1/models", headers=headers, timeout=5).json()["data"])

    def chat(self, model, headers=None, **extra) -> httpx.Response:
        return httpx.post(
            f"{self.url}/v1/chat/completions",
            headers=headers,
            timeout=10,
            json={"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, **extra},
        )


@pytest.fixture
def proj(tmp_path, project, monkeypatch, runtime):
    return Project(tmp_path, project, monkeypatch)


def test_routes_by_model_lists_ready_models_and_speaks_openai_errors(proj):
    proj.apply({"alpha": "", "beta": "", "gamma": ""})
    assert proj.models() == ["alpha", "beta", "gamma"]
    for alias in ("alpha", "beta", "gamma"):
        reply = proj.chat(alias)
        assert reply.status_code == 200 and reply.json()["model"] == alias
    # the model field after the messages, as SDKs send it
    late = httpx.post(
        f"{proj.url}/v1/chat/completions",
        timeout=5,
        content=b'{"messages": [{"role": "user", "content": "x"}], "model": "beta"}',
        headers={"Content-Type": "application/json"},
    )
    assert late.json()["model"] == "beta"
    unknown = proj.chat("nope")
    assert unknown.status_code == 404
    assert unknown.json()["error"] == {
        "message": "The model `nope` does not exist; GET /v1/models lists the models served here.",
        "type": "NotFoundError",
        "param": "model",
        "code": 404,
    }
    for body in (b"not json", b'{"messages": []}'):
        bad = httpx.post(
            f"{proj.url}/v1/chat/completions", content=body, timeout=5, headers={"Content-Type": "application/json"}
        )
        assert bad.status_code == 400 and bad.json()["error"]["type"] == "BadRequestError"
    assert httpx.get(f"{proj.url}/nowhere", timeout=5).status_code == 404
    assert httpx.get(f"{proj.url}/health", timeout=5).json() == {"status": "ok"}
    assert "haproxy_process_nbthread" in httpx.get(f"{proj.url}/metrics", timeout=5).text
    # the engine's own errors come through unchanged
    too_long = proj.chat("alpha", max_tokens=999999)
    assert (
        too_long.status_code == 400
        and "cannot be greater than max_model_len=4096" in too_long.json()["error"]["message"]
    )


def test_streaming_passes_through_chunk_by_chunk(proj):
    proj.apply({"alpha": ', AIGO_STUB_STREAM_DELAY: "0.3"'})
    arrivals = []
    start = time.monotonic()
    with httpx.stream(
        "POST",
        f"{proj.url}/v1/chat/completions",
        timeout=10,
        json={"model": "alpha", "stream": True, "max_tokens": 4, "messages": []},
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: "):
                arrivals.append((time.monotonic() - start, line))
    assert arrivals[-1][1] == "data: [DONE]" and len(arrivals) == 6
    assert arrivals[0][0] < 0.25, arrivals  # the first event is not held back
    assert arrivals[3][0] - arrivals[0][0] > 0.6, arrivals  # events arrive as they are produced


def test_reload_under_load_drops_nothing_and_a_stream_survives(proj):
    proj.apply({"steady": ', AIGO_STUB_STREAM_DELAY: "0.4"'})
    stop, counts, failures = threading.Event(), {"ok": 0}, []
    lock = threading.Lock()

    def client():
        with httpx.Client(timeout=10) as http:
            for _ in range(100000):  # bounded in count as well as time
                if stop.is_set():
                    return
                try:
                    reply = http.post(
                        f"{proj.url}/v1/chat/completions", json={"model": "steady", "messages": [], "max_tokens": 1}
                    )
                    with lock:
                        if reply.status_code == 200:
                            counts["ok"] += 1
                        else:
                            failures.append(reply.status_code)
                except httpx.HTTPError as exc:
                    with lock:
                        failures.append(repr(exc))

    stream_result = {}

    def long_stream():
        lines = []
        with httpx.stream(
            "POST",
            f"{proj.url}/v1/chat/completions",
            timeout=30,
            json={"model": "steady", "stream": True, "max_tokens": 4, "messages": []},
        ) as response:
            lines = [ln for ln in response.iter_lines() if ln.startswith("data: ")]
        stream_result["lines"] = lines

    clients = [threading.Thread(target=client) for _ in range(20)]
    for t in clients:
        t.start()
    streamer = threading.Thread(target=long_stream)
    streamer.start()
    deadline = time.monotonic() + 60
    for i in range(10):  # add and remove a model 10 times while the load runs: 20 reloads
        proj.apply(
            {"steady": ', AIGO_STUB_STREAM_DELAY: "0.4"', "extra": ""}
            if i % 2 == 0
            else {"steady": ', AIGO_STUB_STREAM_DELAY: "0.4"'}
        )
        if time.monotonic() > deadline:
            break
    stop.set()
    for t in clients + [streamer]:
        t.join(timeout=30)
    assert failures == []
    assert counts["ok"] > 100
    assert stream_result["lines"][-1] == "data: [DONE]" and len(stream_result["lines"]) == 6
    assert proj.models() == ["steady"]


def test_killed_engine_is_a_stale_route_that_apply_removes(proj, runtime):
    proj.apply({"alpha": "", "beta": ""})
    runtime.kill(f"aigo-{proj.name}-beta", "SIGKILL")
    down = proj.chat("beta")  # the refused connection takes the server out: 503 JSON, no retries
    assert down.status_code == 503 and down.json()["error"]["type"] == "ServiceUnavailableError"
    assert down.elapsed.total_seconds() < 2.5, down.elapsed  # 3 retries 1 s apart would take over 3 s
    plan = run_cli("plan", "-f", proj.write({"alpha": "", "beta": ""}), "--output", "json", env=proj.env)
    router = [a for a in json.loads(plan.stdout)["actions"] if a["address"] == "router"][0]
    assert router["reasons"] == ["stale route: model beta has no running container (exited)"]
    assert proj.models() == ["alpha"]  # still routed, but /v1/models lists only healthy engines
    # apply with the same file: the stale route goes before beta starts again, and returns once it is ready
    again = run_cli("apply", "-f", proj.write({"alpha": "", "beta": ""}), "-y", env=proj.env)
    assert again.returncode == 0 and "Apply complete: 1 started." in again.stdout, again.stdout + again.stderr
    # /v1/models follows HAProxy's health checks (every 0.5 s while a server is down): the restarted
    # engine is listed again within a check or two of apply's return, not necessarily at once
    deadline = time.monotonic() + 3
    while proj.models() != ["alpha", "beta"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert proj.models() == ["alpha", "beta"] and proj.chat("beta").status_code == 200
    runtime.kill(f"aigo-{proj.name}-beta", "SIGKILL")
    result = run_cli("apply", "-f", proj.write({"alpha": ""}), "-y", env=proj.env)  # beta leaves the file
    assert result.returncode == 0, result.stderr
    assert proj.models() == ["alpha"]


def test_a_busy_engines_slow_health_answer_keeps_its_route(proj):
    # /health takes 1.5 s: longer than a check interval, as a busy engine's may. The route stays.
    proj.apply({"alpha": ', AIGO_STUB_HEALTH_SECONDS: "1.5"'})
    codes, deadline = [], time.monotonic() + 6
    while time.monotonic() < deadline:  # bounded: 6 s of requests, several health checks
        codes.append(proj.chat("alpha").status_code)
        time.sleep(0.2)
    assert len(codes) > 10 and set(codes) == {200}, codes
    metrics = httpx.get(f"{proj.url}/metrics", timeout=5).text
    assert 'haproxy_server_status{proxy="m_alpha' in metrics
    assert [
        line
        for line in metrics.splitlines()
        if line.startswith("haproxy_server_status{") and 'state="UP"' in line and line.endswith(" 1")
    ], metrics


def test_watch_removes_a_killed_engines_route_within_two_seconds(proj, runtime):
    proj.apply({"alpha": "", "beta": ""})
    watch = subprocess.Popen(
        [sys.executable, "-m", "aigo_apply", "watch", "-f", proj.write({"alpha": "", "beta": ""})],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **proj.env},
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 20
        while "watching project" not in (line := watch.stdout.readline()):
            assert time.monotonic() < deadline and line, "watch did not start"
        killed = time.monotonic()
        runtime.api.kill(f"aigo-{proj.name}-beta")
        while "beta" in proj.models():
            assert time.monotonic() - killed < 2.0, "route still there after 2 s"
            time.sleep(0.05)
        assert proj.models() == ["alpha"]
        runtime.start(f"aigo-{proj.name}-beta")  # back: the route returns once it is ready
        deadline = time.monotonic() + 15
        while proj.models() != ["alpha", "beta"]:
            assert time.monotonic() < deadline, "route did not come back"
            time.sleep(0.1)
        assert proj.chat("beta").status_code == 200
    finally:
        watch.send_signal(signal.SIGTERM)
        out, _ = watch.communicate(timeout=15)
    assert watch.returncode == 0 and "watch stopped" in out and "Traceback" not in out


def test_the_router_is_weighted_ahead_of_the_engines_for_the_cpu(proj, runtime):
    """When an engine keeps every core busy the router still gets one first: its container carries
    8x Docker's CPU weight (bench/router_contention.py measures what that does); an engine keeps the
    default."""
    proj.apply({"alpha": ""})
    router = runtime.api.inspect_container(f"aigo-{proj.name}-router")["HostConfig"]
    engine = runtime.api.inspect_container(f"aigo-{proj.name}-alpha")["HostConfig"]
    assert router["CpuShares"] == 8192 and engine["CpuShares"] in (0, 1024)
    again = run_cli("plan", "-f", str(proj.tmp / "aigo.yaml"), env=proj.env)
    assert again.returncode == 0 and "No changes." in again.stdout, again.stdout + again.stderr


def test_the_router_image_keeps_no_capability_but_binding_its_port(proj, runtime):
    """The router's image is the file's choice and runs on the host's network: it may not open raw
    sockets to read the host's traffic (NET_RAW) nor gain privileges, and it still serves and reloads.
    An engine keeps Docker's own set."""
    proj.apply({"alpha": ""})
    router = runtime.api.inspect_container(f"aigo-{proj.name}-router")
    host = router["HostConfig"]
    assert (host["CapDrop"], host["CapAdd"]) == (["ALL"], ["NET_BIND_SERVICE"])
    assert host["SecurityOpt"] == ["no-new-privileges:true"]
    status = runtime.api.exec_create(router["Id"], ["cat", "/proc/1/status"])
    lines = runtime.api.exec_start(status["Id"]).decode().splitlines()
    caps = {line.split(":")[0]: int(line.split()[1], 16) for line in lines if line.startswith("Cap")}
    assert caps["CapBnd"] == 1 << 10 and caps["CapEff"] in (0, 1 << 10)  # CAP_NET_BIND_SERVICE is bit 10
    assert "NoNewPrivs:\t1" in lines
    assert proj.chat("alpha").status_code == 200
    proj.apply({"alpha": "", "beta": ""})  # a reload, under the same confinement
    assert proj.chat("beta").status_code == 200
    assert runtime.api.inspect_container(f"aigo-{proj.name}-alpha")["HostConfig"]["CapDrop"] in (None, [])


def test_api_keys_by_reference(proj, runtime):
    keys = {"AIGO_TEST_KEYS": "sk-one-0123456789abcdef, sk-two-0123456789abcdef"}
    result = proj.apply({"alpha": ""}, router_extra=", api_keys: {from_env: AIGO_TEST_KEYS}", extra_env=keys)
    assert "sk-one-0123456789abcdef" not in result.stdout + result.stderr
    assert proj.chat("alpha").status_code == 401
    assert proj.chat("alpha", headers={"Authorization": "Bearer sk-wrong"}).status_code == 401
    assert proj.chat("alpha", headers={"Authorization": "Bearer sk-two-0123456789abcdef"}).status_code == 200
    assert proj.models(headers={"Authorization": "Bearer sk-one-0123456789abcdef"}) == ["alpha"]
    assert httpx.get(f"{proj.url}/health", timeout=5).status_code == 200  # like vLLM: health needs no key
    key_file = proj.tmp / "state" / proj.name / "router" / "live" / "api-keys"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    labels = runtime.api.inspect_container(f"aigo-{proj.name}-router")["Config"]["Labels"]
    assert "sk-one-0123456789abcdef" not in json.dumps(labels)


def test_destroy_of_a_project_with_api_keys_works_without_the_keys(proj, runtime):
    """It used to fail with HTTP 401 (a route reload verified without a key) and remove nothing."""
    keys = {"AIGO_TEST_KEYS": "sk-one-0123456789abcdef"}
    proj.apply({"alpha": "", "beta": ""}, router_extra=", api_keys: {from_env: AIGO_TEST_KEYS}", extra_env=keys)
    folder = proj.tmp / "state" / proj.name / "router"
    assert folder.is_dir()
    result = run_cli(
        "destroy",
        "-f",
        proj.write({"alpha": "", "beta": ""}, ", api_keys: {from_env: AIGO_TEST_KEYS}"),
        "-y",
        env=proj.env,
    )  # the key's variable is not even set now
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Destroy complete" in result.stdout and "Traceback" not in result.stderr
    left = [c["Names"] for c in runtime.list_containers() if proj.name in " ".join(c["Names"])]
    assert left == [] and not folder.exists()


def test_config_failing_haproxy_check_keeps_the_old_router_and_fails_apply(proj, monkeypatch, capsys):
    proj.apply({"alpha": ""})
    import aigo_apply.platforms.docker.router_deploy as router_module
    from aigo_apply.app.apply import ApplyRequest, run_apply
    from aigo_apply.cli.reporter import TextReporter

    real = router_module.render_files

    def broken(settings, routes, **kwargs):
        files = real(settings, routes, **kwargs)
        files["haproxy.cfg"] += "\nbackend broken\n    this-is-not-a-keyword\n"
        return files

    monkeypatch.setattr(router_module, "render_files", broken)
    assert run_apply(ApplyRequest(file=proj.write({"alpha": "", "beta": ""}), yes=True), TextReporter()) == 1
    err = capsys.readouterr().err
    assert "Apply failed:" in err and "failed `haproxy -c`; the router keeps serving the previous one" in err
    assert proj.models() == ["alpha"]  # the old configuration still serves
    assert proj.chat("alpha").status_code == 200
