"""The readiness wait (platforms/docker/serving_wait.py) with its clock hooks: a fake clock that moves only
when the waiter sleeps (so a 1800 s timeout takes no real time), fake container states, and a real
tiny HTTP server standing in for an engine, on 127.0.0.1 or on a Unix socket (the engines' default)."""

from __future__ import annotations

import json
import os
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from aigo_apply.desired.types import EngineAddress
from aigo_apply.errors import NotReady
from aigo_apply.platforms.docker.serving_wait import MAX_DELAY, Engine, Waiter

LOGS = [f"log line {n}" for n in range(30)]


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    """httpx honours proxy variables; the engine is on 127.0.0.1 and must be reached directly."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


class FakeClock:
    """Time that moves only when the waiter sleeps (by `step` per sleep when given, else by the
    delay asked for)."""

    def __init__(self, step: float | None = None):
        self.now, self.step = 1000.0, step
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += self.step if self.step is not None else seconds


class States:
    """The container's State objects, one per call (the last one repeated)."""

    def __init__(self, *states: dict):
        self.states, self.calls = list(states), 0

    def __call__(self) -> dict:
        self.calls += 1
        return self.states[min(self.calls, len(self.states)) - 1]


RUNNING = {"Status": "running", "Running": True}


def engine(where: int | str, state=None, alias: str = "alpha") -> Engine:
    """The engine to wait for: on a port (int) or a Unix socket (its path)."""
    address = EngineAddress(socket=where) if isinstance(where, str) else EngineAddress(port=where)
    return Engine(alias, address, "cid-alpha", state or States(RUNNING), lambda n: LOGS[-n:])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- a stand-in engine ---------------------------------------------------------------------------


class Script:
    """What the stand-in engine answers, request by request: each list gives the status of the nth
    request to that path (the last one repeated); `listed` says whether /v1/models lists the alias."""

    def __init__(self, health=(200,), listed=(True,), chat=(200,), alias="alpha"):
        self.answers = {"/health": list(health), "/v1/models": list(listed), "/v1/chat/completions": list(chat)}
        self.alias = alias
        self.requests: list[tuple[str, str, dict | None]] = []
        self.lock = threading.Lock()

    def next(self, path: str):
        with self.lock:
            seen = sum(1 for _, p, _ in self.requests if p == path)
            answers = self.answers[path]
            return answers[min(seen, len(answers) - 1)]


def make_handler(script: Script):
    class Handler(BaseHTTPRequestHandler):
        def _reply(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path not in ("/health", "/v1/models"):
                return self._reply(404, {})
            answer = script.next(self.path)
            with script.lock:
                script.requests.append(("GET", self.path, None))
            if self.path == "/health":
                return self._reply(answer, {})
            ids = [script.alias, "other"] if answer else ["other"]
            return self._reply(200, {"object": "list", "data": [{"id": i} for i in ids]})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if self.path != "/v1/chat/completions":
                return self._reply(404, {})
            answer = script.next(self.path)
            with script.lock:
                script.requests.append(("POST", self.path, body))
            return self._reply(answer, {"choices": [{"message": {"content": "p"}}]})

        def log_message(self, *args):  # keep the test output quiet
            pass

        def address_string(self):  # a Unix socket's peer has no host
            return "engine"

    return Handler


class UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


@pytest.fixture
def serve() -> Iterator:
    """Start a stand-in engine for a Script on an ephemeral 127.0.0.1 port; returns its port."""
    servers = []

    def start(script: Script, socket_path: str | None = None) -> int | str:
        if socket_path is None:
            server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(script))
            server.daemon_threads = True
        else:
            server = UnixHTTPServer(_bindable(socket_path), make_handler(script))
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        servers.append((server, thread))
        return server.server_address[1] if socket_path is None else socket_path

    yield start
    for server, thread in servers:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        assert not thread.is_alive()


def _bindable(path: str) -> str:
    """A path bind() takes for `path`, however long (through its folder, as the adapter connects)."""
    if len(path) <= 107:
        return path
    fd = os.open(os.path.dirname(path), os.O_PATH)  # kept open for the test's life: the server binds once
    return f"/proc/self/fd/{fd}/{os.path.basename(path)}"


# -- nothing listens ------------------------------------------------------------------------------


def test_nothing_listening_times_out_after_the_timeout_in_clock_time_not_real_time():
    clock = FakeClock()
    progress = []
    state = States(RUNNING)
    waiter = Waiter(
        12,
        on_progress=lambda *args: progress.append(args),
        clock=clock,
        sleep=clock.sleep,
    )
    began = time.monotonic()
    with pytest.raises(NotReady) as caught:
        waiter.wait(engine(free_port(), state))
    assert time.monotonic() - began < 1

    err = caught.value
    assert "model 'alpha' was not ready after 12 s (last stage: loading)" in str(err)
    assert "models.alpha.ready_timeout" in str(err)
    assert err.log_tail == LOGS[-20:] and err.container_exit_code is None and not err.interrupted
    assert 12 < clock.now - 1000 <= 12 + MAX_DELAY  # gave up at the first check after the timeout
    # polls with a growing delay, capped; the state is asked about now and then, not on every poll
    assert clock.sleeps[0] < clock.sleeps[3] and max(clock.sleeps) == MAX_DELAY
    assert 12 / 0.5 - 2 <= state.calls <= 12 / 0.5 + 2 < len(clock.sleeps)
    # progress every 5 s with the stage and the latest log line
    assert [(a, round(e), s, line) for a, e, s, line in progress] == [
        ("alpha", 5, "loading", "log line 29"),
        ("alpha", 10, "loading", "log line 29"),
    ]


# -- the container exits -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "gone", "code"),
    [
        ({"Status": "exited", "Running": False, "ExitCode": 137}, "exited with code 137", 137),
        ({"Status": "dead", "ExitCode": 1}, "exited with code 1", 1),
        ({"Status": "running", "Restarting": True, "ExitCode": 3}, "exited with code 3", 3),
        ({}, "disappeared", None),
    ],
    ids=["exited", "dead", "restarting", "gone"],
)
def test_a_container_that_exits_fails_the_wait_at_once(state, gone, code):
    clock = FakeClock()
    with pytest.raises(NotReady) as caught:
        Waiter(1800, clock=clock, sleep=clock.sleep).wait(engine(free_port(), States(state)))
    err = caught.value
    assert str(err) == f"the container of model 'alpha' {gone} while loading"
    assert (err.container_exit_code, err.log_tail, err.interrupted) == (code, LOGS[-20:], False)
    assert clock.sleeps == []  # the very first look


def test_a_container_that_exits_later_is_noticed_at_the_next_state_check():
    clock = FakeClock()
    state = States(RUNNING, RUNNING, RUNNING, {"Status": "exited", "ExitCode": 2})
    with pytest.raises(NotReady) as caught:
        Waiter(1800, clock=clock, sleep=clock.sleep).wait(engine(free_port(), state))
    assert caught.value.container_exit_code == 2 and state.calls == 4
    assert 1.0 <= clock.now - 1000 < 2.0  # three checks, 0.5 s apart


# -- interrupted ------------------------------------------------------------------------------------


def test_should_stop_interrupts_the_wait():
    clock = FakeClock()
    asked = []
    should_stop = lambda: asked.append(1) or len(asked) > 3
    with pytest.raises(NotReady) as caught:
        Waiter(1800, should_stop=should_stop, clock=clock, sleep=clock.sleep).wait(engine(free_port()))
    err = caught.value
    assert err.interrupted and err.container_exit_code is None and err.log_tail == []
    assert "interrupted while waiting for model 'alpha'" in str(err)
    assert len(asked) == 4 and len(clock.sleeps) == 3  # asked before every poll


# -- a serving engine ------------------------------------------------------------------------------


def test_a_serving_engine_is_ready_after_health_models_and_one_completion(serve):
    script = Script()
    port = serve(script)
    seconds = Waiter(10).wait(engine(port))
    assert 0 <= seconds < 5
    assert [(m, p) for m, p, _ in script.requests] == [
        ("GET", "/health"),
        ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions"),
    ]
    body = script.requests[-1][2]
    assert body["model"] == "alpha" and body["max_tokens"] == 1 and body["messages"][0]["role"] == "user"


@pytest.mark.parametrize("depth", [1, 12], ids=["short-path", "path-longer-than-af-unix-takes"])
def test_an_engine_on_its_unix_socket_is_waited_for_the_same_way(serve, tmp_path, depth):
    folder = tmp_path.joinpath(*(["a-folder-of-ten"] * depth))
    folder.mkdir(parents=True)
    path = str(folder / "engine.sock")
    assert (len(path) > 107) == (depth > 1)
    clock = FakeClock()
    with pytest.raises(NotReady, match="last stage: loading"):  # nothing listens there yet
        Waiter(1, clock=clock, sleep=clock.sleep).wait(engine(path))
    script = Script()
    serve(script, path)
    assert 0 <= Waiter(10).wait(engine(path)) < 5
    assert [(m, p) for m, p, _ in script.requests] == [
        ("GET", "/health"),
        ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions"),
    ]


def test_the_stages_progress_until_the_engine_answers(serve):
    script = Script(health=(503, 503, 503, 200), listed=(False, False, True), chat=(500, 200))
    port = serve(script)
    clock = FakeClock(step=5.0)  # every poll is a progress report
    stages = []
    waiter = Waiter(1000, on_progress=lambda a, e, stage, line: stages.append(stage), clock=clock, sleep=clock.sleep)

    seconds = waiter.wait(engine(port))

    distinct = [s for n, s in enumerate(stages) if n == 0 or stages[n - 1] != s]
    assert distinct == ["starting", "health ok, model not listed", "test completion answered 500"]
    assert [p for m, p, _ in script.requests].count("/health") == 7  # 3 x 503, then 200 for each later pass
    assert script.requests[-1][1] == "/v1/chat/completions"
    assert seconds == clock.now - 1000 == 5.0 * len(clock.sleeps)


def test_an_engine_that_never_lists_the_alias_times_out_naming_the_stage(serve):
    port = serve(Script(listed=(False,)))
    clock = FakeClock(step=1.0)
    with pytest.raises(NotReady) as caught:
        Waiter(5, clock=clock, sleep=clock.sleep).wait(engine(port))
    assert "(last stage: health ok, model not listed)" in str(caught.value)


def test_a_link_in_an_engines_folder_leads_this_tool_nowhere(serve, tmp_path):
    """An engine is root in its container and may put a symlink at its socket's name, pointing at
    another engine's socket: the tool opens the socket itself (no link followed) and finds none."""
    from aigo_apply.adapters import engine_http

    other = tmp_path / "other" / "engine.sock"
    other.parent.mkdir()
    script = Script()
    serve(script, str(other))
    assert engine_http.call(EngineAddress(socket=str(other)), "GET", "/health", 5)[0] == 200  # the real one
    mine = tmp_path / "mine" / "engine.sock"
    mine.parent.mkdir()
    mine.symlink_to(other)
    assert not engine_http.listening(EngineAddress(socket=str(mine)))
    status, why = engine_http.call(EngineAddress(socket=str(mine)), "POST", "/sleep?level=1", 5)
    assert status == 0 and "not a socket" in why
    clock = FakeClock()
    with pytest.raises(NotReady):
        Waiter(1, clock=clock, sleep=clock.sleep).wait(engine(str(mine)))
    assert [p for _, p, _ in script.requests] == ["/health"]  # only the one direct call above arrived


# -- an engine whose model list cannot be read -----------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b'{"object": "list", "data": [{"id": "alpha"}, "oops"]}',
        b'{"object": "list", "data": [{"id": "alpha"}, {"id": 7}]}',
        b'{"object": "list", "data": {"id": "alpha"}}',
        b'{"object": "list"}',
        b"[1, 2]",
        b"not json",
        b"[" * 100_000,
    ],
)
def test_a_model_list_that_cannot_be_read_ends_the_wait_early_with_the_reason(body):
    class Malformed(BaseHTTPRequestHandler):
        def do_GET(self):
            data = b"{}" if self.path == "/health" else body
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Malformed)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        clock = FakeClock(step=0.1)
        with pytest.raises(NotReady) as caught:
            Waiter(1800, clock=clock, sleep=clock.sleep).wait(engine(server.server_address[1]))
        assert "GET /v1/models answer cannot be read" in str(caught.value)
        assert clock.now - 1000 < 60  # not the ready timeout's half hour, saying "loading"
    finally:
        server.shutdown()
        server.server_close()


def test_listed_ids_reads_only_an_openai_model_list():
    from aigo_apply.platforms.docker.serving_wait import listed_ids

    assert listed_ids(b'{"data": [{"id": "a"}, {"id": "b", "max_model_len": 4096}]}') == {"a", "b"}
    assert listed_ids(b'{"data": []}') == set()
    assert listed_ids(b'{"data": [{"name": "a"}]}') is None
    assert listed_ids(b" " * (5 * 1024 * 1024) + b"{}") is None
