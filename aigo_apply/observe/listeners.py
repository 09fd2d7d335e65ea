"""The host's listening TCP sockets as plain records, parsed from the text of /proc/net/tcp and
/proc/net/tcp6 (pure: adapters/listeners.py reads those files, and which process holds a socket).
A port that a program outside Docker holds (Ollama, llama-swap, Open WebUI, a hand-run `vllm
serve`) is found from these at plan time, instead of by an apply whose router cannot bind it."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Collection
from dataclasses import dataclass, replace

LISTEN = "0A"  # the kernel's TCP_LISTEN, as /proc/net/tcp writes a socket's state
_SOCKET_LINK = re.compile(r"socket:\[([0-9]{1,20})\]")


@dataclass(frozen=True)
class Listener:
    """One listening socket: its address as Python's ipaddress writes it (an IPv4-mapped IPv6
    address as its IPv4 one), its port, its inode (which process holds it: /proc/PID/fd links), the
    user that opened it, and, where the host says, the process holding it."""

    address: str
    port: int
    inode: int
    uid: int
    pid: int | None = None
    process: str = ""  # /proc/PID/comm

    @property
    def shown(self) -> str:
        """address:port as a URL writes it (an IPv6 address in brackets)."""
        return f"[{self.address}]:{self.port}" if ":" in self.address else f"{self.address}:{self.port}"

    def held_by(self, pid: int, process: str) -> Listener:
        return replace(self, pid=pid, process=process)


def parse_proc_net(text: str, ports: Collection[int] | None = None, byteorder: str = "little") -> list[Listener]:
    """The LISTEN entries of /proc/net/tcp or /proc/net/tcp6 (the header line and any line that does
    not read as an entry are skipped), only those on `ports` when given. The kernel writes an address
    as 32-bit words in the host's byte order (`byteorder`: sys.byteorder) and the port big-endian."""
    found = []
    for line in text.splitlines():
        fields = line.split()
        # sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
        if len(fields) < 10 or fields[3] != LISTEN:
            continue
        address, _, port_hex = fields[1].partition(":")
        try:
            port = int(port_hex, 16)
            host = _address(address, byteorder)
            uid, inode = int(fields[7]), int(fields[9])
        except ValueError:
            continue
        if host is not None and (ports is None or port in ports):
            found.append(Listener(host, port, inode, uid))
    return found


def _address(hex_text: str, byteorder: str) -> str | None:
    """An address of /proc/net/tcp (8 hex digits) or tcp6 (32), as ipaddress writes it."""
    if len(hex_text) not in (8, 32):
        return None
    raw = bytes.fromhex(hex_text)
    if byteorder == "little":  # each 32-bit word was written from the host's order
        raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(raw)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def socket_inode(link: str) -> int | None:
    """The inode of a socket from the target of a /proc/PID/fd link (`socket:[12345]`), or None."""
    match = _SOCKET_LINK.fullmatch(link)
    return int(match.group(1)) if match else None


def overlaps(a: str, b: str) -> bool:
    """Whether two bind addresses take the same port from each other: the same address, or either
    one a wildcard (0.0.0.0 or ::, which listen on every address). An address that does not read as
    one is taken as a wildcard: unknown, so assumed to clash."""
    try:
        first, second = _ip(a), _ip(b)
    except ValueError:
        return True
    return first.is_unspecified or second.is_unspecified or first == second


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    ip = ipaddress.ip_address(text or "0.0.0.0")  # Docker writes a port published on every address with no IP
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip
