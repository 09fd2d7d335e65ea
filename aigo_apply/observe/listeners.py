"""The host's listening TCP sockets as plain records, parsed from the kernel's answers: a sock_diag
dump over netlink (what `ss` reads: only the listening table, well under a millisecond) or, where
that is not offered, the text of /proc/net/tcp and /proc/net/tcp6 (which walk every connection's
hash bucket: 15 ms a file on a 23 GiB host, more with more memory). Pure: adapters/listeners.py asks
the kernel, and which process holds a socket. A port that a program outside Docker holds (Ollama,
llama-swap, Open WebUI, a hand-run `vllm serve`) is found from these at plan time, instead of by an
apply whose router cannot bind it."""

from __future__ import annotations

import ipaddress
import re
import struct
from collections.abc import Collection
from dataclasses import dataclass, replace

LISTEN = "0A"  # the kernel's TCP_LISTEN, as /proc/net/tcp writes a socket's state
TCP_LISTEN = 10
AF_INET, AF_INET6 = 2, 10
SOCK_DIAG_BY_FAMILY, NLMSG_ERROR, NLMSG_DONE = 20, 2, 3
_NLMSG = struct.Struct("=IHHII")  # struct nlmsghdr: length, type, flags, sequence, port id
_DIAG_MSG = struct.Struct("=BBBB2s2s16s16sIQIIIII")  # struct inet_diag_msg (72 bytes)
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


def diag_request(family: int, sequence: int = 1) -> bytes:
    """A netlink message asking the kernel for every TCP socket of `family` in the LISTEN state
    (NLM_F_REQUEST | NLM_F_DUMP; struct inet_diag_req_v2 with an empty socket id: no filter)."""
    request = struct.pack("=BBBBI", family, 6, 0, 0, 1 << TCP_LISTEN) + bytes(48)  # 6: IPPROTO_TCP
    return _NLMSG.pack(_NLMSG.size + len(request), SOCK_DIAG_BY_FAMILY, 0x301, sequence, 0) + request


def parse_sock_diag(data: bytes, ports: Collection[int] | None = None) -> tuple[list[Listener], bool]:
    """The listening sockets in one read of a sock_diag dump's answer (on `ports` when given), and
    whether it was the last (NLMSG_DONE). An error the kernel sends back raises OSError with its
    number; a message cut short ends the read."""
    found: list[Listener] = []
    offset = 0
    while offset + _NLMSG.size <= len(data):
        length, kind = _NLMSG.unpack_from(data, offset)[:2]
        if length < _NLMSG.size or offset + length > len(data):
            break
        body = data[offset + _NLMSG.size : offset + length]
        offset += (length + 3) & ~3  # NLMSG_ALIGN
        if kind == NLMSG_DONE:
            return found, True
        if kind == NLMSG_ERROR:
            code = -struct.unpack_from("=i", body)[0] if len(body) >= 4 else 0
            raise OSError(code, "the kernel refused the socket dump")
        if kind != SOCK_DIAG_BY_FAMILY or len(body) < _DIAG_MSG.size:
            continue
        family, state, _, _, sport, _, source, _, _, _, _, _, _, uid, inode = _DIAG_MSG.unpack_from(body)
        port = int.from_bytes(sport, "big")
        if state != TCP_LISTEN or family not in (AF_INET, AF_INET6) or (ports is not None and port not in ports):
            continue
        raw = source[:4] if family == AF_INET else source
        found.append(Listener(_shown(ipaddress.ip_address(raw)), port, inode, uid))
    return found, False


def _address(hex_text: str, byteorder: str) -> str | None:
    """An address of /proc/net/tcp (8 hex digits) or tcp6 (32), as ipaddress writes it."""
    if len(hex_text) not in (8, 32):
        return None
    raw = bytes.fromhex(hex_text)
    if byteorder == "little":  # each 32-bit word was written from the host's order
        raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return _shown(ipaddress.ip_address(raw))


def _shown(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
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
