"""The host's listening sockets and their processes (adapters/listeners.py): against this machine's
kernel (its sock_diag dump and its /proc/net, which must agree) with real sockets this test opens,
and against a /proc folder laid out like the kernel's (the net tables, a process's fd links and comm)
for what a test cannot arrange on a live host: a process whose fd folder this user may not read, a
host without /proc/net."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

from aigo_apply.adapters.listeners import diag_listening, listening, proc_listening, with_owners
from aigo_apply.desired.build import build_desired
from aigo_apply.observe.config_file import load_config
from aigo_apply.observe.listeners import Listener
from aigo_apply.platforms.docker.planning import host_port_checks

from helpers.configs import host_context, write_config
from helpers.fakes import FakeRuntime

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/net is Linux's")


def _listen(address: str) -> socket.socket:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    s = socket.socket(family)
    if family == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((address, 0))
    s.listen()
    return s


def _comm() -> str:
    return Path(f"/proc/{os.getpid()}/comm").read_text().strip()


def test_a_real_listener_is_found_with_this_process_as_its_owner():
    with _listen("127.0.0.1") as held:
        port = held.getsockname()[1]
        found = listening({port})
        assert found is not None
        (socket_,) = [s for s in found if s.port == port]
        assert (socket_.address, socket_.pid) == ("127.0.0.1", None)  # owners are looked up only when asked
        (owned,) = with_owners([socket_])
        assert (owned.pid, owned.process) == (os.getpid(), _comm())
    assert not [s for s in listening({port}) or () if s.port == port]  # closed: nothing listens


def test_ipv6_listeners_are_read_too_and_a_connection_is_no_listener():
    if not socket.has_ipv6 or not Path("/proc/net/tcp6").exists():
        pytest.skip("no IPv6 on this host")
    with _listen("::1") as held, socket.create_connection(("::1", held.getsockname()[1])):
        port = held.getsockname()[1]
        assert [(s.address, s.port) for s in listening({port}) or ()] == [("::1", port)]


def test_the_kernels_dump_and_proc_net_tell_the_same_listeners():
    """sock_diag (what a plan asks: the listening table alone) and /proc/net (where a kernel offers
    no sock_diag): every address kind, each socket with the same inode and user."""
    addresses = ["127.0.0.1", "0.0.0.0"] + (["::1", "::"] if socket.has_ipv6 else [])
    held = [_listen(a) for a in addresses]
    try:
        ports = {s.getsockname()[1] for s in held}
        by_diag = sorted(diag_listening(ports), key=lambda s: s.port)
        assert sorted((s.address, s.port) for s in by_diag) == sorted(
            (a, s.getsockname()[1]) for a, s in zip(addresses, held, strict=True)
        )
        assert by_diag == sorted(proc_listening(ports) or (), key=lambda s: s.port)
    finally:
        for s in held:
            s.close()


def _fake_proc(root: Path, tcp: str, processes: dict[int, tuple[str, list[str]]]) -> Path:
    (root / "net").mkdir(parents=True)
    (root / "net" / "tcp").write_text(tcp)
    for pid, (comm, links) in processes.items():
        (root / str(pid) / "fd").mkdir(parents=True)
        (root / str(pid) / "comm").write_text(comm + "\n")
        for n, target in enumerate(links):
            os.symlink(target, root / str(pid) / "fd" / str(n))
    return root


HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
ROW = "   0: {addr}:{port:04X} 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 {inode} 1 0 100\n"


def test_owners_come_from_the_fd_links_that_name_each_sockets_inode(tmp_path):
    tcp = HEADER + ROW.format(addr="0100007F", port=8000, inode=501) + ROW.format(addr="00000000", port=8080, inode=502)
    proc = _fake_proc(
        tmp_path,
        tcp,
        {
            10: ("bash", ["/dev/pts/0", "pipe:[77]"]),
            1234: ("ollama", ["/dev/null", "socket:[900]", "socket:[501]"]),
            4321: ("open-webui", ["socket:[502]", "anon_inode:[eventpoll]"]),
        },
    )
    (proc / "self").mkdir()  # not a process: skipped
    found = proc_listening({8000, 8080}, str(proc))
    assert found == (Listener("127.0.0.1", 8000, 501, 1000), Listener("0.0.0.0", 8080, 502, 1000))
    assert with_owners(found, str(proc)) == (
        Listener("127.0.0.1", 8000, 501, 1000, 1234, "ollama"),
        Listener("0.0.0.0", 8080, 502, 1000, 4321, "open-webui"),
    )


def test_a_process_whose_fd_folder_cannot_be_read_leaves_its_socket_without_owner(tmp_path):
    proc = _fake_proc(tmp_path, HEADER + ROW.format(addr="0100007F", port=8000, inode=501), {1: ("init", [])})
    (proc / "77").mkdir()  # another user's process: its fd folder is not there to read
    (proc / "77" / "comm").write_text("ollama\n")
    (found,) = proc_listening({8000}, str(proc)) or ()
    assert with_owners([found], str(proc)) == (found,)


def test_a_host_without_proc_net_says_nothing_rather_than_no_listener(tmp_path):
    assert proc_listening({8000}, str(tmp_path)) is None
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tcp").write_text(HEADER)  # IPv6 off: tcp6 missing, tcp read
    assert proc_listening({8000}, str(tmp_path)) == ()


def test_plan_facts_name_a_real_program_on_the_routers_port(tmp_path):
    """What `plan` and `readiness` gather (platforms/docker/planning.host_port_checks): /proc/net of this host,
    Docker's containers (none here), and the process that holds the port: this test's own."""
    with _listen("127.0.0.1") as held:
        port = held.getsockname()[1]
        text = f"version: 1\nproject: lab\nrouter: {{port: {port}}}\nmodels: {{}}\n"
        d = build_desired(load_config(str(write_config(tmp_path, text))), host_context(tmp_path / "store"))
        (check,) = host_port_checks(d, FakeRuntime())
        assert check.id == "host.port" and check.status == "blocking"
        assert check.message == (
            f"router.port {port}: 127.0.0.1:{port} is already in use by {_comm()} (pid {os.getpid()})"
        )
    assert host_port_checks(d, FakeRuntime()) == []
