"""The router's one door against vLLM's own server stack: the real vLLM CPU engine (image
aigo-vllm-cpu, the tiny generated model) started with VLLM_SERVER_DEV_MODE=1, so its development
routes (/server_info, /collective_rpc, /reset_prefix_cache, /is_sleeping...) are registered, serving
on a Unix socket the way aigo-apply starts it (its entry point and socket folder); in front of it the
real HAProxy (Debian's) running the files aigo-apply renders for that route. Uvicorn decodes `%0a`
and Starlette's `^/server_info$` matches before a final newline, so the engine itself answers
/server_info%0a; no spelling of a development path, in any request form, gets through the router,
while chat, completions, tokenize and embeddings-shaped requests do. One engine start (about 25 s)."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import httpx
import pytest

from aigo_apply.adapters.engine_sockets import prepare_socket_mounts
from aigo_apply.desired.engines.common import SHM_BYTES, SOCKET_MOUNT
from aigo_apply.desired.engines.router import LIVE, ROUTER_MOUNT
from aigo_apply.desired.engines.vllm import SOCKET_ENTRYPOINT
from aigo_apply.desired.types import ROUTER_SOCKETS, ContainerSpec, Mount, Route, RouterSettings
from aigo_apply.router.haproxy import render_files

from helpers import tiny_model
from helpers.configs import free_port
from helpers.raw_http import exchange, spellings

pytestmark = pytest.mark.slow
IMAGE = tiny_model.IMAGE
DEV_PATHS = ("/server_info", "/collective_rpc", "/reset_prefix_cache", "/is_sleeping", "/pause", "/scale_elastic_ep")


class Front:
    """The real engine on its socket in dev mode, and the real router in front of it."""

    def __init__(self, runtime, root: Path):
        self.runtime, self.root, self.port = runtime, root, free_port()
        self.name = "door-" + uuid.uuid4().hex[:8]
        self.sockets = root / "state" / "sockets"
        self.engine_id = self.router_id = ""

    def start(self) -> None:
        model = tiny_model.make(self.root / "tiny", IMAGE)
        folder = self.sockets / "chat"
        spec = ContainerSpec(  # only its socket folders matter here: the adapter makes them as for apply
            name=f"aigo-{self.name}-chat", image=IMAGE, command=(), env=(), mounts=(
                Mount(str(self.sockets), ROUTER_SOCKETS, True), Mount(str(folder), SOCKET_MOUNT, False)),
            host_ip="127.0.0.1", host_port=None, container_port=None, gpus="none",
        )  # fmt: skip
        prepare_socket_mounts(spec)
        api = self.runtime.api
        command = ["/models/chat", "--served-model-name", "chat", "--max-model-len", "512", "--enforce-eager"]
        command += ["--max-num-seqs", "4", "--uds", f"{SOCKET_MOUNT}/engine.sock"]
        self.engine_id = api.create_container(
            IMAGE,
            command=command,
            entrypoint=list(SOCKET_ENTRYPOINT),
            name=f"{self.name}-engine",
            environment={"VLLM_SERVER_DEV_MODE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"},
            host_config=api.create_host_config(
                binds={
                    str(model): {"bind": "/models/chat", "mode": "ro"},
                    str(folder): {"bind": SOCKET_MOUNT, "mode": "rw"},
                },
                shm_size=SHM_BYTES,  # as apply makes it: a private /dev/shm, no network
                network_mode="none",
            ),
        )["Id"]
        api.start(self.engine_id)
        live = self.root / "state" / "router" / "live"
        settings = RouterSettings(self.name, "127.0.0.1", self.port, False)
        for rel, text in render_files(settings, [Route("chat", None, 512)]).items():
            (live / rel).parent.mkdir(parents=True, exist_ok=True)
            (live / rel).write_text(text, encoding="utf-8", newline="")
        self.router_id = api.create_container(
            "aigo-haproxy:bookworm",
            entrypoint=["haproxy"],
            command=["-W", "-db", "-f", f"{LIVE}/haproxy.cfg"],
            name=f"{self.name}-router",
            host_config=api.create_host_config(
                binds={
                    str(self.root / "state" / "router"): {"bind": ROUTER_MOUNT, "mode": "ro"},
                    str(self.sockets): {"bind": ROUTER_SOCKETS, "mode": "ro"},
                },
                network_mode="host",
            ),
        )["Id"]
        api.start(self.router_id)
        self.wait_ready()

    def wait_ready(self, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if [m["id"] for m in httpx.get(f"{self.url}/v1/models", timeout=5).json()["data"]] == ["chat"]:
                    return
            except (httpx.HTTPError, ValueError, KeyError):
                pass
            if self.runtime.api.inspect_container(self.engine_id)["State"]["Status"] != "running":
                break
            time.sleep(0.5)
        logs = self.runtime.api.logs(self.engine_id, tail=30).decode(errors="replace")
        pytest.fail(f"the real engine did not serve through the router:\n{logs}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def direct(self) -> httpx.Client:
        transport = httpx.HTTPTransport(uds=str(self.sockets / "chat" / "engine.sock"))
        return httpx.Client(transport=transport, base_url="http://engine", timeout=30)

    def engine_log(self) -> str:
        return self.runtime.api.logs(self.engine_id).decode(errors="replace")

    def settled_log(self) -> str:
        return _settled(self.engine_log)

    def stop(self) -> None:
        for cid in (self.router_id, self.engine_id):
            if cid:
                self.runtime.api.remove_container(cid, force=True)


def _settled(log, quiet: float = 1.0, most: float = 30.0) -> str:
    """The engine's log once it stopped growing for `quiet` seconds (at most `most`): a busy engine
    writes a request's access line and traceback a while after it answered."""
    deadline, text = time.monotonic() + most, log()
    while time.monotonic() < deadline:
        time.sleep(quiet)
        again = log()
        if again == text:
            break
        text = again
    return text


@pytest.fixture(scope="module")
def front(runtime, docker_missing, tmp_path_factory):
    if IMAGE not in {tag for image in runtime.list_images() for tag in image.get("RepoTags") or []}:
        docker_missing(f"real-engine image {IMAGE} missing; run tests/images/build-vllm-cpu.sh")
    one = Front(runtime, tmp_path_factory.mktemp("one_door_real"))
    try:
        one.start()
        yield one
    finally:
        one.stop()


def test_the_engine_itself_serves_its_development_routes_even_with_a_newline(front):
    """The premise: without the router's allowlist, a trailing %0a reaches vLLM's control routes."""
    with front.direct() as engine:
        assert engine.get("/is_sleeping").json() == {"is_sleeping": False}
        assert engine.get("/is_sleeping%0a").json() == {"is_sleeping": False}  # uvicorn decodes, `$` matches
        assert engine.get("/nowhere").status_code == 404
        # the route runs (the CPU build's server_info then fails inside: a 500, not Starlette's 404)
        assert engine.get("/server_info%0a").status_code != 404
    front.settled_log()  # its access lines and traceback are written now, not during the next test


def test_no_spelling_of_a_development_path_reaches_the_real_engine(front):
    files = render_files(RouterSettings(front.name, "127.0.0.1", front.port, False), [Route("chat", None, 512)])
    own = {(400, files["errors/400-path.json"].strip().encode()), (404, files["errors/404-path.json"].strip().encode())}
    body = json.dumps({"model": "chat", "method": "get_world_size", "args": []}).encode()
    before = front.settled_log().count("\n")  # what the engine wrote before: none of it counts
    reached = []
    for path in DEV_PATHS:
        for request in spellings(path, f"127.0.0.1:{front.port}", body):
            status, answer = exchange(front.port, request)
            if (status, answer) not in own:
                reached.append((request.split(b"\r\n")[0], status, answer[:160]))
    assert not reached, reached
    # and the engine's own access log shows none of them arrived
    arrived = [line for line in front.engine_log().splitlines()[before:] if any(p in line for p in DEV_PATHS)]
    assert not arrived, arrived


def test_the_inference_api_reaches_the_real_engine(front):
    chat = httpx.post(
        f"{front.url}/v1/chat/completions",
        json={"model": "chat", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 4},
        timeout=60,
    )
    assert chat.status_code == 200 and chat.json()["object"] == "chat.completion", chat.text
    completion = httpx.post(
        f"{front.url}/v1/completions", json={"model": "chat", "prompt": "One, two,", "max_tokens": 3}, timeout=60
    )
    assert completion.status_code == 200 and completion.json()["object"] == "text_completion", completion.text
    tokens = httpx.post(f"{front.url}/tokenize", json={"model": "chat", "prompt": "Hello"}, timeout=30)
    assert tokens.status_code == 200 and tokens.json()["count"] > 0, tokens.text
    # an embeddings request goes through to vLLM too; this generative model registers no embedding
    # route, so the answer is vLLM's own 404 (Starlette's), not the router's
    embed = httpx.post(f"{front.url}/v1/embeddings", json={"model": "chat", "input": "hi"}, timeout=30)
    assert embed.status_code == 404 and embed.json() == {"detail": "Not Found"}, embed.text
    unknown = httpx.post(f"{front.url}/v1/chat/completions", json={"model": "other", "messages": []}, timeout=10)
    assert unknown.status_code == 404 and "`other` does not exist" in unknown.json()["error"]["message"]
