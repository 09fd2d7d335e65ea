"""The router's allowlist (aigo_apply/router/haproxy_allowlist.py) against the routes the real vLLM
0.31.0 serves (scripts/vllm_routes.py, run in .venv-vllm): every path the router forwards is one vLLM
serves for POST, every path the docs name as not routed exists, and each of vLLM's development and
control routes is one the router does not forward. vLLM 0.34.0's routes are kept as a file
(tests/fixtures/vllm-v0.34.0-routes.jsonl, which tests/unit/router/test_router_vllm034_routes.py holds the
router to); here it must equal what 0.34.0 itself serves."""

from __future__ import annotations

import json

import pytest

from aigo_apply.router import haproxy_allowlist as allowlist

from helpers.paths import FIXTURES


@pytest.fixture(scope="module")
def routes(run_in_vllm) -> set[tuple[str, str]]:
    lines = run_in_vllm("vllm_routes.py").splitlines()
    found = {(r["method"], r["path"]) for r in map(json.loads, lines)}
    assert len(found) > 40, found  # the whole app: a partial import would list far fewer
    return found


def test_every_routed_path_is_one_vllm_serves_for_post(routes):
    posts = {path for method, path in routes if method == "POST"}
    missing = [p for p in allowlist.routed_paths() if p not in posts]
    assert not missing, missing


def test_every_path_named_as_not_routed_exists_and_the_router_answers_its_own(routes):
    paths = {path for _, path in routes}
    assert not [p for p in allowlist.NOT_ROUTED if p not in paths]
    assert {"/v1/models", "/health", "/metrics"} <= paths  # answered by the router itself, never forwarded


def test_vllms_development_and_control_routes_are_not_routed(routes):
    """What VLLM_SERVER_DEV_MODE=1 registers, elastic EP and the profiler: none is in the allowlist."""
    control = {path for _, path in routes} - set(allowlist.routed_paths()) - set(allowlist.OWN_PATHS)
    assert {"/sleep", "/wake_up", "/is_sleeping", "/collective_rpc", "/server_info", "/reset_prefix_cache"} <= control
    assert {"/scale_elastic_ep", "/pause", "/update_weights"} <= control


def test_the_034_routes_file_is_what_vllm_034_serves(run_in_vllm034):
    """Rewrite it with `.venv-vllm-0.34.0/bin/python scripts/vllm_routes.py --write` and review the diff."""
    assert run_in_vllm034("vllm_routes.py") == (FIXTURES / "vllm-v0.34.0-routes.jsonl").read_text()
