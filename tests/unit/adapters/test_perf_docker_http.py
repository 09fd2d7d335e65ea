"""The plan's reads over a bare socket (adapters/docker_http.py), against a fake Docker engine on a
Unix socket: answers decoded as the SDK decoded them, every failure a DockerUnavailable with the
same wording, the plan path never importing the docker SDK or requests, and the number of API
calls per plan the same for 1 model and for 30."""

from __future__ import annotations

import os
import socketserver
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from aigo_apply.adapters import docker_http
from aigo_apply.adapters.docker_engine import DockerRuntime
from aigo_apply.errors import DockerUnavailable

from helpers.configs import model_folder, write_config
from helpers.fake_docker import CONTAINERS, IMAGES, INFO, FakeEngine, http_answer
from helpers.paths import ROOT


@pytest.fixture
def engine(tmp_path):
    found = FakeEngine(tmp_path / "docker.sock")
    yield found
    found.close()


def test_the_three_reads_decode_as_the_sdk_did_and_are_counted(engine):
    runtime = DockerRuntime(base_url=f"unix://{engine.path}")
    assert runtime.list_containers() == CONTAINERS
    assert runtime.list_images() == IMAGES
    assert runtime.info() == INFO
    assert runtime.calls == 3
    assert [r.split()[1].split("?")[0] for r in engine.requests] == [
        "/v1.41/containers/json",
        "/v1.41/images/json",
        "/v1.41/info",
    ]
    assert "all=1" in engine.requests[0] and all(r.endswith("HTTP/1.0") for r in engine.requests)
    assert "docker" not in sys.modules or runtime._api is None  # the SDK's client was never made


def test_a_chunked_answer_is_joined(tmp_path):
    engine = FakeEngine(tmp_path / "chunked.sock", chunked=True)
    try:
        assert DockerRuntime(base_url=f"unix://{engine.path}").list_containers() == CONTAINERS
    finally:
        engine.close()


@pytest.mark.parametrize(
    "answer, says",
    [
        (http_answer(500, b'{"message":"disk on fire"}'), "the Docker engine refused the request: disk on fire"),
        (http_answer(404, b'{"message":"no such thing"}'), "the Docker engine says: no such thing"),
        (http_answer(503, b""), "the Docker engine refused the request: 503 X"),
        (http_answer(200, b"not json"), "Docker engine at unix://"),
        (b"SSH-2.0-OpenSSH\r\n\r\n", "its answer is not HTTP"),
        (b"", "its answer is not HTTP"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunked answer is malformed"),
    ],
)
@pytest.mark.parametrize("ahead", [False, True])
def test_every_bad_answer_is_a_docker_unavailable_error(engine, answer, says, ahead):
    engine.override["/v1.41/info"] = answer
    runtime = DockerRuntime(base_url=f"unix://{engine.path}")
    if ahead:  # asked on its own thread while the lists are read: the same error, where info() is called
        runtime.prefetch_info()
        runtime.list_containers()
    with pytest.raises(DockerUnavailable) as caught:
        runtime.info()
    assert says in str(caught.value)


def test_info_asked_ahead_is_one_call_whose_answer_info_returns(engine):
    runtime = DockerRuntime(base_url=f"unix://{engine.path}")
    runtime.prefetch_info()
    runtime.prefetch_info()  # asked once
    assert runtime.list_containers() == CONTAINERS and runtime.list_images() == IMAGES
    assert runtime.info() == INFO and runtime.calls == 3
    assert runtime.info() == INFO and runtime.calls == 4  # asked again: a fresh read
    assert sum("/info" in r for r in engine.requests) == 2


def test_no_engine_at_the_socket_says_how_to_start_one(tmp_path):
    runtime = DockerRuntime(base_url=f"unix://{tmp_path}/none.sock")
    with pytest.raises(DockerUnavailable) as caught:
        runtime.list_containers()
    assert str(caught.value).startswith(f"cannot reach the Docker engine at unix://{tmp_path}/none.sock; start it")


@pytest.mark.parametrize(
    "host, env, speaks",
    [
        (None, {}, True),
        ("", {}, True),
        ("unix://", {}, True),
        ("unix:///run/user/1000/docker.sock", {}, True),
        ("tcp://127.0.0.1:2375", {}, True),
        ("http://docker.local:2375/", {}, True),
        ("tcp://127.0.0.1:2376", {"DOCKER_TLS_VERIFY": "1"}, False),
        ("tcp://127.0.0.1:2376", {"DOCKER_CERT_PATH": "/certs"}, False),
        ("tcp://127.0.0.1:2375", {"DOCKER_TLS_VERIFY": ""}, True),  # empty: off, as the SDK reads it
        ("ssh://me@box", {}, False),
        ("https://box:2376", {}, False),
        ("unix://relative/docker.sock", {}, False),
        ("tcp://127.0.0.1", {}, False),
        ("tcp://127.0.0.1:99999", {}, False),
        ("npipe:////./pipe/docker_engine", {}, False),
    ],
)
def test_only_plain_sockets_skip_the_sdk(host, env, speaks):
    assert (docker_http.for_host(host, env, "1.41", 60) is not None) is speaks


def test_a_runtime_on_another_transport_keeps_the_sdk(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "ssh://me@box")
    assert DockerRuntime()._http is None


def _config(tmp_path: Path, n: int) -> Path:
    folder = model_folder(tmp_path / f"m{n}")
    models = "\n".join(
        f"  model-{i:03d}: {{source: {{path: {folder}}}, context_length: 4096, gpus: none}}" for i in range(n)
    )
    return write_config(
        tmp_path,
        f"version: 1\nproject: perf{n}\nengines: {{vllm: {{image: aigo-test-idle, image_tag: '1'}}}}\n"
        f"router: {{image: aigo-haproxy, image_tag: bookworm, port: 18997}}\nmodels:\n{models}\n",
        name=f"aigo{n}.yaml",
    )


def test_docker_api_calls_per_plan_do_not_grow_with_the_models(engine, tmp_path, monkeypatch):
    from aigo_apply.app.choose_platform import open_platform
    from aigo_apply.platforms.docker.planning import make_plan

    monkeypatch.setenv("AIGO_STATE_DIR", str(tmp_path / "state"))
    counts = {}
    for n in (1, 30):
        runtime = DockerRuntime(base_url=f"unix://{engine.path}")
        engine.requests.clear()
        plan = make_plan(open_platform(str(_config(tmp_path, n)), runtime=runtime, plans=True))
        assert len([a for a in plan.actions if a.model]) >= n  # every model planned
        counts[n] = (runtime.calls, sorted(r.split()[1].split("?")[0] for r in engine.requests))
    assert counts[1] == counts[30]
    assert counts[1][0] == 3


def test_plan_imports_neither_the_docker_sdk_nor_what_only_changes_need(engine, tmp_path):
    path = _config(tmp_path, 2)
    env = {
        **os.environ,
        "DOCKER_HOST": f"unix://{engine.path}",
        "AIGO_STATE_DIR": str(tmp_path / "state"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "aigo_apply", "plan", "-f", str(path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode in (0, 2), done.stdout + done.stderr
    assert "Plan:" in done.stdout
    imported = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    heavy = {m for m in imported if m.split(".")[0] in ("docker", "requests", "urllib3", "httpx", "ssl", "http")}
    assert heavy == set()
    # nor what only a run with changes needs: the converge loop, the executor, its records and the
    # canary gate's measurement (each frozen record costs about a millisecond to define)
    apply_only = {
        "aigo_apply.app.converge",
        "aigo_apply.platforms.requests",
        "aigo_apply.platforms.docker.executor",
        "aigo_apply.platforms.journal",
        "aigo_apply.platforms.outcome",
        "aigo_apply.plan.canary_verdict",
    }
    assert imported & apply_only == set()
    assert len(engine.requests) == 3


def test_version_is_clicks_and_loads_no_plan_code(tmp_path):
    """`--version` is parsed by click like every other argument (no second path for speed), and
    loads only the command line: no YAML, no desired state, plan, use case or adapter."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "aigo_apply", "--version"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0 and done.stdout == "aigo-apply, version " + __import__("aigo_apply").__version__ + "\n"
    imported = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "click" in imported
    heavy = ("aigo_apply.desired", "aigo_apply.plan", "aigo_apply.app", "aigo_apply.adapters")
    assert not {m for m in imported if m.split(".")[0] == "yaml" or m.startswith(heavy)}


def test_a_tcp_engine_without_tls_is_read_over_the_bare_socket_too(tmp_path, monkeypatch):
    unix = FakeEngine(tmp_path / "for-tcp.sock")  # its handler, served on loopback TCP as well
    handler = unix.server.RequestHandlerClass

    class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
        daemon_threads = True

    server = Server(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{server.server_address[1]}")
        runtime = DockerRuntime()
        assert runtime.info() == INFO and runtime._api is None
    finally:
        server.shutdown()
        server.server_close()
        unix.close()
