"""A Docker engine on a Unix socket that answers the plan's three GETs with recorded JSON: the
bare-socket client (adapters/docker_http.py) is tested on it."""

from __future__ import annotations

import json
import socketserver
import threading
from pathlib import Path

INFO = {"ServerVersion": "24.0.7", "Runtimes": {"runc": {}}, "Name": "fake"}
CONTAINERS = [
    {
        "Id": "a" * 64,
        "Names": ["/someone-else"],
        "State": "running",
        "Status": "Up 2 hours",
        "Image": "nginx:1",
        "ImageID": "sha256:" + "b" * 64,
        "Labels": {"x": "y"},
        "Ports": [{"IP": "127.0.0.1", "PrivatePort": 80, "PublicPort": 8080, "Type": "tcp"}],
    }
]
IMAGES = [{"Id": "sha256:" + "b" * 64, "RepoTags": ["nginx:1"]}]


class FakeEngine:
    """A Docker engine on a Unix socket that answers the three GETs (or `override`s: path ->
    raw HTTP answer) and records every request line."""

    def __init__(self, path: Path, chunked: bool = False):
        self.path, self.requests, self.override = path, [], {}
        engine = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                line = self.rfile.readline().decode()
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                engine.requests.append(line.strip())
                target = line.split()[1]
                path = target.split("?")[0]
                if path in engine.override:
                    self.wfile.write(engine.override[path])
                    return
                body = {
                    "/v1.41/containers/json": CONTAINERS,
                    "/v1.41/images/json": IMAGES,
                    "/v1.41/info": INFO,
                }.get(path)
                if body is None:
                    self.wfile.write(http_answer(404, b'{"message":"page not found"}'))
                    return
                self.wfile.write(http_answer(200, json.dumps(body).encode(), chunked))

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True

        self.server = Server(str(path), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def http_answer(status: int, body: bytes, chunked: bool = False) -> bytes:
    reason = {200: "OK", 404: "Not Found", 500: "Internal Server Error"}.get(status, "X")
    if chunked:  # as Go's net/http sends a long answer to an HTTP/1.1 client
        half = len(body) // 2
        parts = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (body[:half], body[half:]) if p)
        return b"HTTP/1.1 %d %s\r\nTransfer-Encoding: chunked\r\n\r\n%s0\r\n\r\n" % (status, reason.encode(), parts)
    return b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        status,
        reason.encode(),
        len(body),
        body,
    )
