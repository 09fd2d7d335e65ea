"""The router's door against vLLM 0.34.0's own routes (tests/fixtures/vllm-v0.34.0-routes.jsonl:
scripts/vllm_routes.py's output from the real package, held to it by tests/contract/test_allowlist.py).
0.34.0 registers `/checkpoint/prepare`, `/checkpoint/restore` (POST) and `/checkpoint/status` (GET)
whenever sleep mode is on, as it is for every on-demand model, outside development mode and outside
`--api-key`: they drain the engine and release its memory. The rendered frontend forwards none of them,
and every path it does forward is one that 0.34.0 serves for POST."""

from __future__ import annotations

import json

from aigo_apply.desired.types import Route, RouterSettings
from aigo_apply.router import haproxy_allowlist as allowlist
from aigo_apply.router.haproxy import render_files

from helpers.paths import FIXTURES

ROUTES_034 = {
    (r["method"], r["path"]) for r in map(json.loads, (FIXTURES / "vllm-v0.34.0-routes.jsonl").read_text().splitlines())
}
CHECKPOINT = {("POST", "/checkpoint/prepare"), ("POST", "/checkpoint/restore"), ("GET", "/checkpoint/status")}
SETTINGS = RouterSettings("lab", "127.0.0.1", 8000, False, max_body_mb=16)
ROUTES = [Route("alpha", None, 4096), Route("beta", 20001, 8192, "sglang")]


def forwarded() -> list[str]:
    """The paths the rendered frontend's allowlist names (`acl api_... path -m str ...`)."""
    cfg = render_files(SETTINGS, ROUTES)["haproxy.cfg"]
    lines = [line.strip() for line in cfg.splitlines()]
    return [p for line in lines if line.startswith("acl api_") for p in line.split(" -m str ")[1].split()]


def test_the_fixture_is_the_whole_app_of_0_34_with_its_checkpoint_routes():
    assert len(ROUTES_034) > 40  # a partial import would list far fewer
    assert CHECKPOINT <= ROUTES_034


def test_no_checkpoint_route_is_forwarded_or_named_by_any_rule():
    paths = forwarded()
    assert sorted(paths) == allowlist.routed_paths()
    assert not [p for p in paths if p.startswith("/checkpoint")]
    files = render_files(SETTINGS, ROUTES)
    assert not [name for name, text in files.items() if "checkpoint" in text]  # no exception names them either


def test_every_forwarded_path_is_one_0_34_serves_for_post():
    posts = {path for method, path in ROUTES_034 if method == "POST"}
    assert not [p for p in forwarded() if p not in posts]


def test_the_paths_the_router_answers_itself_exist_in_0_34():
    paths = {path for _, path in ROUTES_034}
    assert {"/v1/models", "/health", "/metrics"} <= paths  # answered by the router, never forwarded
