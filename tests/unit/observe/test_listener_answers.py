"""The host's listening sockets as the kernel tells them (observe/listeners.py): a sock_diag dump's
answer recorded from Linux 6.18 (x86-64), and /proc/net/tcp and tcp6 text recorded from a Linux 6.x
host (each address word little-endian), with the ports a user moving from another server meets:
IPv4 and IPv6, wildcard and loopback binds, an IPv4-mapped address, and the connections around them
that are no listeners."""

from __future__ import annotations

import pytest

from aigo_apply.observe.listeners import (
    AF_INET,
    Listener,
    diag_request,
    overlaps,
    parse_proc_net,
    parse_sock_diag,
    socket_inode,
)

TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 94389 1 00000000ee36edda 100 0 0 10 0
   1: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 240 1 00000000a976f730 100 0 0 10 0
   2: 0100007F:1F40 0100007F:C176 01 00000000:00000000 00:00000000 00000000  1000        0 94401 1 000000004e4fba5a 20 4 30 10 -1
   3: 0100007F:C176 0100007F:1F40 06 00000000:00000000 03:0000130A 00000000     0        0 0 3 000000004e4fba5a
   4: 0501A8C0:2B67 00000000:0000 0A 00000000:00000000 00:00000000 00000000   113        0 51234 1 00000000aa36edda 100 0 0 10 0
"""

TCP6 = """\
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:1F40 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 94387 1 000000005396fb89 100 0 0 10 0
   1: 0000000000000000FFFF00000100007F:1F41 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 94388 1 0000000032c13d4a 100 0 0 10 0
   2: 00000000000000000000000001000000:2C6A 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 94386 1 00000000be7537f0 100 0 0 10 0
   3: 00000000000000000000000001000000:2C6A 00000000000000000000000001000000:D1A2 01 00000000:00000000 00:00000000 00000000  1000        0 94390 1 00000000be7537f1 20 4 30 10 -1
"""


def test_ipv4_listeners_are_read_with_address_port_inode_and_user_and_connections_are_not():
    assert parse_proc_net(TCP) == [
        Listener("127.0.0.1", 8000, 94389, 1000),  # a hand-run `vllm serve --host 127.0.0.1`
        Listener("0.0.0.0", 8080, 240, 0),  # Open WebUI on every address
        Listener("192.168.1.5", 11111, 51234, 113),  # a LAN address
    ]  # the established connection to :8000 and the one in TIME_WAIT are no listeners


def test_ipv6_listeners_wildcard_loopback_and_an_ipv4_mapped_address():
    assert parse_proc_net(TCP6) == [
        Listener("::", 8000, 94387, 0),
        Listener("127.0.0.1", 8001, 94388, 1000),  # ::ffff:127.0.0.1 is the IPv4 loopback
        Listener("::1", 11370, 94386, 1000),  # Ollama on [::1]:11370
    ]


def test_only_the_ports_asked_for_are_kept():
    assert [(s.address, s.port) for s in parse_proc_net(TCP + TCP6, ports={8000})] == [
        ("127.0.0.1", 8000),
        ("::", 8000),
    ]
    assert parse_proc_net(TCP, ports=set()) == []


def test_a_big_endian_host_writes_each_address_word_in_its_own_order():
    big = TCP.replace("0100007F:1F40 00000000", "7F000001:1F40 00000000").replace("0501A8C0", "C0A80105")
    six = TCP6.replace("0000000000000000FFFF00000100007F", "00000000000000000000FFFF7F000001")
    six = six.replace("00000000000000000000000001000000:2C6A 0000", "00000000000000000000000000000001:2C6A 0000")
    assert [s.address for s in parse_proc_net(big, byteorder="big")] == ["127.0.0.1", "0.0.0.0", "192.168.1.5"]
    assert [s.address for s in parse_proc_net(six, byteorder="big")] == ["::", "127.0.0.1", "::1"]


@pytest.mark.parametrize(
    "line",
    [
        "",
        "garbage",
        "   0: 0100007F:1F40 00000000:0000 0A",  # cut short
        "   0: 0100007F:ZZZZ 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1 1",
        "   0: 0100007:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1 1",  # 7 hex digits
        "   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000 x 0 1 1",
        "   0: 0100007F1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1 1",
    ],
)
def test_a_line_that_is_no_entry_is_skipped_never_raised(line):
    assert parse_proc_net(line + "\n" + TCP)[0] == Listener("127.0.0.1", 8000, 94389, 1000)


def test_a_socket_link_names_its_inode_and_nothing_else_does():
    assert socket_inode("socket:[94389]") == 94389
    for other in ("pipe:[94389]", "/dev/null", "socket:[]", "socket:[12]x", "anon_inode:[eventpoll]", ""):
        assert socket_inode(other) is None


@pytest.mark.parametrize(
    ("a", "b", "clash"),
    [
        ("127.0.0.1", "127.0.0.1", True),
        ("0.0.0.0", "127.0.0.1", True),  # a wildcard takes the port on every address
        ("127.0.0.1", "0.0.0.0", True),
        ("::", "127.0.0.1", True),
        ("127.0.0.1", "::", True),
        ("::", "::1", True),
        ("::1", "::1", True),
        ("::ffff:127.0.0.1", "127.0.0.1", True),
        ("", "127.0.0.1", True),  # Docker's published port with no IP: every address
        ("127.0.0.1", "192.168.1.5", False),
        ("127.0.0.1", "127.0.0.2", False),
        ("::1", "127.0.0.1", False),
        ("192.168.1.5", "10.0.0.2", False),
        ("not-an-ip", "127.0.0.1", True),  # unknown: assumed to clash
    ],
)
def test_two_binds_clash_on_the_same_address_or_when_either_is_a_wildcard(a, b, clash):
    assert overlaps(a, b) is clash and overlaps(b, a) is clash


def test_a_listener_is_shown_as_a_url_writes_it():
    assert Listener("127.0.0.1", 8000, 1, 0).shown == "127.0.0.1:8000"
    assert Listener("::", 8000, 1, 0).shown == "[::]:8000"
    assert Listener("::1", 8000, 1, 0).held_by(42, "ollama") == Listener("::1", 8000, 1, 0, 42, "ollama")


# A sock_diag dump of the listening sockets, as recv() returned it, while 127.0.0.1:8000, 0.0.0.0:8080,
# [::]:8000 (IPv6 only), [::ffff:127.0.0.1]:8001 and [::1]:11434 listened (and a client was connected
# to 127.0.0.1:8000): each message is a struct inet_diag_msg and its attributes, the last read NLMSG_DONE.
DIAG_V4 = bytes.fromhex(
    "7c000000140002000100000009500000020a000007e8000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000010000000000000000000000000000008000000000000000f0000000050008000000000008000f0000000000"
    "0c001500010000000000000006001600520000007c000000140002000100000009500000020a00004a3400007f00000100000000"
    "00000000000000000000000000000000000000000000000000000000020000000000000000000000000000000010000000000000"
    "c9430300050008000000000008000f00000000000c001500d40d00000000000006001600520000007c0000001400020001000000"
    "09500000020a00001f90000000000000000000000000000000000000000000000000000000000000000000000000000003000000"
    "0000000000000000000000008000000000000000f0560300050008000000000008000f00000000000c0015000100000000000000"
    "06001600520000007c000000140002000100000009500000020a00001f4000007f00000100000000000000000000000000000000"
    "00000000000000000000000000000000040000000000000000000000010000008000000000000000ef5603000500080000000000"
    "08000f00000000000c00150001000000000000000600160052000000"
)
DIAG_V6 = bytes.fromhex(
    "840000001400020001000000095000000a0a00001f40000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000050000000000000000000000000000008000000000000000f1560300050008000000000005000b0001000000"
    "08000f00000000000c00150001000000000000000600160012000000840000001400020001000000095000000a0a00001f410000"
    "00000000000000000000ffff7f000001000000000000000000000000000000000000000006000000000000000000000000000000"
    "8000000000000000f2560300050008000000000005000b000000000008000f00000000000c001500010000000000000006001600"
    "12000000840000001400020001000000095000000a0a00002caa0000000000000000000000000000000000010000000000000000"
    "000000000000000000000000070000000000000000000000000000008000000000000000f3560300050008000000000005000b00"
    "0100000008000f00000000000c00150001000000000000000600160012000000"
)
DONE = bytes.fromhex("1400000003000200010000000950000000000000")


def test_a_sock_diag_dump_gives_every_listener_with_address_port_inode_and_user():
    found, done = parse_sock_diag(DIAG_V4)
    assert not done  # NLMSG_DONE comes in the next read
    assert found == [
        Listener("0.0.0.0", 2024, 240, 0),
        Listener("127.0.0.1", 18996, 213961, 0),
        Listener("0.0.0.0", 8080, 218864, 0),
        Listener("127.0.0.1", 8000, 218863, 0),  # listed once: the connection to it is no listener
    ]
    assert parse_sock_diag(DIAG_V6) == (
        [Listener("::", 8000, 218865, 0), Listener("127.0.0.1", 8001, 218866, 0), Listener("::1", 11434, 218867, 0)],
        False,
    )
    assert parse_sock_diag(DONE) == ([], True)
    assert parse_sock_diag(DIAG_V4 + DONE)[1] is True


def test_a_sock_diag_dump_keeps_only_the_ports_asked_for():
    assert [(s.address, s.port) for s in parse_sock_diag(DIAG_V4 + DIAG_V6, {8000})[0]] == [
        ("127.0.0.1", 8000),
        ("::", 8000),
    ]


def test_the_kernels_refusal_is_an_error_and_a_message_cut_short_ends_the_read():
    refused = bytes.fromhex("24000000020000000100000009500000") + (-2).to_bytes(4, "little", signed=True) + bytes(16)
    with pytest.raises(OSError) as error:
        parse_sock_diag(refused)
    assert error.value.errno == 2  # ENOENT: no TCP sock_diag in this kernel
    assert parse_sock_diag(DIAG_V4[:200]) == ([Listener("0.0.0.0", 2024, 240, 0)], False)
    assert parse_sock_diag(b"") == ([], False)
    assert parse_sock_diag(bytes(16)) == ([], False)  # a length below a header's own


def test_the_request_asks_for_tcp_listeners_of_one_family_as_a_dump():
    request = diag_request(AF_INET, sequence=7)
    assert len(request) == 16 + 56 and int.from_bytes(request[:4], "little") == len(request)
    assert request[4:8] == bytes.fromhex("14000103")  # SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP
    assert request[16:18] == bytes([2, 6])  # AF_INET, IPPROTO_TCP
    assert int.from_bytes(request[20:24], "little") == 1 << 10  # TCPF_LISTEN only
