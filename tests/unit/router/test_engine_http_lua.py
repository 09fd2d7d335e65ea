"""Without Docker: engine_http.lua, the one HTTP exchange the router's Lua has with an engine (the
merged /metrics, swap groups), run by real Lua (lupa) against an in-memory HAProxy socket that answers
as scripted and a clock that moves with each read. A scrape's deadline holds however slowly an
engine trickles its answer, and an answer cut short (HAProxy's socket reports a timeout as the end of
the answer) is never taken for a whole one."""

from __future__ import annotations

import importlib
import importlib.util

import pytest

from aigo_apply.desired.types import Route, RouterSettings
from aigo_apply.router import haproxy_metrics
from aigo_apply.router.haproxy import render_files

pytest.importorskip("lupa")
RUNTIMES = [name for name in ("lua53", "lua54") if importlib.util.find_spec(f"lupa.{name}") is not None]

# A fake `core`: core.now() is a clock in ms that each receive moves by `step_ms`; core.tcp() a socket
# whose receive(n) hands out the scripted pieces, then reports the end as HAProxy does (nil and
# "connection closed."), and records each timeout it was given.
FAKE_CORE = b"""
local clock, pieces, step, timeouts, reads = 0, {}, 0, {}, 0
core = {}
function core.now() return {sec = clock // 1000, usec = (clock % 1000) * 1000} end
function core.tcp()
    local s = {}
    function s:settimeout(t) timeouts[#timeouts + 1] = t end
    function s:connect() return 1 end
    function s:send() return 1 end
    function s:close() end
    function s:receive(n)
        reads = reads + 1
        clock = clock + step
        if #pieces == 0 then return nil, "connection closed." end
        return table.remove(pieces, 1)
    end
    return s
end
function script(list, step_ms)
    pieces, step, timeouts, reads, clock = {}, step_ms, {}, 0, 0
    for _, p in ipairs(list) do pieces[#pieces + 1] = p end
end
function stats() return reads, #timeouts, timeouts[#timeouts] end
"""

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"


@pytest.fixture(params=RUNTIMES or [pytest.param(None, marks=pytest.mark.skip("lupa has no Lua runtime"))])
def lua(request):
    files = render_files(RouterSettings("lab", "127.0.0.1", 8000, False), [Route("m", None, 4096)])
    runtime = importlib.import_module(f"lupa.{request.param}").LuaRuntime(encoding=None)
    runtime.execute(FAKE_CORE)
    runtime.execute(files[haproxy_metrics.HTTP_FILE].encode())
    return runtime


def fetch(lua, pieces: list[bytes], step_ms: int = 1, deadline: int | None = None) -> tuple:
    lua.globals().script(lua.table_from(pieces), step_ms)
    got = lua.globals().aigo_engine_http(b"unix@/x.sock", None, b"GET", b"/metrics", 2, 4 * 1024 * 1024, deadline)
    return (*(got if isinstance(got, tuple) else (got,)), *lua.globals().stats())


def test_an_answer_cut_short_is_no_answer(lua):
    """A read that times out ends like a closed connection: the body is shorter than its length."""
    status, body, *_ = fetch(lua, [HEAD + b"Content-Length: 8\r\n\r\n", b"a 1\n", b"b 2\n"])
    assert (status, body) == (200, b"a 1\nb 2\n")
    status, body, *_ = fetch(lua, [HEAD + b"Transfer-Encoding: chunked\r\n\r\n4\r\na 1\n\r\n0\r\n\r\n"])
    assert (status, body) == (200, b"a 1\n")
    status, why, *_ = fetch(lua, [HEAD + b"Content-Length: 20\r\n\r\n", b"a 1\nb 12"])
    assert (status, why) == (0, b"an answer cut short")
    status, why, *_ = fetch(lua, [HEAD + b"Transfer-Encoding: chunked\r\n\r\n8\r\na 1\nb 12"])
    assert status == 0


def test_a_trickling_engine_is_left_at_the_deadline(lua):
    """One piece every 500 ms, forever: the exchange ends at the deadline (1 s here), its reads are
    given no more time than is left, and nothing it sent counts."""
    trickle = [HEAD + b"Content-Length: 100000\r\n\r\n"] + [b"x"] * 1000
    status, why, reads, _, last = fetch(lua, trickle, step_ms=500, deadline=1000)
    assert (status, why) == (0, b"no whole answer by the deadline")
    assert reads == 2
    assert last == pytest.approx(0.5)  # the time left before the last read, not the full 2 s
    # swap.lua's calls give no deadline: their timeout stays per read, as before
    status, body, _head, _reads, settimeouts, last = fetch(lua, [HEAD + b"Content-Length: 4\r\n\r\n", b"a 1\n"], 500)
    assert (status, body, settimeouts, last) == (200, b"a 1\n", 1, 2)
