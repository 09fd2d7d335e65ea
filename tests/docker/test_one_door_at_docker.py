"""One door, on the real Docker engine and the real router (Debian's HAProxy) with the stub engine:
vLLM engines publish no port and serve on a Unix socket no other account may connect to; a model that
asks for a port gets one, and the plan says who can reach it; the router forwards only the inference
API, however a path is spelt, refuses bodies over its limit and model names with control characters,
and asks a key for its metrics. Every request is bounded in time; nothing runs in the background."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import textwrap
import time

import httpx
import pytest

from helpers.cli import run_cli
from helpers.configs import free_port, model_folder, write_config
from helpers.raw_http import exchange, spellings

OTHER_ACCOUNT = 54321  # a uid and gid no file here belongs to


class Door:
    """One applied project behind the router on a free port."""

    def __init__(self, tmp_path, name):
        self.tmp, self.name, self.port = tmp_path, name, free_port()
        self.env = {"AIGO_STATE_DIR": str(tmp_path / "state"), "DOOR_KEYS": "k" * 24 + ",second-key-of-16+"}
        self.url = f"http://127.0.0.1:{self.port}"
        self.sockets = tmp_path / "state" / name / "sockets"
        model_folder(tmp_path / "m")

    def apply(self, models: str, router: str = "", check: bool = True) -> subprocess.CompletedProcess:
        text = textwrap.dedent(f"""
            version: 1
            project: {self.name}
            engines: {{vllm: {{image: aigo-stub-engine, image_tag: "1"}}}}
            router: {{port: {self.port}, image: aigo-haproxy, image_tag: bookworm{router}}}
            models:
            """) + textwrap.indent(textwrap.dedent(models).strip() + "\n", "  ")
        self.config = write_config(self.tmp, text)
        result = run_cli("apply", "-f", str(self.config), "-y", env=self.env)
        if check:
            assert result.returncode == 0, result.stdout + result.stderr
        return result

    def plan(self, *args: str) -> subprocess.CompletedProcess:
        return run_cli("plan", "-f", str(self.config), *args, env=self.env)

    def inspect(self, alias: str) -> dict:
        out = subprocess.run(
            ["docker", "inspect", f"aigo-{self.name}-{alias}"], capture_output=True, text=True, check=True, timeout=30
        )
        return json.loads(out.stdout)[0]

    def direct(self, alias: str) -> httpx.Client:
        transport = httpx.HTTPTransport(uds=str(self.sockets / alias / "engine.sock"))
        return httpx.Client(transport=transport, base_url="http://engine", timeout=5)


def model(alias: str, extra: str = "") -> str:
    return f"""
{alias}:
  source: {{path: m}}
  context_length: 4096
  gpus: none
  env: {{AIGO_STUB_LOAD_SECONDS: "0.2"}}
{textwrap.indent(textwrap.dedent(extra), "  ")}"""


@pytest.fixture
def door(tmp_path, project):
    return Door(tmp_path, project)


def _connect_as(uid: int, path: str) -> str:
    """Try to connect to a Unix socket as another account, in a forked child that drops to `uid`
    (no program to run, so no file of this machine needs to be readable to that account)."""
    pid = os.fork()
    if pid == 0:  # the child: only system calls, then _exit
        code = 3
        try:
            if os.getuid() != uid:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(5)
                s.connect(path)
            code = 0
        except PermissionError:
            code = 1
        except OSError:
            code = 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return {0: "connected", 1: "PermissionError", 2: "OSError"}.get(os.waitstatus_to_exitcode(status), "failed")


@pytest.mark.skipif(os.getuid() != 0, reason="starting a process as another account needs root")
def test_vllm_engines_publish_no_port_and_only_this_account_reaches_their_socket(door):
    door.apply(model("alpha") + model("beta"))
    for alias in ("alpha", "beta"):
        info = door.inspect(alias)
        assert not info["HostConfig"]["PortBindings"] and not info["NetworkSettings"]["Ports"], info["HostConfig"]
        assert "--uds" in info["Config"]["Cmd"] and "--port" not in info["Config"]["Cmd"]
    # the modes: the folder of all sockets is this account's alone; each engine's is setgid, so its
    # socket (made by root in the container) is this account's group's, and group-writable only
    root = os.stat(door.sockets)
    assert stat.S_IMODE(root.st_mode) == 0o700 and root.st_uid == os.getuid()
    folder = os.stat(door.sockets / "alpha")
    assert stat.S_IMODE(folder.st_mode) == 0o2770 and folder.st_gid == os.getgid()
    sock = os.stat(door.sockets / "alpha" / "engine.sock")
    assert stat.S_ISSOCK(sock.st_mode) and stat.S_IMODE(sock.st_mode) & 0o007 == 0 and sock.st_gid == os.getgid()
    path = str(door.sockets / "alpha" / "engine.sock")
    assert _connect_as(os.getuid(), path) == "connected"
    assert _connect_as(OTHER_ACCOUNT, path) == "PermissionError"
    with door.direct("alpha") as engine:
        assert engine.get("/health").status_code == 200
    reply = httpx.post(
        f"{door.url}/v1/chat/completions",
        json={"model": "beta", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
        timeout=10,
    )
    assert reply.status_code == 200 and reply.json()["model"] == "beta"  # through the router, on its socket


def test_a_port_is_an_opt_in_the_plan_explains_and_leaving_it_recreates_the_engine_once(door):
    port = free_port()
    first = door.apply(model("alpha", f"port: {port}\n"))
    assert f"served on 127.0.0.1:{port} (models.alpha.port asks for it): any account on this machine" in first.stdout
    bindings = door.inspect("alpha")["HostConfig"]["PortBindings"]
    assert [b["HostIp"] for b in next(iter(bindings.values()))] == ["127.0.0.1"]
    assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
    # leaving the port out, as an engine made before this version published one: replaced once
    door.config.write_text(door.config.read_text().replace(f"  port: {port}\n", ""))
    plan = door.plan()
    assert "# model.alpha will be replaced" in plan.stdout, plan.stdout
    assert "the engine now serves on a Unix socket only the router reaches" in plan.stdout
    result = run_cli("apply", "-f", str(door.config), "-y", env=door.env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not door.inspect("alpha")["HostConfig"]["PortBindings"]
    again = door.plan("--detailed-exitcode")
    assert again.returncode == 0 and again.stdout.startswith("No changes."), again.stdout


def test_a_port_on_an_on_demand_model_is_refused_before_anything_changes(door):
    result = door.apply(model("alpha", f"on_demand: true\nport: {free_port()}\n"), check=False)
    assert result.returncode == 1
    assert "models.alpha.port" in result.stderr and "development endpoints" in result.stderr
    assert not door.sockets.exists()


def test_the_router_forwards_only_the_inference_api_however_a_path_is_spelt(door):
    """An on-demand stub engine serves vLLM's development endpoints (dev mode); no spelling of one,
    in any request form, reaches it through the router: each is the router's own 400 or 404."""
    door.apply(model("alpha", "on_demand: true\n") + model("plain"))
    body = json.dumps({"model": "alpha", "messages": [], "method": "x"}).encode()
    own = _router_errors(door)
    reached = []
    for path in ("/sleep", "/wake_up", "/is_sleeping", "/collective_rpc", "/reset_prefix_cache", "/server_info"):
        for request in spellings(path, f"127.0.0.1:{door.port}", body):
            status, answer = exchange(door.port, request)
            if (status, answer) not in own:
                reached.append((request[:80], status, answer[:120]))
    assert not reached, reached
    with door.direct("alpha") as engine:
        stats = engine.get("/stub/stats").json()
        assert (stats["sleeps"], stats["asleep"]) == (0, False)  # the first of its group: awake, never slept
        assert engine.get("/is_sleeping").status_code == 200  # the engine has them: only the router reaches them
    for alias in ("alpha", "plain"):  # the inference API still goes through, on both
        reply = httpx.post(
            f"{door.url}/v1/chat/completions", json={"model": alias, "messages": [], "max_tokens": 1}, timeout=10
        )
        assert reply.status_code == 200, reply.text


def _router_errors(door) -> set[tuple[int, bytes]]:
    """The router's own answers to a path it does not forward (its error files, as served)."""
    live = door.tmp / "state" / door.name / "router" / "live" / "errors"
    return {
        (400, (live / "400-path.json").read_bytes().strip()),
        (404, (live / "404-path.json").read_bytes().strip()),
    }


def test_a_body_over_the_limit_is_413_wherever_the_model_is_and_chunked_or_not(door):
    door.apply(model("alpha"), router=", max_body_mb: 1")
    padding = "x" * (1024 * 1024 + 10)
    for text in (
        json.dumps({"model": "alpha", "messages": [], "padding": padding}),  # "model" first
        json.dumps({"messages": [], "padding": padding, "model": "alpha"}),  # "model" last
    ):
        for chunked in (False, True):
            content = (
                text.encode()
                if not chunked
                else iter([text.encode()[i : i + 65536] for i in range(0, len(text), 65536)])
            )
            reply = httpx.post(
                f"{door.url}/v1/chat/completions",
                content=content,
                headers={"Content-Type": "application/json"},
                timeout=30,
            )
            assert reply.status_code == 413, (chunked, reply.status_code, reply.text[:200])
            assert reply.json()["error"]["type"] == "RequestTooLargeError"
    small = {"model": "alpha", "messages": [{"role": "user", "content": "y" * 500_000}], "max_tokens": 1}
    assert httpx.post(f"{door.url}/v1/chat/completions", json=small, timeout=30).status_code == 200


def test_a_model_name_holding_a_control_character_is_a_400_not_a_prefix_route(door):
    door.apply(model("a"))
    for name in ("a\u0000b", "a\u0000", "a\n", "a\u001f", "a\u007f"):
        reply = httpx.post(
            f"{door.url}/v1/chat/completions",
            content=json.dumps({"model": name, "messages": []}).encode(),
            headers={"Content-Type": "application/json"},
            timeout=10,
        )
        assert reply.status_code == 400, (repr(name), reply.status_code, reply.text)
        assert "control character" in reply.json()["error"]["message"]
    assert (
        httpx.post(f"{door.url}/v1/chat/completions", json={"model": "ab", "messages": []}, timeout=10).status_code
        == 404
    )


def test_with_keys_the_metrics_need_one_unless_the_file_opts_out(door):
    keys = ", api_keys: {from_env: DOOR_KEYS}"
    door.apply(model("alpha", "on_demand: true\n"), router=keys)
    for path in ("/metrics", "/metrics/swaps"):
        assert httpx.get(f"{door.url}{path}", timeout=5).status_code == 401
        keyed = httpx.get(f"{door.url}{path}", headers={"Authorization": "Bearer " + "k" * 24}, timeout=5)
        assert keyed.status_code == 200 and "# TYPE" in keyed.text
    assert httpx.get(f"{door.url}/health", timeout=5).status_code == 200  # a liveness probe needs no key
    door.apply(model("alpha", "on_demand: true\n"), router=keys + ", metrics_without_key: true")
    assert httpx.get(f"{door.url}/metrics", timeout=5).status_code == 200
    assert httpx.post(f"{door.url}/v1/chat/completions", json={"model": "alpha"}, timeout=5).status_code == 401


def test_an_audio_upload_is_routed_by_its_form_field(door):
    door.apply(model("speech") + model("other"))
    audio = bytes(range(256)) * 40  # binary, NULs and CRLFs included
    for name in ("speech", "other"):
        reply = httpx.post(
            f"{door.url}/v1/audio/transcriptions",
            files={"file": ("a.wav", audio, "audio/wav")},
            data={"model": name, "language": "en"},
            timeout=10,
        )
        assert reply.status_code == 200, reply.text
        assert reply.json()["text"] == f"stub transcription by {name} of {len(audio)} bytes"
    unnamed = httpx.post(f"{door.url}/v1/audio/transcriptions", files={"file": ("a.wav", audio)}, timeout=10)
    assert unnamed.status_code == 400 and unnamed.json()["error"]["param"] == "model"
    unknown = httpx.post(
        f"{door.url}/v1/audio/transcriptions", files={"file": ("a.wav", audio)}, data={"model": "nope"}, timeout=10
    )
    assert unknown.status_code == 404 and "`nope` does not exist" in unknown.json()["error"]["message"]


def test_raw_spellings_cover_every_request_form():
    """The spellings helper itself: each form the issue names is sent (a test that cannot fail is no test)."""
    forms = list(spellings("/sleep", "127.0.0.1:1", b"{}"))
    text = b"\n".join(forms)
    for needle in (b"%0a", b"%0d", b"%00", b"%09", b"%250a", b"POST http://127.0.0.1:1/sleep", b"HTTP/1.0",
                   b"Transfer-Encoding: chunked", b"//sleep", b"/./sleep", b"/../sleep", b"/%73leep", b"/sleep/"):  # fmt: skip
        assert needle in text, needle
    assert len(forms) >= 60
    with socket.socket() as probe:  # exchange() answers (0, reason) when nothing listens, never hangs
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    assert exchange(closed, forms[0])[0] == 0


def test_an_engine_on_its_socket_has_no_network_at_all(door):
    door.apply(model("alpha") + model("beta", f"port: {free_port()}\n"))
    assert door.inspect("alpha")["HostConfig"]["NetworkMode"] == "none"  # nothing reaches it but its socket
    assert door.inspect("beta")["HostConfig"]["NetworkMode"] == "bridge"  # it asked for a port


def test_the_key_is_checked_before_a_body_is_read_and_never_reaches_an_engine(door):
    door.apply(model("alpha"), router=", api_keys: {from_env: DOOR_KEYS}")
    # an unkeyed client announcing 8 MB gets its 401 at once, without sending the body
    with socket.create_connection(("127.0.0.1", door.port), timeout=10) as raw:
        raw.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 8000000\r\n\r\n" + b"{" * 1000
        )
        answer = raw.recv(4096)
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    keyed = {"Authorization": "Bearer " + "k" * 24}
    reply = httpx.post(
        f"{door.url}/v1/chat/completions",
        headers=keyed,
        json={"model": "alpha", "messages": [], "max_tokens": 1},
        timeout=10,
    )
    assert reply.status_code == 200
    with door.direct("alpha") as engine:
        assert engine.get("/stub/stats").json()["authorization_seen"] == 0


def test_a_web_page_can_neither_post_forms_nor_read_answers_nor_rebind_a_name(door):
    door.apply(model("alpha"))
    chat = {"model": "alpha", "messages": [], "max_tokens": 1}
    plain = httpx.post(
        f"{door.url}/v1/chat/completions", content=json.dumps(chat), headers={"Content-Type": "text/plain"}, timeout=10
    )
    assert plain.status_code == 415 and plain.json()["error"]["code"] == 415
    reply = httpx.post(
        f"{door.url}/v1/chat/completions", json=chat, headers={"Origin": "https://evil.example"}, timeout=10
    )
    assert reply.status_code == 200 and "access-control-allow-origin" not in reply.headers
    with door.direct("alpha") as engine:  # the engine itself answers every origin, as vLLM does
        assert engine.get("/health").headers["access-control-allow-origin"] == "*"
    rebound = httpx.post(f"{door.url}/v1/chat/completions", json=chat, headers={"Host": "evil.example"}, timeout=10)
    assert rebound.status_code == 403 and "Host" in rebound.json()["error"]["message"]
    for host in ("localhost", "localhost:9000", "127.0.0.1", f"127.0.0.1:{door.port}", "[::1]:9000"):  # tunnels too
        ok = httpx.post(f"{door.url}/v1/chat/completions", json=chat, headers={"Host": host}, timeout=10)
        assert ok.status_code == 200, (host, ok.text)


def test_a_hostile_multipart_upload_costs_the_router_nothing_and_two_model_fields_name_none(door):
    door.apply(model("speech"))
    boundary = "b0undary"
    heavy = (
        f"--{boundary}\r\n" + "content-disposition:form-data" * 5000 + '; name="model"\r\n\r\nspeech\r\n'
        f"--{boundary}--\r\n"
    ).encode()
    started = time.monotonic()
    reply = httpx.post(
        f"{door.url}/v1/audio/transcriptions",
        content=heavy,
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        timeout=30,
    )
    assert reply.status_code == 400 and time.monotonic() - started < 2  # its head is over 4 KiB: no model
    assert httpx.get(f"{door.url}/health", timeout=5).status_code == 200  # the router lives on
    twice = httpx.post(
        f"{door.url}/v1/audio/transcriptions",
        files={"file": ("a.wav", b"RIFF")},
        data={"model": ["speech", "other"]},
        timeout=10,
    )
    assert twice.status_code == 400 and twice.json()["error"]["param"] == "model"
    upper = httpx.post(
        f"{door.url}/v1/audio/transcriptions", files={"file": ("a.wav", b"RIFF")}, data={"MODEL": "speech"}, timeout=10
    )
    assert upper.status_code == 400  # the field's name is "model", exactly, as the engine's parser reads it


def test_an_upload_a_web_page_sent_is_refused_and_programs_and_extensions_are_not(door):
    """A multipart upload needs no CORS preflight, so a page on any site could post one to a loopback
    router: the router refuses an upload a browser says a page sent, before its body is read."""
    door.apply(model("speech"))
    upload = {"files": {"file": ("a.wav", b"RIFF")}, "data": {"model": "speech"}, "timeout": 10}
    page_headers = (
        {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},  # a page on another port of this machine
        {"Origin": "https://evil.example"},  # a browser without Fetch Metadata
        {"Origin": "null"},  # a sandboxed frame
        {"Origin": "HTTP://127.0.0.1:3000"},
    )
    for headers in page_headers:
        reply = httpx.post(f"{door.url}/v1/audio/transcriptions", headers=headers, **upload)
        assert reply.status_code == 403 and "web page" in reply.json()["error"]["message"], (headers, reply.text)
    own = {"Origin": door.url}  # a page served on this very address (a proxy in front of the router)
    for headers in ({}, {"Origin": "chrome-extension://abcdef"}, {"Sec-Fetch-Site": "none"}, own,
                    {**own, "Sec-Fetch-Site": "same-origin"}):  # fmt: skip
        reply = httpx.post(f"{door.url}/v1/audio/transcriptions", headers=headers, **upload)
        assert reply.json()["text"] == "stub transcription by speech of 4 bytes", (headers, reply.text)


def test_a_header_is_judged_whole_and_the_target_only_in_origin_form(door):
    """HAProxy's hdr() splits a value at commas and its path skips an absolute target's authority:
    neither lets a request past the Host or Content-Type rule, and neither reaches the engine."""
    door.apply(model("alpha"))
    body = json.dumps({"model": "alpha", "messages": [], "max_tokens": 1}).encode()

    def post(target: str, head: str) -> tuple[int, bytes]:
        return exchange(
            door.port,
            f"POST {target} HTTP/1.1\r\n{head}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body,
        )

    with door.direct("alpha") as engine:
        before = engine.get("/stub/stats").json()["completions"]  # apply's own wait may have asked one
    json_type = "Content-Type: application/json\r\n"
    assert post("/v1/chat/completions", f"Host: 127.0.0.1\r\n{json_type}")[0] == 200
    assert post("/v1/chat/completions", f"Host: evil.example,localhost\r\n{json_type}")[0] == 403
    assert post("/v1/chat/completions", f"Host: evil.example\r\nHost: localhost\r\n{json_type}")[0] == 400  # HAProxy's
    for target in ("http://localhost/v1/chat/completions", "https://x/v1/chat/completions", "*"):
        status, answer = post(target, json_type)
        assert (status, answer) == (400, (door.tmp / "state" / door.name / "router" / "live" / "errors" /
                                          "400-path.json").read_bytes().strip()), (target, status, answer)  # fmt: skip
    smuggled = post("/v1/chat/completions", 'Host: localhost\r\nContent-Type: text/plain; x="a,application/json"\r\n')
    assert smuggled[0] == 415, smuggled
    with door.direct("alpha") as engine:
        assert engine.get("/stub/stats").json()["completions"] == before + 1  # the first, and only it
