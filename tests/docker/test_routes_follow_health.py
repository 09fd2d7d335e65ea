"""The router's routes follow engine health by themselves. HAProxy's own health
checks decide: GET /v1/models (a Lua service in HAProxy) lists only the models whose engine is up
now, a request to a model whose engine is down gets an OpenAI-shaped 503, and a model whose engine
comes back (started again, or restarted by Docker after a crash) returns only once its /health
passes. No `watch` runs here. Real HAProxy (Debian's 2.6) and the stub engine; every wait is bounded."""

from __future__ import annotations

import os
import random
import signal
import textwrap
import threading
import time
import uuid

import httpx
import pytest

from helpers.cli import run_cli
from helpers.configs import free_port, model_folder, router_yaml, write_config

GONE_WITHIN = 2.0  # seconds from an engine's death to: gone from /v1/models, and a 503 for its model
BACK_WITHIN = 1.5  # seconds from an engine's first /health 200 to: listed again and served


@pytest.fixture
def rh1(runtime, tmp_path, monkeypatch):
    """A project named rh1-...; its containers and cache volume are removed afterwards."""
    from aigo_apply.desired import labels
    from aigo_apply.desired.engines.common import legacy_cache_volume

    proj = Rh1Project(tmp_path, "rh1" + uuid.uuid4().hex[:9], runtime, monkeypatch)
    yield proj
    proj.http.close()
    proj.fresh.close()
    for c in runtime.api.containers(all=True, filters=labels.project_filter(proj.name)):
        runtime.api.remove_container(c["Id"], force=True)
    for volume in {v["Name"] for v in runtime.list_volumes(proj.name)} | {legacy_cache_volume(proj.name)}:
        runtime.remove_volume(volume)


class Rh1Project:
    def __init__(self, tmp_path, name, runtime, monkeypatch):
        self.tmp, self.name, self.runtime, self.port = tmp_path, name, runtime, free_port()
        self.env = {"AIGO_STATE_DIR": str(tmp_path / "state")}
        monkeypatch.setenv("AIGO_STATE_DIR", self.env["AIGO_STATE_DIR"])
        model_folder(tmp_path / "m")
        self.url = f"http://127.0.0.1:{self.port}"
        self.http = httpx.Client(timeout=10)  # the test's own probes: one client, no per-call set-up
        # Requests for a model that may be down go on a fresh connection each: while Docker restarts an
        # engine, its port proxy accepts and then closes, and HAProxy answers that on a kept-alive
        # connection by closing it without a response, so that the client retries (the OpenAI SDKs do).
        self.fresh = httpx.Client(timeout=10, limits=httpx.Limits(max_keepalive_connections=0))

    def apply(self, models: dict[str, str]) -> None:
        body = "".join(
            f"  {alias}:\n    source: {{path: m}}\n    context_length: 4096\n    gpus: none\n    env: {{{env}}}\n"
            for alias, env in models.items()
        )
        text = textwrap.dedent(f"""
            version: 1
            project: {self.name}
            engines: {{vllm: {{image: aigo-stub-engine, image_tag: "1"}}}}
            {router_yaml(self.port)}
            models:
            """)
        path = write_config(self.tmp, text + body)
        result = run_cli("apply", "-f", str(path), "-y", env=self.env)
        assert result.returncode == 0, result.stdout + result.stderr

    def container(self, alias: str) -> str:
        return f"aigo-{self.name}-{alias}"

    def engine_socket(self, alias: str) -> str:
        """The engine's Unix socket (the same path across a restart)."""
        return str(self.tmp / "state" / self.name / "sockets" / alias / "engine.sock")

    def listed(self) -> list[str]:
        reply = self.http.get(f"{self.url}/v1/models", timeout=2)
        assert reply.status_code == 200 and reply.headers["content-type"] == "application/json"
        body = reply.json()
        assert body["object"] == "list"
        return sorted(m["id"] for m in body["data"])

    def chat(self, model: str) -> httpx.Response:
        return self.fresh.post(
            f"{self.url}/v1/chat/completions",
            json={"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1},
        )

    def healthy(self, alias: str) -> bool:
        """The engine's own /health, straight to its socket (not through the router)."""
        try:
            transport = httpx.HTTPTransport(uds=self.engine_socket(alias))
            with httpx.Client(transport=transport, timeout=2) as direct:
                return direct.get("http://engine/health").status_code == 200
        except httpx.HTTPError:
            return False


def assert_openai_503(reply: httpx.Response, alias: str) -> None:
    assert reply.status_code == 503, (reply.status_code, reply.text)
    assert reply.headers["content-type"] == "application/json"
    assert reply.json() == {
        "error": {
            "message": f"The engine serving model `{alias}` is down or not ready; try again shortly.",
            "type": "ServiceUnavailableError",
            "param": None,
            "code": 503,
        }
    }


class Load:
    """Clients sending chat completions to one healthy model meanwhile; bounded in time and count."""

    def __init__(self, proj: Rh1Project, model: str, clients: int = 8):
        self.proj, self.model, self.ok, self.failures = proj, model, 0, []
        self.stop, self.lock = threading.Event(), threading.Lock()
        self.threads = [threading.Thread(target=self._client) for _ in range(clients)]

    def _client(self) -> None:
        with httpx.Client(timeout=10) as http:
            for _ in range(20000):
                if self.stop.is_set():
                    return
                try:
                    reply = http.post(
                        f"{self.proj.url}/v1/chat/completions",
                        json={"model": self.model, "messages": [], "max_tokens": 1},
                    )
                    outcome = None if reply.status_code == 200 else f"HTTP {reply.status_code}"
                except httpx.HTTPError as exc:
                    outcome = repr(exc)
                with self.lock:
                    if outcome:
                        self.failures.append(outcome)
                    else:
                        self.ok += 1

    def __enter__(self) -> Load:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=30)


def wait_gone(proj: Rh1Project, alias: str, since: float) -> float:
    """Poll /v1/models (the only traffic to the router besides the load) until `alias` leaves it."""
    while alias in proj.listed():
        assert time.monotonic() - since < GONE_WITHIN, f"{alias} still listed {GONE_WITHIN} s after its engine died"
        time.sleep(0.02)
    return time.monotonic() - since


def wait_back(proj: Rh1Project, alias: str, timeout: float) -> float:
    """Wait until `alias` is listed again. Until then its engine is down or loading: a request for
    it gets the OpenAI 503 unless the engine already answers /health, and the router never lists it
    before the engine's /health passes. Returns how long after the first /health 200 (seen here)
    it was listed."""
    deadline, first_healthy = time.monotonic() + timeout, None
    while True:
        reply = proj.chat(alias)
        listed = alias in proj.listed()
        healthy = proj.healthy(alias)  # asked last: listed or served before means healthy by now
        if reply.status_code != 200:
            assert_openai_503(reply, alias)
        assert healthy or (reply.status_code != 200 and not listed), (alias, reply.status_code, listed)
        if listed:
            return time.monotonic() - (first_healthy or time.monotonic())
        if healthy and first_healthy is None:
            first_healthy = time.monotonic()
        if first_healthy is not None:
            assert time.monotonic() - first_healthy < BACK_WITHIN, f"{alias} healthy but not listed"
        assert time.monotonic() < deadline, f"{alias} did not come back within {timeout} s"
        time.sleep(0.02)


def test_killed_engine_leaves_models_and_gets_503_within_2s_and_returns_once_healthy(rh1):
    rh1.apply({"alpha": "", "beta": 'AIGO_STUB_LOAD_SECONDS: "2"'})
    assert rh1.listed() == ["alpha", "beta"]
    with Load(rh1, "alpha") as load:
        time.sleep(random.uniform(0.3, 1.3))  # any moment between two health checks
        killed = time.monotonic()
        rh1.runtime.kill(rh1.container("beta"), "SIGKILL")  # a stopped container: Docker leaves it down
        gone = wait_gone(rh1, "beta", killed)  # no request for beta: the health checks alone
        reply = rh1.chat("beta")
        answered = time.monotonic() - killed
        assert_openai_503(reply, "beta")
        assert answered < GONE_WITHIN, (answered, reply.elapsed)
        again = rh1.chat("beta")  # the router has taken it out by now: the 503 comes at once
        assert_openai_503(again, "beta")
        assert again.elapsed.total_seconds() < 0.5, again.elapsed
        assert rh1.listed() == ["alpha"]
        time.sleep(1.0)  # it stays out
        assert rh1.listed() == ["alpha"]

        started = time.monotonic()
        rh1.runtime.start(rh1.container("beta"))  # loads for 2 s: 503 meanwhile, listed after /health
        back = wait_back(rh1, "beta", timeout=15)
        returned = time.monotonic() - started
        assert rh1.chat("beta").status_code == 200
        assert rh1.listed() == ["alpha", "beta"]
        time.sleep(0.3)
    print(
        f"\nkill -> gone from /v1/models {gone:.2f} s, 503 at {answered:.2f} s; start -> listed {returned:.2f} s "
        f"({back:.2f} s after /health passed); load on alpha: {load.ok} ok, {len(load.failures)} failed"
    )
    assert returned > 2.0  # not before the engine finished loading
    assert load.failures == [] and load.ok > 50, (load.ok, load.failures[:5])


def test_a_request_right_after_a_kill_gets_the_503_at_once(rh1):
    rh1.apply({"alpha": "", "beta": ""})
    killed = time.monotonic()
    rh1.runtime.kill(rh1.container("beta"), "SIGKILL")
    reply = rh1.chat("beta")  # before any health check: the refused connection takes the server out
    assert_openai_503(reply, "beta")
    assert time.monotonic() - killed < GONE_WITHIN, reply.elapsed
    assert rh1.listed() == ["alpha"]


@pytest.mark.skipif(os.geteuid() != 0, reason="killing the engine's process from the host needs root")
def test_engine_crash_restarted_by_docker_is_out_until_its_health_passes(rh1):
    rh1.apply({"alpha": "", "beta": 'AIGO_STUB_LOAD_SECONDS: "2"'})
    with Load(rh1, "alpha") as load:
        time.sleep(random.uniform(0.3, 1.3))
        pid = rh1.runtime.api.inspect_container(rh1.container("beta"))["State"]["Pid"]
        crashed = time.monotonic()
        os.kill(pid, signal.SIGKILL)  # a crash: not a stop, so Docker restarts it (unless-stopped)
        gone = wait_gone(rh1, "beta", crashed)
        deadline = time.monotonic() + 10
        while rh1.runtime.api.inspect_container(rh1.container("beta"))["RestartCount"] < 1:
            assert time.monotonic() < deadline, "Docker did not restart the engine"
            time.sleep(0.05)
        back = wait_back(rh1, "beta", timeout=15)  # restarted, loading 2 s: out with 503s until healthy
        returned = time.monotonic() - crashed
        assert rh1.chat("beta").status_code == 200
    print(
        f"\ncrash -> gone from /v1/models {gone:.2f} s; Docker restart -> listed {returned:.2f} s after the crash "
        f"({back:.2f} s after /health passed); load on alpha: {load.ok} ok, {len(load.failures)} failed"
    )
    assert returned > 2.0
    assert load.failures == [] and load.ok > 50, (load.ok, load.failures[:5])
