"""The kubeconfig's exec credential plugin (`users[].user.exec`: `aws eks get-token`,
`gke-gcloud-auth-plugin`, `kubelogin`...), run here instead of by lightkube, within bounds.

lightkube ran it with Popen().communicate(): no time limit (a plugin that waits on a browser, a
network that never answers or a `sleep` hung `plan` for good), all of its output in memory, its whole
standard error in the message, and a KeyError or JSON traceback for an answer without `status.token`.
Here the plugin runs at most EXEC_TIMEOUT seconds (then it is killed) and at most EXEC_OUTPUT bytes of
each stream are kept (a plugin that prints more is killed too); its ExecCredential is parsed by the
bounded JSON reader (safe_read.json_value) and must hold `status.token` as text; each failure is one
lightkube ConfigError (adapters/kube_client.py words it as "cannot get credentials for context ...")
naming the command, never the token. The token is asked for on the first request and again when the
API server answers 401, as kubectl does."""

from __future__ import annotations

import os
import selectors
import subprocess
import time
from collections.abc import Generator
from typing import TYPE_CHECKING

from aigo_apply import safe_read
from aigo_apply.errors import visible

if TYPE_CHECKING:
    import httpx2
    from lightkube.config.models import UserExec

EXEC_TIMEOUT = 60.0  # seconds a plugin may take: a cloud CLI answers in a few, a browser login in under one minute
EXEC_OUTPUT = 1024 * 1024  # bytes of each stream kept: an ExecCredential is a few KiB
API_VERSIONS = (
    "client.authentication.k8s.io/v1",
    "client.authentication.k8s.io/v1beta1",
    "client.authentication.k8s.io/v1alpha1",
)


def run_plugin(command: list[str], env: dict[str, str], timeout: float, limit: int) -> bytes:
    """The plugin's standard output, once it exited 0 within `timeout` seconds printing at most
    `limit` bytes on each stream; else ValueError saying what went wrong, in words that follow
    "the exec credential plugin `CMD`" (the plugin is killed first)."""
    try:
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        raise ValueError(f"cannot be started: {exc.strerror or type(exc).__name__}") from None
    assert proc.stdout is not None and proc.stderr is not None  # both are pipes (PIPE above)
    stdout_fd, stderr_fd = proc.stdout.fileno(), proc.stderr.fileno()
    streams = {stdout_fd: proc.stdout, stderr_fd: proc.stderr}
    out = {fd: bytearray() for fd in streams}  # by file descriptor: what each stream printed
    deadline = time.monotonic() + timeout
    why = ""
    with selectors.DefaultSelector() as selector:
        for stream in streams.values():
            selector.register(stream, selectors.EVENT_READ)
        while selector.get_map() and not why:
            left = deadline - time.monotonic()
            if left <= 0:
                why = f"did not answer within {timeout:g} s"
                break
            for key, _ in selector.select(left):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                out[key.fd] += chunk
                if len(out[key.fd]) > limit:
                    why = f"printed more than {safe_read.size_text(limit)}"
    if why:
        proc.kill()
    try:
        code = proc.wait(max(0.0, deadline - time.monotonic()) if not why else 5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
        why = f"did not answer within {timeout:g} s"
    finally:
        for stream in streams.values():
            stream.close()
    if why:
        raise ValueError(why)
    if code != 0:
        said = bytes(out[stderr_fd]).decode("utf-8", "replace").strip().splitlines()
        raise ValueError(f"exited with {code}" + (f": {visible(said[-1][:500])}" if said else ""))
    return bytes(out[stdout_fd])


def token_of(raw: bytes) -> str:
    """The token of an ExecCredential (JSON: {"status": {"token": ...}}); ValueError otherwise."""
    try:
        answer = safe_read.json_value(raw, 16)
    except safe_read.BadData as exc:
        raise ValueError(f"answered with what {exc}") from None
    status = answer.get("status") if isinstance(answer, dict) else None
    token = status.get("token") if isinstance(status, dict) else None
    if not isinstance(token, str) or not token:
        raise ValueError("answered with no status.token (aigo-apply takes a token, not a client certificate)")
    if not (token.isascii() and token.isprintable()):
        raise ValueError("answered with a token that holds a control character or one beyond ASCII")
    return token


def exec_auth(spec: UserExec) -> httpx2.Auth:
    """An httpx2 Auth that gets its bearer token from the plugin `spec` (lightkube's UserExec:
    apiVersion, command, args, env), within bounds (see the module's docstring)."""
    import httpx2
    from lightkube.core.exceptions import ConfigError

    shown = visible(" ".join([spec.command, *(spec.args or [])])[:200])

    class BoundedExecAuth(httpx2.Auth):
        def __init__(self) -> None:
            self.bearer: str | None = None

        def _token(self) -> str:
            if spec.apiVersion not in API_VERSIONS:
                raise ConfigError(
                    f"the exec credential plugin's apiVersion {spec.apiVersion!r} is none of {', '.join(API_VERSIONS)}"
                )
            env = dict(os.environ)
            env.update((var.name, var.value) for var in spec.env or [])
            try:
                return token_of(run_plugin([spec.command, *(spec.args or [])], env, EXEC_TIMEOUT, EXEC_OUTPUT))
            except ValueError as exc:  # what went wrong, in words that follow the plugin's name
                raise ConfigError(f"the exec credential plugin `{shown}` {exc}") from None

        def sync_auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
            if self.bearer:
                request.headers["Authorization"] = self.bearer
                response = yield request
                if response.status_code != 401:
                    return
            self.bearer = f"Bearer {self._token()}"
            request.headers["Authorization"] = self.bearer
            yield request

    return BoundedExecAuth()
