"""Raw HTTP/1.x requests, byte for byte, for the router's boundary tests: every spelling of a path an
attacker would try (percent-encoded control characters, double encoding, dot segments, absolute form,
HTTP/1.0, chunked bodies), and one bounded exchange over a fresh TCP connection to 127.0.0.1."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator

TIMEOUT = 10.0


def path_spellings(path: str) -> list[str]:
    """Ways to name `path` (e.g. /sleep) that a lenient server might still route to it."""
    name = path[1:]
    out = [path, path + "/", path.upper(), path + ";x", path + "%2f", path + "%20"]
    out += [path + tail for tail in ("%0a", "%0d", "%00", "%09", "%0d%0a", "%7f", "%0a?mode=abort", "%250a", "%2500")]
    out += ["/%" + f"{ord(name[0]):02x}" + name[1:], "/" + name.replace("_", "%5F"), "/" + name.replace("_", "%5f")]
    out += ["//" + name, "/./" + name, "/v1/../" + name, "/v1/chat/completions/../../" + name, "/x/..%2f" + name]
    out += ["/%2e%2e/" + name, "/%2E/" + name, "/.%2e/" + name]
    return list(dict.fromkeys(out))


def spellings(path: str, authority: str, body: bytes) -> Iterator[bytes]:
    """Every spelling of `path` in every request form: POST with a JSON body (HTTP/1.1 and 1.0,
    origin and absolute form, with a length and chunked) and GET."""
    for target in path_spellings(path):
        length = f"Content-Length: {len(body)}\r\n".encode()
        head = f"Host: {authority}\r\nContent-Type: application/json\r\n".encode()
        yield b"POST " + target.encode() + b" HTTP/1.1\r\n" + head + length + b"Connection: close\r\n\r\n" + body
        yield b"POST " + target.encode() + b" HTTP/1.0\r\n" + head + length + b"\r\n" + body
        absolute = f"http://{authority}{target}".encode()
        yield b"POST " + absolute + b" HTTP/1.1\r\n" + head + length + b"Connection: close\r\n\r\n" + body
        chunked = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
        yield (
            b"POST " + target.encode() + b" HTTP/1.1\r\n" + head + b"Transfer-Encoding: chunked\r\n"
            b"Connection: close\r\n\r\n" + chunked
        )
        yield b"GET " + target.encode() + b" HTTP/1.1\r\nHost: " + authority.encode() + b"\r\nConnection: close\r\n\r\n"


def exchange(port: int, request: bytes) -> tuple[int, bytes]:
    """Send one raw request to 127.0.0.1:`port` and read the whole answer: (status, body stripped),
    or (0, the reason) when no HTTP answer came (a refused or reset connection)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
            sock.sendall(request)
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
    except OSError as exc:
        return 0, str(exc).encode()
    match = re.match(rb"HTTP/1\.[01] (\d{3})", data)
    if not match:
        return 0, data[:200]
    head, _, rest = data.partition(b"\r\n\r\n")
    if re.search(rb"(?im)^transfer-encoding:\s*chunked", head):
        rest = _unchunk(rest)
    return int(match.group(1)), rest.strip()


def _unchunk(data: bytes) -> bytes:
    out = b""
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out, data = out + data[:size], data[size + 2 :]
    return out
