"""LoRA adapters on the real vLLM CPU engine, driven by aigo-apply's real command line: one engine
serves the tiny generated model and two generated adapters (peft's layout, rank 8 on q_proj and
v_proj: tests/helpers/tiny_model.make_adapter) from local folders. Through the router each alias
answers a completion as itself; the router's and the engine's own /v1/models list both adapters with
the base as parent; the router's /metrics names an adapter with a request running under its own
alias (from vLLM's vllm:lora_requests_info); and the next apply of a file without one adapter
replaces the engine with that reason, after which the removed alias is an OpenAI-shaped 404 and the
other still answers. Two engine starts (about 25 s each alone; slower on a 2-core CI); the tests run
in file order, each from the state the one before left."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from aigo_apply.adapters.engine_http import EngineClient
from aigo_apply.desired.types import EngineAddress

from helpers import tiny_model
from helpers.configs import free_port, router_yaml
from helpers.real_engine import cli, config_yaml, model_yaml, remove_project, require_image
from helpers.stub_project import engine_addresses

pytestmark = pytest.mark.slow


@dataclass
class Served:
    project: str
    port: int
    root: Path
    env: dict[str, str]

    @property
    def path(self) -> Path:
        return self.root / "aigo.yaml"

    def write(self, adapters: tuple[str, ...]) -> None:
        listed = "".join(f"\n  {a}: {{source: {{path: {a}}}}}" for a in adapters)
        model = model_yaml("chat", more="adapters:" + listed)
        self.path.write_text(config_yaml(self.project, router_yaml(self.port), model), encoding="utf-8")

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def complete(self, model: str, **body) -> tuple[int, dict]:
        request = urllib.request.Request(
            self.url("/v1/completions"),
            method="POST",
            data=json.dumps({"model": model, "prompt": "Hello!", "max_tokens": 8, "temperature": 0, **body}).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as reply:
                if body.get("stream"):  # server-sent events: read to the end
                    return reply.status, {"events": reply.read().decode().count("data: ")}
                return reply.status, json.load(reply)
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")

    def router_models(self) -> dict[str, dict]:
        with urllib.request.urlopen(self.url("/v1/models"), timeout=10) as reply:
            return {card["id"]: card for card in json.load(reply)["data"]}


@pytest.fixture(scope="module")
def served(runtime, docker_missing, tmp_path_factory):
    require_image(runtime, docker_missing)
    root = tmp_path_factory.mktemp("adapters_real")
    tiny_model.make(root / "tiny", tiny_model.IMAGE)
    tiny_model.make_adapter(root / "sql", seed=1)
    tiny_model.make_adapter(root / "tone", seed=2)
    s = Served("adapters-real-" + uuid.uuid4().hex[:6], free_port(), root, {"AIGO_STATE_DIR": str(root / "state")})
    s.write(("sql", "tone"))
    applied = cli(s.env, "apply", "-f", str(s.path), "-y")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    yield s
    remove_project(runtime, s.project, s.env, s.path)


def test_the_base_and_each_adapter_answer_through_the_router_as_themselves(served):
    for model in ("chat", "sql", "tone"):
        status, body = served.complete(model)
        assert status == 200, (model, body)
        assert body["model"] == model and body["choices"][0]["text"] is not None


def test_the_router_and_the_engine_list_both_adapters_with_the_base_as_parent(served, runtime):
    cards = served.router_models()
    assert {k: cards[k].get("parent") for k in ("chat", "sql", "tone")} == {"chat": None, "sql": "chat", "tone": "chat"}
    (where,) = engine_addresses(runtime, served.project).values()
    assert isinstance(where, str)  # a Unix socket: no port is published for the engine
    with EngineClient(EngineAddress(socket=where), timeout=10) as engine:
        own = {card["id"]: card for card in engine.get("/v1/models").json()["data"]}
    assert {k: own[k].get("parent") for k in ("sql", "tone")} == {"sql": "chat", "tone": "chat"}  # vLLM's own cards


def test_the_merged_metrics_name_an_adapter_with_a_request_running_under_its_own_alias(served):
    done = threading.Event()

    def stream() -> None:  # one streamed request of sql after another until the page is read (at most 60 s)
        stop = time.monotonic() + 60
        while not done.is_set() and time.monotonic() < stop:
            served.complete("sql", max_tokens=480, ignore_eos=True, stream=True)

    writer = threading.Thread(target=stream, daemon=True)
    writer.start()
    series = f'aigo_adapter_requests_active{{project="{served.project}",model="sql",engine="vllm",base="chat",state="running"}}'
    seen, page = None, ""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and seen != "1":
        try:  # on a 2-core CI the engine busy generating can keep one read of the page past its timeout
            with urllib.request.urlopen(served.url("/metrics"), timeout=30) as reply:
                page = reply.read().decode()
        except (TimeoutError, urllib.error.URLError):
            continue
        seen = next((line.rsplit(" ", 1)[1] for line in page.splitlines() if line.startswith(series + " ")), None)
        time.sleep(0.1)
    done.set()
    writer.join(timeout=120)
    assert seen == "1", [line for line in page.splitlines() if "lora_requests" in line or "aigo_adapter" in line]
    tone = f'aigo_adapter_requests_active{{project="{served.project}",model="tone",engine="vllm",base="chat",state="running"}}'
    assert any(line.startswith(tone + " ") for line in page.splitlines())
    assert any(line.startswith("vllm:lora_requests_info{") and 'model="chat"' in line for line in page.splitlines())


def test_an_adapter_removed_from_the_file_is_gone_after_the_next_apply(served):
    served.write(("sql",))
    planned = cli(served.env, "plan", "-f", str(served.path))
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert "adapter 'tone' removed" in planned.stdout, planned.stdout
    applied = cli(served.env, "apply", "-f", str(served.path), "-y")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    cards = served.router_models()
    assert "tone" not in cards and cards["sql"].get("parent") == "chat"
    status, body = served.complete("tone")
    assert status == 404 and body["error"]["type"] == "NotFoundError", body
    status, body = served.complete("sql")
    assert status == 200 and body["model"] == "sql", body
