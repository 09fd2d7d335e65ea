"""HTTP to one engine from this machine, the one place that knows how: over its Unix socket (the
default for vLLM: the socket's folder lets no other account in) or a port on 127.0.0.1 (an engine
that cannot serve a socket, or a model that asks for a port). Never a container's bridge address.

A socket is reached through a descriptor of the socket itself (O_PATH, no symlink followed), as
/proc/self/fd/N: a link an engine put in its folder leads nowhere, and a path longer than AF_UNIX
takes (107 bytes: a deep state folder and a long alias reach it) still connects."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from aigo_apply.desired.types import EngineAddress

if TYPE_CHECKING:
    import httpx

BASE = "http://engine"  # the host part of every URL: the transport decides where it goes


@contextmanager
def _short_path(path: str) -> Iterator[str]:
    """A path to the socket that connect() takes and that cannot lead anywhere else: the socket is
    opened with O_PATH|O_NOFOLLOW (an engine, root in its container, may put a symlink in its own
    folder; it must never turn this tool's requests to another engine), checked to be a socket, and
    reached as /proc/self/fd/N, which also fits AF_UNIX however long the real path is."""
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise ConnectionRefusedError(f"no socket at {path}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            raise ConnectionRefusedError(f"{path} is not a socket (a link or a file is in its place)")
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


def listening(address: EngineAddress, timeout: float = 0.5) -> bool:
    """Whether the engine accepts a connection now (vLLM binds early but listens only once ready:
    until then a connect is refused, which is cheap to try often)."""
    try:
        if address.socket:
            with _short_path(address.socket) as path, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(timeout)
                sock.connect(path)
                return True
        with socket.create_connection(("127.0.0.1", int(address.port or 0)), timeout=timeout):
            return True
    except OSError:
        return False


class EngineClient:
    """An httpx client bound to one engine; use as a context manager, paths relative (`/health`)."""

    def __init__(self, address: EngineAddress, timeout: float, connections: int = 100):
        import httpx

        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=min(connections, 20))
        self._path = _short_path(address.socket) if address.socket else None
        if self._path is not None:
            transport = httpx.HTTPTransport(uds=self._path.__enter__(), limits=limits)
            self.http = httpx.Client(base_url=BASE, transport=transport, timeout=timeout)
        else:
            self.http = httpx.Client(base_url=f"http://127.0.0.1:{address.port}", timeout=timeout, limits=limits)

    def get(self, path: str) -> httpx.Response:
        return self.http.get(path)

    def post(self, path: str, **kwargs: object) -> httpx.Response:
        return self.http.post(path, **kwargs)  # type: ignore[arg-type]

    def request(self, method: str, path: str) -> httpx.Response:
        return self.http.request(method, path)

    def close(self) -> None:
        self.http.close()
        if self._path is not None:
            self._path.__exit__(None, None, None)
            self._path = None

    def __enter__(self) -> EngineClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def call(address: EngineAddress, method: str, path: str, timeout: float) -> tuple[int, str]:
    """One request to an engine; (status, the first 300 characters of the body), or (0, the reason)
    when no answer came."""
    import httpx

    try:
        with EngineClient(address, timeout) as client:
            reply = client.request(method, path)
            return reply.status_code, reply.text[:300]
    except (httpx.HTTPError, OSError) as exc:
        return 0, str(exc) or type(exc).__name__
