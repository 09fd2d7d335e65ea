"""Many models, one GPU. On-demand models in a swap group through the real router (Debian's
HAProxy 2.6 with its Lua) and the real apply, on the stub engine, which serves vLLM's sleep endpoints
(/sleep, /wake_up, /is_sleeping with VLLM_SERVER_DEV_MODE=1) and, as vLLM does, holds a generation
request that reaches it asleep until it is woken (counted in its /stub/stats as `arrived_asleep`).

Covered: apply starts each on-demand model, proves it ready, puts it to sleep except the group's first;
status shows awake/asleep; /v1/models lists sleeping models; a request for a sleeping model waits for the
awake one's running requests, which finish (the router, not the engine, drains: no request runs when
/sleep arrives), then it is woken and served; concurrent requests for one sleeping model cause one wake;
clients asking for two models alternately all succeed, with one wake per swap and no request ever
reaching a sleeping engine; least recently used sleeps first (max_awake 2); a failed wake is an
OpenAI-shaped 503 with the reason; the engine's development endpoints are 404 at the router however they
are spelled. Every load is bounded in count and time."""

from __future__ import annotations

import textwrap
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from helpers.cli import run_cli
from helpers.configs import free_port, model_folder, router_yaml, write_config


class SwapProject:
    def __init__(self, tmp_path, runtime, monkeypatch):
        self.tmp, self.runtime = tmp_path, runtime
        self.name = "sw" + uuid.uuid4().hex[:9]
        self.port = free_port()
        self.env = {"AIGO_STATE_DIR": str(tmp_path / "state")}
        monkeypatch.setenv("AIGO_STATE_DIR", self.env["AIGO_STATE_DIR"])
        model_folder(tmp_path / "m")
        self.url = f"http://127.0.0.1:{self.port}"
        self.http = httpx.Client(timeout=30)
        self.clients: dict[str, httpx.Client] = {}

    def apply(self, models: str) -> None:
        text = textwrap.dedent(f"""
            version: 1
            project: {self.name}
            engines: {{vllm: {{image: aigo-stub-engine, image_tag: "1"}}}}
            {router_yaml(self.port)}
            models:
            """) + textwrap.indent(textwrap.dedent(models).strip() + "\n", "  ")
        self.config = write_config(self.tmp, text)
        result = run_cli("apply", "-f", str(self.config), "-y", env=self.env)
        assert result.returncode == 0, result.stdout + result.stderr
        self.apply_output = result.stdout + result.stderr

    def direct(self, alias: str) -> httpx.Client:
        """A client straight to the engine's Unix socket (not through the router)."""
        if alias not in self.clients:
            socket = self.tmp / "state" / self.name / "sockets" / alias / "engine.sock"
            self.clients[alias] = httpx.Client(
                transport=httpx.HTTPTransport(uds=str(socket)), base_url="http://engine", timeout=5
            )
        return self.clients[alias]

    def engine(self, alias: str, path: str) -> dict:
        return self.direct(alias).get(path).json()

    def asleep(self, alias: str) -> bool:
        return self.engine(alias, "/is_sleeping")["is_sleeping"]

    def stats(self, alias: str) -> dict:
        return self.engine(alias, "/stub/stats")

    def chat(self, model: str, client: httpx.Client | None = None) -> httpx.Response:
        return (client or self.http).post(
            f"{self.url}/v1/chat/completions",
            json={"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
        )

    def metrics(self) -> dict[str, float]:
        text = self.http.get(f"{self.url}/metrics/swaps", timeout=5).text
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out


@pytest.fixture
def swap(runtime, tmp_path, monkeypatch):
    from aigo_apply.desired import labels
    from aigo_apply.desired.engines.common import legacy_cache_volume

    proj = SwapProject(tmp_path, runtime, monkeypatch)
    yield proj
    proj.http.close()
    for c in runtime.api.containers(all=True, filters=labels.project_filter(proj.name)):
        runtime.api.remove_container(c["Id"], force=True)
    for volume in {v["Name"] for v in runtime.list_volumes(proj.name)} | {legacy_cache_volume(proj.name)}:
        runtime.remove_volume(volume)


def model(alias: str, extra: str = "", env: str = "") -> str:
    return f"{alias}:\n  source: {{path: m}}\n  context_length: 4096\n  gpus: none\n{extra}" + (
        f"  env: {{{env}}}\n" if env else ""
    )


GROUP_AB = (
    model("alpha", "  swap_group: chat\n", "AIGO_STUB_REPLY_SECONDS: '0.2', AIGO_STUB_SLEEP_SECONDS: '0.2'")
    + model("beta", "  swap_group: chat\n", "AIGO_STUB_REPLY_SECONDS: '0.2', AIGO_STUB_WAKE_SECONDS: '0.3'")
    + model("plain")
)


def test_apply_leaves_the_first_awake_and_a_sleeping_model_is_woken_after_the_running_requests(swap):
    swap.apply(GROUP_AB)
    # proven ready with a completion, then put to sleep: all but the group's first (file order)
    assert not swap.asleep("alpha") and swap.asleep("beta")
    assert swap.stats("beta")["completions"] >= 1 and swap.stats("beta")["sleeps"] == 1
    assert "beta is ready and now sleeps until a request names it" in swap.apply_output
    status = run_cli("status", "-f", str(swap.config), "-o", "json", env=swap.env)
    import json

    rows = {r["model"]: r for r in json.loads(status.stdout)["models"]}
    assert (rows["alpha"]["sleep"], rows["beta"]["sleep"], rows["plain"]["sleep"]) == ("awake", "asleep", None)
    text = run_cli("status", "-f", str(swap.config), env=swap.env).stdout
    assert "running (asleep)" in text and "running (awake)" in text
    plan = run_cli("plan", "-f", str(swap.config), env=swap.env).stdout
    assert "chat (gpus none): alpha, beta; at most 1 awake, awake after apply: alpha" in plan
    assert "No changes." in plan
    # a sleeping model is servable: listed
    listed = {m["id"] for m in swap.http.get(f"{swap.url}/v1/models").json()["data"]}
    assert listed == {"alpha", "beta", "plain"}

    # three slow requests run on alpha; a request for beta then waits for them, alpha sleeps, beta wakes
    with ThreadPoolExecutor(max_workers=4) as pool:
        started = time.monotonic()
        running = [pool.submit(swap.chat, "alpha", httpx.Client(timeout=30)) for _ in range(3)]
        time.sleep(0.08)  # they reached alpha (each holds it 0.2 s)
        beta = swap.chat("beta", httpx.Client(timeout=30))
        took = time.monotonic() - started
        assert [r.result().status_code for r in running] == [200, 200, 200]
    assert beta.status_code == 200, beta.text
    assert beta.json()["model"] == "beta"
    assert took >= 0.2 + 0.2 + 0.3 + 0.2  # alpha's requests, its sleep, beta's wake, beta's reply
    assert swap.asleep("alpha") and not swap.asleep("beta")
    a, b = swap.stats("alpha"), swap.stats("beta")
    assert a["inflight_at_sleep"][-1] == 0  # the router drained alpha itself before /sleep
    assert a["completions"] >= 4 and a["arrived_asleep"] == 0 and b["arrived_asleep"] == 0
    m = swap.metrics()
    assert m['aigo_model_wakes_total{model="beta",group="chat"}'] == 1
    assert m['aigo_model_sleeps_total{model="alpha",group="chat"}'] == 1
    assert m['aigo_model_wake_last_seconds{model="beta",group="chat"}'] >= 0.3
    assert m['aigo_model_awake{model="beta",group="chat"}'] == 1
    # the router's one /metrics holds the same counters, and reads the sleeping alpha without waking it
    page = swap.http.get(f"{swap.url}/metrics", timeout=10).text
    assert 'aigo_model_wakes_total{model="beta",group="chat"} 1' in page
    assert f'aigo_engine_up{{project="{swap.name}",model="alpha",engine="vllm"}} 1' in page
    assert f'vllm:num_requests_running{{project="{swap.name}",model="alpha",' in page
    assert swap.asleep("alpha") and swap.stats("alpha")["wakes"] == a["wakes"]
    # requests for a model outside any group never wait for a swap
    assert swap.chat("plain").status_code == 200

    # twelve requests at once for the sleeping alpha: one wake
    with ThreadPoolExecutor(max_workers=12) as pool:
        replies = list(pool.map(lambda _: swap.chat("alpha", httpx.Client(timeout=30)), range(12)))
    assert [r.status_code for r in replies] == [200] * 12
    assert swap.stats("alpha")["wakes"] == 2, (
        swap.runtime.api.logs(f"aigo-{swap.name}-alpha").decode() + swap.apply_output
    )  # apply's wake of the group's first, then this one
    assert swap.metrics()['aigo_model_wakes_total{model="alpha",group="chat"}'] == 1


def test_clients_asking_for_two_models_alternately_all_succeed_with_one_wake_per_swap(swap):
    swap.apply(
        model("alpha", "  swap_group: chat\n", "AIGO_STUB_REPLY_SECONDS: '0.02'")
        + model("beta", "  swap_group: chat\n", "AIGO_STUB_REPLY_SECONDS: '0.02'")
    )
    clients, rounds = 8, 10  # 80 requests, bounded
    results: list[tuple[str, int, str]] = []
    lock = threading.Lock()

    def client(n: int) -> None:
        with httpx.Client(timeout=60) as http:
            for i in range(rounds):
                name = ("alpha", "beta")[(n + i) % 2]
                reply = swap.chat(name, http)
                with lock:
                    results.append((name, reply.status_code, reply.json().get("model", reply.text)))

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        list(pool.map(client, range(clients)))
    assert time.monotonic() - started < 120
    assert len(results) == clients * rounds
    assert all(code == 200 and served == name for name, code, served in results), [
        r for r in results if r[1] != 200 or r[0] != r[2]
    ]
    a, b = swap.stats("alpha"), swap.stats("beta")
    assert a["arrived_asleep"] == 0 and b["arrived_asleep"] == 0  # no request reached a sleeping engine
    assert all(n == 0 for n in a["inflight_at_sleep"] + b["inflight_at_sleep"])
    m = swap.metrics()
    wakes = (
        m['aigo_model_wakes_total{model="alpha",group="chat"}'] + m['aigo_model_wakes_total{model="beta",group="chat"}']
    )
    sleeps = (
        m['aigo_model_sleeps_total{model="alpha",group="chat"}']
        + m['aigo_model_sleeps_total{model="beta",group="chat"}']
    )
    assert wakes >= 1 and sleeps == wakes, (m, a, b)  # each swap: one sleep, one wake, never more
    assert wakes <= clients * rounds / 2  # a woken model serves every request waiting for it
    # the engines saw the router's calls and apply's: alpha put to sleep while beta started, beta once
    # ready, and alpha woken at the end as the group's first
    assert a["wakes"] + b["wakes"] == wakes + 1 and a["sleeps"] + b["sleeps"] == sleeps + 2


def test_least_recently_used_sleeps_first_and_a_failed_wake_is_a_503_with_the_reason(swap):
    swap.apply(
        model("one", "  swap_group: trio\n  max_awake: 2\n")
        + model("two", "  swap_group: trio\n")
        + model("three", "  swap_group: trio\n")
        + model("broken", "  swap_group: trio\n", "AIGO_STUB_WAKE_FAIL: '1'")
    )
    assert [swap.asleep(a) for a in ("one", "two", "three", "broken")] == [False, False, True, True]
    assert swap.chat("one").status_code == 200  # `two` is now the least recently used
    assert swap.chat("three").status_code == 200
    assert [swap.asleep(a) for a in ("one", "two", "three")] == [False, True, False]

    reply = swap.chat("broken")
    assert reply.status_code == 503 and reply.headers["content-type"] == "application/json"
    error = reply.json()["error"]
    assert error["type"] == "ServiceUnavailableError" and error["code"] == 503 and error["param"] is None
    assert error["message"].startswith("model `broken` could not be woken: HTTP 500")
    assert "out of memory" in error["message"]
    assert swap.metrics()['aigo_model_wake_failures_total{model="broken",group="trio"}'] == 1
    # the group serves on: the model put to sleep for the failed wake is woken again when asked
    assert swap.chat("one").status_code == 200 and swap.chat("three").status_code == 200

    # while apply holds the group (it starts one of its models), a request for a sleeping model waits
    hold = swap.tmp / "state" / swap.name / "router" / "holds" / "trio"
    hold.write_text(f"test until {int(time.time()) + 60}\n")
    with ThreadPoolExecutor(max_workers=1) as pool:
        waiting = pool.submit(swap.chat, "two", httpx.Client(timeout=30))
        time.sleep(0.6)
        assert not waiting.done() and swap.asleep("two")
        hold.unlink()
        assert waiting.result(timeout=20).status_code == 200
    assert not swap.asleep("two")


def test_the_engines_development_endpoints_are_never_reachable_through_the_router(swap):
    swap.apply(model("alpha", "  on_demand: true\n") + model("plain"))
    direct = swap.direct("alpha")
    assert direct.get("/is_sleeping").status_code == 200  # the engine has them (dev mode), on its socket only
    assert direct.post("/reset_prefix_cache").status_code == 200
    for method, path in [
        ("POST", "/sleep"), ("POST", "/sleep?level=1"), ("POST", "/wake_up"), ("GET", "/is_sleeping"),
        ("POST", "/collective_rpc"), ("POST", "/reset_prefix_cache"), ("GET", "/server_info"),
        ("POST", "/%73leep"), ("POST", "/wake%5Fup"), ("POST", "/pause"), ("POST", "/scale_elastic_ep"),
    ]:  # fmt: skip
        for model_name in ("alpha", "plain"):
            reply = swap.http.request(method, f"{swap.url}{path}", json={"model": model_name, "method": "x"})
            assert reply.status_code == 404, (method, path, reply.status_code, reply.text)
            assert reply.json()["error"]["type"] == "NotFoundError"
    assert not swap.asleep("alpha")  # nothing reached it
    assert swap.stats("alpha")["sleeps"] == 0
    assert swap.chat("alpha").status_code == 200
