"""The Docker engine's read-only GETs (container list, image list, /info) on a bare socket: `plan`
and a no-op `apply` read the machine with these three calls, and importing the docker SDK with
requests and urllib3 (or even http.client, which pulls in email and ssl) for them cost more
start-up time than the planning work itself. Each GET is one HTTP/1.0 exchange on a fresh
connection (a Unix socket connects in microseconds): the engine answers with the whole body and
closes, so there is no chunked encoding or keep-alive to handle. Only plain sockets are spoken here
(a Unix socket, or tcp:// without TLS); for any other DOCKER_HOST (ssh://, TLS, odd forms)
`for_host` answers None and the runtime keeps using the SDK, so no setup that worked before
changes. Failures come back as OSError (the socket), DockerUnavailable (an answer that is not 2xx)
or ValueError (an answer that is not HTTP or not JSON); the runtime maps the other two. The module
stays light (no urllib, no http.client): it is on every plan's path.

Why two Docker clients (one, the SDK, unless a measured reason says otherwise, the review asked): measured
on the development workstation (2 shared cores, a local Docker socket, while CI ran beside it), `python -m aigo_apply
plan -f examples/demo.yaml`, 15 runs each in alternating order, same output byte for byte: these
three GETs, median 0.249 s (min 0.237 s); the same plan with the SDK forced (`for_host` answering
None, as for an ssh:// host), median 0.307 s (min 0.299 s): the SDK adds about 58 ms, 23% of
every plan. So reads stay here and every write (create, start, rename, remove, pull...) goes
through the SDK in adapters/docker_engine.py, created on first use."""

from __future__ import annotations

import _socket  # not `socket`: its enum set-up costs start-up time, and a bare socket is all we need
import json
import re

from aigo_apply.errors import DockerUnavailable, visible

TYPE_CHECKING = False  # typing and collections: for the type checker only
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from aigo_apply.json_types import JsonValue

API_VERSION = "1.41"  # Docker 20.10+, and Podman's compatible socket; pinned to skip a version round trip
# the three reads a plan makes: (path, query)
LIST_CONTAINERS = ("/containers/json", {"limit": -1, "all": 1, "size": 0, "trunc_cmd": 0})
LIST_IMAGES = ("/images/json", {"only_ids": 0, "all": 0})
INFO = ("/info", None)
_QUERY_TEXT = re.compile(r"[A-Za-z0-9_.-]*")

DEFAULT_SOCKET = "/var/run/docker.sock"
MAX_ANSWER = 256 * 1024 * 1024  # an engine's list answer beyond this is not one to parse
_UNIX = re.compile(r"unix://(/[^?#\x00-\x1f]+)")
_TCP = re.compile(r"(?:tcp|http)://([A-Za-z0-9.-]+):([0-9]{1,5})/?")
_STATUS = re.compile(rb"HTTP/1\.[01] ([0-9]{3})(?: ([^\r\n]*))?")
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")


class DockerHTTP:
    """GET a path of the versioned API and decode the JSON answer."""

    def __init__(self, connect: Callable[[], _socket.socket], api_version: str):
        self._connect, self._prefix = connect, f"/v{api_version}"

    def get(self, path: str, params: Mapping[str, object] | None = None) -> JsonValue:
        target = self._prefix + path + ("?" + _query(params) if params else "")
        request = f"GET {target} HTTP/1.0\r\nHost: docker\r\nAccept: application/json\r\n\r\n".encode("ascii")
        sock = self._connect()
        try:
            sock.sendall(request)
            chunks, size = [], 0
            while True:
                chunk = sock.recv(262144)
                if not chunk:
                    break
                size += len(chunk)
                if size > MAX_ANSWER:
                    raise ValueError(f"its answer is larger than {MAX_ANSWER // 1024 // 1024} MiB")
                chunks.append(chunk)
        finally:
            sock.close()
        status, reason, headers, body = parse_response(b"".join(chunks))
        if not 200 <= status < 300:  # worded as the docker SDK's NotFound and APIError were
            verb = "says" if status == 404 else "refused the request"
            raise DockerUnavailable(f"the Docker engine {verb}: {_message(body) or f'{status} {reason}'.strip()}")
        try:
            found: JsonValue = json.loads(body)
            return found
        except RecursionError:  # nested deeper than any answer of the engine's: not one to read
            raise ValueError(f"its answer to GET {path} nests too deeply to be JSON it sends") from None


def _query(params: Mapping[str, object]) -> str:
    """`k=v&...` of plain names and numbers (all the reads here send); anything else is refused
    rather than escaped, so no path or query can be smuggled into the request line."""
    pairs = [(str(k), str(v)) for k, v in params.items()]
    if not all(_QUERY_TEXT.fullmatch(k) and _QUERY_TEXT.fullmatch(v) for k, v in pairs):
        raise ValueError("a query holds characters other than letters, digits and _.-")
    return "&".join(f"{k}={v}" for k, v in pairs)


def parse_response(raw: bytes) -> tuple[int, str, dict[str, str], bytes]:
    """(status, reason, headers with lower-case names, body) of a whole HTTP/1.x answer; a chunked
    body is joined. ValueError when `raw` is not an HTTP answer."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = _STATUS.fullmatch(lines[0]) if sep else None
    if status is None:
        raise ValueError("its answer is not HTTP")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = _unchunk(body)
    elif headers.get("content-length", "").isdigit():
        body = body[: int(headers["content-length"])]
    return int(status.group(1)), (status.group(2) or b"").decode("latin-1"), headers, body


def _unchunk(body: bytes) -> bytes:
    out: list[bytes] = []
    at = 0
    while True:
        end = body.find(b"\r\n", at)
        if end < 0:
            raise ValueError("its chunked answer is cut short")
        token = body[at:end].split(b";")[0].strip()
        if not _CHUNK_SIZE.fullmatch(token):  # int() would take "-5" or "+5": a size must only move on
            raise ValueError("its chunked answer is malformed")
        size = int(token, 16)
        if size == 0:
            return b"".join(out)
        out.append(body[end + 2 : end + 2 + size])
        at = end + 2 + size + 2


def for_host(
    host: str | None, environ: Mapping[str, str], api_version: str, timeout: float | None
) -> DockerHTTP | None:
    """A client for `host` (a DOCKER_HOST value; empty: the default socket), or None when this
    module does not speak that transport: TLS (DOCKER_TLS_VERIFY or DOCKER_CERT_PATH set, read as
    the docker SDK reads them), ssh://, npipe://, or any form other than unix:///abs/path and
    tcp://host:port, or a host name no connection can be made to (`host_problem`: the SDK's refusal
    says it)."""
    if environ.get("DOCKER_CERT_PATH") or environ.get("DOCKER_TLS_VERIFY") not in (None, ""):
        return None
    if host_problem(host):
        return None
    text = (host or "").strip()
    if text in ("", "unix://"):
        text = "unix://" + DEFAULT_SOCKET
    unix = _UNIX.fullmatch(text)
    if unix:
        path = unix.group(1)

        def unix_socket() -> _socket.socket:
            sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            try:
                sock.settimeout(timeout)
                sock.connect(path)
            except BaseException:
                sock.close()
                raise
            return sock

        return DockerHTTP(unix_socket, api_version)
    tcp = _TCP.fullmatch(text)
    if tcp and 0 < int(tcp.group(2)) <= 65535:
        name, port = tcp.group(1), int(tcp.group(2))

        def tcp_socket() -> _socket.socket:  # socket.create_connection, on _socket
            failed: OSError = OSError(f"{name} resolves to no address")
            for family, kind, proto, _, address in _socket.getaddrinfo(name, port, 0, _socket.SOCK_STREAM):
                sock = _socket.socket(family, kind, proto)
                try:
                    sock.settimeout(timeout)
                    sock.connect(address)
                    return sock
                except OSError as exc:
                    sock.close()
                    failed = exc
            raise failed

        return DockerHTTP(tcp_socket, api_version)
    return None


_NETWORK_SCHEMES = ("tcp", "http", "https", "ssh")


def host_problem(host: str | None) -> str | None:
    """Why the host name of a network DOCKER_HOST (tcp://, http(s)://, ssh://) is no name a connection
    can be made to, or None: what IDNA refuses (an empty label as in `tcp://a..b:2375`, a label over 63
    characters) and a name over 253 characters. urllib3 refused such a name with a LocationParseError
    the SDK let through, where a socket was opened: a traceback. (Other malformed forms the SDK
    refuses itself, with words: `unusable_host`.)"""
    scheme, sep, rest = (host or "").strip().partition("://")
    if not sep or scheme.lower() not in _NETWORK_SCHEMES:
        return None
    netloc = re.split(r"[/?#]", rest, maxsplit=1)[0].rpartition("@")[2]
    if netloc.startswith("["):  # an IPv6 address: the SDK checks it
        return None
    name = netloc.rpartition(":")[0] if ":" in netloc else netloc
    if not name:
        return None
    try:
        encoded = name.rstrip(".").encode("idna")  # (the codec is imported only here)
    except UnicodeError:
        return f"its host {shown_host(name)} is no name: a label is empty or longer than 63 characters"
    if len(encoded) > 253:
        return f"its host is {len(encoded)} characters long, more than the 253 a name may have"
    return None


def shown_host(host: str) -> str:
    """DOCKER_HOST (or a part of it) as a message shows it: on its line, whatever it holds, and
    without the password of a `ssh://user:password@host`."""
    host = re.sub(r"(//[^/?#@:]*):[^/?#@]*@", r"\1:***@", host)
    return host if host.isprintable() else repr(host)


def unusable_host(host: str, exc: Exception | str) -> str:
    """The one line for a DOCKER_HOST (or DOCKER_CERT_PATH) the docker SDK cannot take (`exc`, its
    own refusal or urllib's: a port over 65535, `http://[::1`, a port that is no number; or our own
    words, `host_problem`): it names the variable and says what to write, instead of a traceback."""
    detail = visible((str(exc).strip() or type(exc).__name__) if isinstance(exc, Exception) else exc)
    shown = shown_host(host)
    if "TLS" in type(exc).__name__ or "certificate" in detail.lower():
        return (
            f"the Docker client cannot use TLS for DOCKER_HOST={shown} ({detail}); point DOCKER_CERT_PATH at a "
            "folder holding ca.pem, cert.pem and key.pem, or unset DOCKER_TLS_VERIFY and DOCKER_CERT_PATH"
        )
    return (
        f"the Docker client cannot use DOCKER_HOST={shown} ({detail}); set it to "
        "unix:///PATH/TO/docker.sock or tcp://HOST:PORT (a port from 1 to 65535), or unset it for "
        f"unix://{DEFAULT_SOCKET}"
    )


def _message(body: bytes) -> str:
    """The engine's {"message": ...} explanation, else the body's first line (bounded)."""
    try:
        found = json.loads(body)
    except (ValueError, RecursionError):
        found = None
    if isinstance(found, dict) and isinstance(found.get("message"), str):
        return str(found["message"])[:500]
    text = body.decode("utf-8", errors="replace").strip()
    return text.splitlines()[0][:500] if text else ""
