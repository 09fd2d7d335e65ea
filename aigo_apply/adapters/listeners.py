"""Reads which TCP sockets listen on this host, and which process holds each: once a plan, the
kernel's sock_diag dump of the listening sockets (netlink, as `ss` asks; no privilege needed), or
/proc/net/tcp and /proc/net/tcp6 where the kernel offers no sock_diag (whatever holds the port: any
program, not only a container); then, only for the few sockets that clash with a port the file asks
for, the /proc/PID/fd links that name their inodes (readable as root, or for this user's own
processes) and /proc/PID/comm. The parsing is pure (observe/listeners.py); so is the judgment
(plan/port_checks.py)."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Collection

from aigo_apply.observe.listeners import (
    AF_INET,
    AF_INET6,
    Listener,
    diag_request,
    parse_proc_net,
    parse_sock_diag,
    socket_inode,
)

MAX_TABLE = 64 * 1024 * 1024  # /proc/net/tcp is ~150 bytes a socket: room for some 400,000 of them
NETLINK_SOCK_DIAG = 4
DIAG_TIMEOUT = 2.0  # seconds: the kernel answers at once; a stall falls back to /proc/net


def listening(ports: Collection[int]) -> tuple[Listener, ...] | None:
    """The sockets listening on `ports` in this host's network namespace (IPv4 and IPv6), or None
    when this host can tell none (not Linux)."""
    try:
        return diag_listening(ports)
    except (OSError, AttributeError):  # no sock_diag in this kernel, a sandbox refuses netlink, or no netlink
        return proc_listening(ports)


def diag_listening(ports: Collection[int]) -> tuple[Listener, ...]:
    """The listening sockets on `ports` from the kernel's sock_diag dump, IPv4 then IPv6 (where IPv6
    is off, an error of its dump only means that nothing listens on IPv6)."""
    wanted = frozenset(ports)
    found = list(_dump(AF_INET, wanted))
    try:
        found += _dump(AF_INET6, wanted)
    except OSError:
        pass  # IPv6 off: nothing listens on it
    return tuple(found)


def _dump(family: int, ports: frozenset[int]) -> list[Listener]:
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as link:
        link.settimeout(DIAG_TIMEOUT)
        link.sendto(diag_request(family), (0, 0))
        found: list[Listener] = []
        done = False
        while not done:
            more, done = parse_sock_diag(link.recv(65536), ports)
            found += more
        return found


def proc_listening(ports: Collection[int], proc: str = "/proc") -> tuple[Listener, ...] | None:
    """The sockets listening on `ports` from /proc/net/tcp and tcp6, or None when the host has no
    /proc/net/tcp to say (not Linux): nothing can be told then."""
    found: list[Listener] = []
    read_any = False
    for name in ("tcp", "tcp6"):
        try:
            with open(os.path.join(proc, "net", name), encoding="ascii", errors="replace") as f:
                text = f.read(MAX_TABLE)
        except OSError:  # tcp6 is missing where IPv6 is off
            continue
        read_any = True
        found += parse_proc_net(text, frozenset(ports), sys.byteorder)
    return tuple(found) if read_any else None


def with_owners(listeners: Collection[Listener], proc: str = "/proc") -> tuple[Listener, ...]:
    """`listeners` with the process holding each, where the host says (a process of another user is
    not readable unless this one is root: that socket's owner stays unknown). Reads every process's
    fd links, so only the few sockets that clash are looked up, never every plan's."""
    wanted = {listener.inode: listener for listener in listeners}
    owners: dict[int, tuple[int, str]] = {}
    try:
        pids = [int(name) for name in os.listdir(proc) if name.isdigit()]
    except OSError:
        pids = []
    for pid in sorted(pids):
        if len(owners) == len(wanted):
            break
        inodes = _socket_inodes(os.path.join(proc, str(pid), "fd")) & (wanted.keys() - owners.keys())
        if inodes:
            process = _comm(os.path.join(proc, str(pid), "comm"))
            owners.update(dict.fromkeys(inodes, (pid, process)))
    return tuple(
        listener.held_by(*owners[listener.inode]) if listener.inode in owners else listener for listener in listeners
    )


def _socket_inodes(fd_folder: str) -> set[int]:
    try:
        names = os.listdir(fd_folder)
    except OSError:  # another user's process, or one that ended meanwhile
        return set()
    inodes = set()
    for name in names:
        try:
            inode = socket_inode(os.readlink(os.path.join(fd_folder, name)))
        except OSError:
            continue
        if inode is not None:
            inodes.add(inode)
    return inodes


def _comm(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(64).strip()
    except OSError:
        return ""
