"""Without Docker: the rendered router follows engine health by itself. HAProxy's
health checks decide; GET /v1/models is a Lua service (models.lua) that lists the routed models
whose server is up; every value rendered into the Lua file is checked again; and a reload is
verified by the routes the router names (the x-aigo-routes header), not by which engines are
healthy at that moment. The real HAProxy runs these files in tests/docker/test_routes_follow_health.py."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import aigo_apply.platforms.docker.router_deploy as deploy
import aigo_apply.router.haproxy as haproxy
from aigo_apply.desired.types import Route, RouterSettings
from aigo_apply.errors import AigoError, RouterError
from aigo_apply.router import render_key as key_module
from aigo_apply.router.haproxy import ROUTES_HEADER, render_files
from aigo_apply.router.haproxy_safety import check_lua_value
from aigo_apply.router.render_key import render_key

from helpers.fakes import FakeRuntime

SETTINGS = RouterSettings("lab", "127.0.0.1", 8000, False)
ROUTES = [Route("beta", 19001, 8192, "sglang"), Route("alpha", 19000, 4096, "vllm"), Route("q.x-1", 19002, 2048)]


def test_v1_models_is_the_lua_service_not_a_static_file():
    cfg = render_files(SETTINGS, ROUTES)["haproxy.cfg"]
    assert "lua-load /usr/local/etc/haproxy/aigo/live/models.lua\n" in cfg
    assert "http-request use-service lua.aigo_models if { path /v1/models } METH_GET\n" in cfg
    assert "models.json" not in cfg  # still written for plan and status, never served
    # the Lua service comes after the key check: /v1/models needs a key when keys are set
    keyed = render_files(replace(SETTINGS, api_keys=True), ROUTES)["haproxy.cfg"]
    assert keyed.index("if !authorized") < keyed.index("use-service lua.aigo_models")


def test_health_checks_decide_quickly_and_an_engine_returns_only_after_health_passes():
    cfg = render_files(SETTINGS, ROUTES)["haproxy.cfg"]
    assert "    default-server inter 500ms fastinter 100ms downinter 500ms fall 3 rise 1\n" in cfg
    assert "    timeout check 5s\n" in cfg  # a busy engine's slow /health still counts as an answer
    for route in ROUTES:
        block = cfg[cfg.index(f"backend {route.backend}\n") :]
        block = block[: block.index("\n\n") + 1] if "\n\n" in block else block
        assert "option httpchk GET /health\n" in block and "http-check expect status 200\n" in block
        assert f"server engine 127.0.0.1:{route.port} check observe layer4 error-limit 1 on-error mark-down\n" in block
        # no answer from the engine (a restarting container's port proxy) is the same OpenAI 503
        errorfile = f"/usr/local/etc/haproxy/aigo/live/errors/503-{route.backend}.http"
        assert f"errorfile 503 {errorfile}\n" in block and f"errorfile 502 {errorfile}\n" in block


def test_a_held_model_s_server_has_no_health_check_and_its_hold_waits_on_the_file_or_its_engine():
    """A reload stops the previous worker's checks (HAProxy stops them in a stopping process): a
    server that worker last saw down would stay down and fail every request it holds. So a held
    model's server is not checked, its hold waits for apply to remove the hold file (done once the
    engine serves) while apply renews its lease, then (apply killed) until its engine answers /health
    at the held route's address; /v1/models keeps listing it while its requests wait."""
    files = render_files(SETTINGS, ROUTES, held=frozenset({"alpha"}))
    cfg, lua = files["haproxy.cfg"], files["models.lua"]
    held, other = ROUTES[1], ROUTES[0]
    assert f"    server engine 127.0.0.1:{held.port}\n" in cfg
    assert f"server engine 127.0.0.1:{other.port} check observe layer4" in cfg
    assert f'    ["{held.backend}"] = true,\n' in lua and f'["{other.backend}"]' not in lua
    assert "local state = hold_state(path)\n" in lua
    assert 'if state == "free" or (state == "lapsed" and engine_serves(alias)) then\n' in lua
    assert f'    ["alpha"] = {{"127.0.0.1", {held.port}}},\n' in lua  # where a lapsed hold asks /health
    assert f'    ["{other.alias}"] = {{' not in lua
    assert f"alpha {held.backend}\n" == files["held.map"]
    unheld = render_files(SETTINGS, ROUTES)
    assert f"server engine 127.0.0.1:{held.port} check " in unheld["haproxy.cfg"]
    assert "local HELD = {\n}\n" in unheld["models.lua"]


def test_the_lua_service_knows_each_route_and_names_them_all():
    lua = render_files(SETTINGS, ROUTES)["models.lua"]
    rows = re.findall(r'^    \{"(m_[A-Za-z0-9_]+)", "([^"]+)", "([^"]+)", (\d+), ""\},$', lua, re.M)
    assert rows == [(r.backend, r.alias, r.owned_by, str(r.max_model_len)) for r in sorted(ROUTES)]
    assert 'local ROUTES = "alpha beta q.x-1"\n' in lua
    assert 'core.register_service("aigo_models", "http"' in lua
    assert 'applet:add_header("x-aigo-routes", ROUTES)' in lua and ROUTES_HEADER == "x-aigo-routes"
    # listed only while the latest check passed, or before the first check of a fresh worker
    assert 'status == "UP" or' in lua and 'stats["check_status"] == "INI"' in lua
    # the card: the fields the static file had, as JSON
    card = re.search(r"'(\{\"id\".*)'\n\s+\.\. '(.*)',", lua)
    assert card is not None
    text = (card.group(1) + card.group(2)).replace('"parent": %s', '"parent": null')
    text = text.replace("%s", "x").replace("%d", "1")
    assert json.loads(text) == {
        "id": "x",
        "object": "model",
        "created": 0,
        "owned_by": "x",
        "root": "x",
        "parent": None,
        "max_model_len": 1,
    }


def test_no_routes_is_a_valid_empty_service():
    lua = render_files(SETTINGS, [])["models.lua"]
    assert "local MODELS = {\n}\n" in lua and 'local ROUTES = ""\n' in lua


def test_the_files_are_byte_identical_for_the_same_input_and_the_check_copy_names_its_own_lua():
    assert render_files(SETTINGS, ROUTES) == render_files(SETTINGS, list(reversed(ROUTES)))
    check = render_files(SETTINGS, ROUTES, conf="/usr/local/etc/haproxy/aigo/gen-7")
    assert "lua-load /usr/local/etc/haproxy/aigo/gen-7/models.lua\n" in check["haproxy.cfg"]
    assert check["models.lua"] == render_files(SETTINGS, ROUTES)["models.lua"]


@pytest.mark.parametrize(
    "value",
    [
        'a"b',
        "a]]b",
        "a\nb",
        "a--b\n",
        "-- comment",
        "..",
        "a b",
        "a\\b",
        "",
        "x" * 129,
        "é",
        True,
        -1,
        2**31,
        1.5,
        None,
        b"alpha",
    ],
)
def test_values_that_could_leave_a_lua_literal_are_refused(value):
    with pytest.raises(RouterError, match="refusing to write .* into the HAProxy files"):
        check_lua_value("model alias", value)


def test_plain_values_pass_unchanged():
    for value in ("alpha", "Qwen3-0.6B", "m_alpha_8ed3f6", "q.x-1", 0, 4096, 2**31 - 1):
        assert check_lua_value("value", value) == value


def test_the_lua_file_rechecks_its_values_even_when_the_route_check_is_bypassed(monkeypatch):
    monkeypatch.setattr(haproxy, "check_routes", lambda routes: None)
    for bad in (
        Route('a"); os.exit(1) --', 19000, 4096),
        Route("alpha", 19000, 4096, "vllm]]"),
        Route("alpha", 19000, -5),
    ):
        with pytest.raises(RouterError, match="refusing to write"):
            haproxy._render_lua(SETTINGS, [bad])


def test_a_change_to_the_lua_template_changes_the_render_key(tmp_path, monkeypatch):
    before = render_key(SETTINGS, ROUTES)
    templates = tmp_path / "templates"
    templates.mkdir()
    source = haproxy.data_dir("templates")
    for other in source.glob("*.j2"):  # the router's other templates (swap.lua.j2) as they are
        (templates / other.name).write_bytes(other.read_bytes())
    (templates / haproxy.LUA_TEMPLATE).write_bytes((source / haproxy.LUA_TEMPLATE).read_bytes() + b"-- changed\n")
    monkeypatch.setattr(key_module, "data_dir", lambda name: templates)
    key_module.code_digest.cache_clear()
    try:
        assert render_key(SETTINGS, ROUTES) != before
    finally:
        key_module.code_digest.cache_clear()


class _Router(BaseHTTPRequestHandler):
    """Answers /v1/models as a router would: `routes` in the header (None: no header, as the old
    static file), `listed` in the body."""

    routes: str | None = None
    listed: list[str] = []

    def log_message(self, *a) -> None:
        pass

    def do_GET(self) -> None:
        body = json.dumps({"object": "list", "data": [{"id": m} for m in self.listed]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if self.routes is not None:
            self.send_header(ROUTES_HEADER, self.routes)
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def fake_router():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Router)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def _router(tmp_path, port):
    return deploy.Router(FakeRuntime(), tmp_path, replace(SETTINGS, port=port), "aigo-lab-router", "haproxy:lts")


def test_a_reload_is_verified_by_the_routes_the_router_names_not_by_engine_health(tmp_path, fake_router):
    router = _router(tmp_path, fake_router.server_address[1])
    _Router.routes, _Router.listed = "alpha beta", ["alpha"]  # beta's engine is down right now
    router._verify(["alpha", "beta"])  # the new generation serves: that is all a reload checks


@pytest.mark.parametrize(
    ("routes", "listed"),
    [
        (None, ["alpha", "beta"]),  # the old generation (a static file, no header) still answers
        ("alpha", ["alpha"]),  # another route set
    ],
)
def test_a_reload_that_did_not_take_is_not_verified(tmp_path, fake_router, monkeypatch, routes, listed):
    monkeypatch.setattr(deploy, "VERIFY_TIMEOUT", 0.3)
    router = _router(tmp_path, fake_router.server_address[1])
    _Router.routes, _Router.listed = routes, listed
    with pytest.raises(AigoError, match="expected models"):
        router._verify(["alpha", "beta"])
