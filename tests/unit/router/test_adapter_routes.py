"""LoRA adapters through the router: each adapter alias is routed to its base model's backend (the
engine serves it by that name), listed on /v1/models with the base as parent while the base's engine
is up, held with its base during a replace, never given a backend of its own, and every value checked
again before it is written."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from aigo_apply.desired.types import AdapterRoute, Route, RouterSettings
from aigo_apply.errors import RouterError
from aigo_apply.router.haproxy import adapters_from_models_json, render_files, routes_from_models_json
from aigo_apply.router.render_key import render_key

ROUTES = [Route("base", None, 4096), Route("other", 19001, 8192, "sglang")]
SETTINGS = RouterSettings(
    "lab", "127.0.0.1", 8000, False, adapters=(AdapterRoute("sql", "base"), AdapterRoute("a.b", "base"))
)


def test_an_adapter_alias_maps_to_its_base_s_backend():
    files = render_files(SETTINGS, ROUTES)
    base = ROUTES[0].backend
    assert files["models.map"].splitlines() == [
        f"base {base}",
        f"other {ROUTES[1].backend}",
        f"a.b {base}",
        f"sql {base}",
    ]
    cfg = files["haproxy.cfg"]
    assert cfg.count("\nbackend m_") == 2  # one backend per engine: none for an adapter
    assert "sql" not in cfg and "a.b" not in cfg


def test_v1_models_lists_an_adapter_with_its_parent_on_the_base_s_backend():
    files = render_files(SETTINGS, ROUTES)
    rows = re.findall(
        r'^    \{"(m_[A-Za-z0-9_]+)", "([^"]+)", "([^"]+)", (\d+), "([^"]*)"\},$', files["models.lua"], re.M
    )
    base = ROUTES[0].backend
    assert rows == [
        (base, "base", "vllm", "4096", ""),
        (ROUTES[1].backend, "other", "sglang", "8192", ""),
        (base, "a.b", "vllm", "4096", "base"),
        (base, "sql", "vllm", "4096", "base"),
    ]
    assert 'local ROUTES = "base other"\n' in files["models.lua"]  # the reload check names the models
    listed = json.loads(files["models.json"])["data"]
    assert [(m["id"], m["parent"]) for m in listed] == [
        ("base", None),
        ("other", None),
        ("a.b", "base"),
        ("sql", "base"),
    ]
    assert routes_from_models_json(files["models.json"]) == ["base", "other"]
    assert adapters_from_models_json(files["models.json"]) == {"a.b": "base", "sql": "base"}


def test_an_adapter_waits_with_its_base_while_the_base_is_replaced():
    held = render_files(SETTINGS, ROUTES, held=frozenset({"base"}))["held.map"]
    assert sorted(held.splitlines()) == sorted(f"{a} {ROUTES[0].backend}" for a in ("a.b", "base", "sql"))


def test_an_adapter_whose_base_is_not_routed_yet_is_left_out():
    files = render_files(SETTINGS, ROUTES[1:])
    assert "sql" not in files["models.map"] and "sql" not in files["models.lua"]


def test_adapters_are_part_of_the_render_key():
    assert render_key(SETTINGS, ROUTES) != render_key(replace(SETTINGS, adapters=()), ROUTES)


@pytest.mark.parametrize(
    ("adapters", "words"),
    [
        ((AdapterRoute("x\nuse_backend evil", "base"),), "the adapter alias"),
        ((AdapterRoute('x", "evil', "base"),), "the adapter alias"),
        ((AdapterRoute("ok", "base\n"),), "the base model of adapter 'ok'"),
        ((AdapterRoute("other", "base"),), "unique among the routed models and adapters"),
        ((AdapterRoute("sql", "base"), AdapterRoute("sql", "other")), "unique among the routed models and adapters"),
    ],
)
def test_every_adapter_value_is_checked_before_it_is_written(adapters, words):
    with pytest.raises(RouterError, match=re.escape(words)):
        render_files(replace(SETTINGS, adapters=adapters), ROUTES)


def test_the_merged_metrics_know_each_vllm_engines_adapters_by_alias():
    """metrics.lua writes aigo_adapter_requests_active under each adapter's own alias, from vLLM's
    vllm:lora_requests_info of the base's engine (a Docker test reads it from the real engine)."""
    files = render_files(SETTINGS, ROUTES)
    engines = re.findall(
        r'^    \{alias = "([^"]+)", engine = "([^"]+)".*adapters = \{([^}]*)\}', files["metrics.lua"], re.M
    )
    assert engines == [("base", "vllm", '"a.b", "sql"'), ("other", "sglang", "")]
    assert 'local LORA_INFO = "vllm:lora_requests_info"' in files["metrics.lua"]
    alone = render_files(replace(SETTINGS, adapters=(AdapterRoute("sql", "missing"),)), ROUTES)  # base not routed
    assert re.findall(r"adapters = \{([^}]*)\}", alone["metrics.lua"]) == ["", ""]
