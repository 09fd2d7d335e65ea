"""Who answers on the router's port (platforms/docker/router_deploy.py Router.answer), against real HTTP servers on
127.0.0.1: a program that answers every path with 200 (what most servers do for /health) is not this
project's router; one whose /v1/models carries the routes header, asked with the key, is."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from aigo_apply.desired.types import RouterSettings
from aigo_apply.platforms.docker.router_deploy import Router
from aigo_apply.router.haproxy import ROUTES_HEADER

from helpers.fakes import FakeRuntime


def _server(headers: dict[str, str], seen: list[dict[str, str]]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
            body = json.dumps({"status": "ok"} if self.path == "/health" else {"object": "list", "data": []}).encode()
            self.send_response(200)
            for name, value in {"content-type": "application/json", **headers}.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


@pytest.fixture
def serve() -> Iterator:
    servers: list[ThreadingHTTPServer] = []

    def start(headers: dict[str, str], seen: list[dict[str, str]]) -> int:
        server = _server(headers, seen)
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server.server_address[1]

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _router(tmp_path, port: int, keys: list[str] | None = None) -> Router:
    settings = RouterSettings("lab", "127.0.0.1", port, keys is not None)
    return Router(FakeRuntime(), tmp_path / "router", settings, "aigo-lab-router", "haproxy:3.2", keys)


def test_a_program_that_answers_200_everywhere_is_not_this_projects_router(tmp_path, serve):
    seen: list[dict[str, str]] = []
    port = serve({}, seen)
    said = _router(tmp_path, port).answer()
    assert said == f"HTTP 200 without the {ROUTES_HEADER} header of this project's router"
    assert [s["path"] for s in seen] == ["/v1/models"]  # never /health, which anything answers


def test_this_projects_router_is_told_by_its_routes_header_asked_with_the_key(tmp_path, serve):
    seen: list[dict[str, str]] = []
    port = serve({ROUTES_HEADER: ""}, seen)  # no route yet: the header is there, empty
    assert _router(tmp_path, port, keys=["k" * 32]).answer() == ""
    assert seen[0]["authorization"] == "Bearer " + "k" * 32


def test_nothing_listening_is_said_as_the_connection_error(tmp_path, serve):
    port = serve({}, [])
    router = _router(tmp_path, port)
    router.settings = RouterSettings("lab", "127.0.0.1", 1, False)  # port 1: nothing listens there
    assert router.answer() != ""
