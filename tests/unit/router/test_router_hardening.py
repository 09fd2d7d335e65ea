"""The router's values are checked again where they become words
of HAProxy's files, the schema allows only what HAProxy takes, and API keys are checked, digested
(never stored) and a changed key is a planned reload."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from aigo_apply.config.schema import schema
from aigo_apply.desired.types import Route, RouterSettings
from aigo_apply.errors import AigoError, ConfigInvalid, RouterError
from aigo_apply.observe.config_file import load_config
from aigo_apply.plan.planner import build_plan
from aigo_apply.platforms.docker.live_router import live_routes
from aigo_apply.platforms.docker.router_deploy import Router, check_output, local_host
from aigo_apply.platforms.router_keys import exposure_checks, read_keys, router_checks
from aigo_apply.router import haproxy_safety as safety
from aigo_apply.router.haproxy import KEYS_DIGEST_FILE, keys_file, render_files

from helpers.configs import write_config
from helpers.fakes import FakeRuntime
from helpers.planner_inputs import CONFIG, desired, observed

SETTINGS = RouterSettings("lab", "127.0.0.1", 8000, False)
ROUTE = Route("alpha", 19000, 4096, "vllm")
KEYED = CONFIG + "router: {api_keys: {from_env: AIGO_UNIT_KEYS}}\n"


@pytest.mark.parametrize(
    "change",
    [
        {"bind": "127.0.0.1:80\n    bind 0.0.0.0"},
        {"bind": "0.0.0.0 ssl"},
        {"bind": "localhost"},
        {"port": "8000\n    bind :9"},
        {"port": True},
        {"port": 0},
        {"port": 70000},
        {"max_body_mb": 256},  # the old schema maximum: HAProxy refuses a 256 MiB buffer
        {"max_body_mb": 16.0},
        {"timeout_s": "600s\n    timeout connect 0"},
        {"timeout_s": 86401},
        {"project": "lab\nglobal"},
        {"api_keys": "yes"},
        {"api_keys": True, "keys_digest": "x\n    acl"},
    ],
)
def test_unsafe_settings_never_reach_the_haproxy_files(change):
    with pytest.raises(RouterError, match="refusing to write .* into the HAProxy files"):
        render_files(replace(SETTINGS, **change), [ROUTE])


@pytest.mark.parametrize(
    "route",
    [
        Route("a b", 19000, 4096),
        Route("a\nbackend evil", 19000, 4096),
        Route("#comment", 19000, 4096),
        Route("x" * 65, 19000, 4096),
        Route("alpha", "19000\n", 4096),  # type: ignore[arg-type]
        Route("alpha", 19000, 0),
        Route("alpha", 19000, 4096, "vllm\nbackend x"),
    ],
)
def test_unsafe_routes_never_reach_the_map_or_config(route):
    with pytest.raises(RouterError, match="refusing to write"):
        render_files(SETTINGS, [route])


def test_duplicate_aliases_and_odd_folders_are_refused():
    with pytest.raises(RouterError, match="unique"):
        render_files(SETTINGS, [ROUTE, replace(ROUTE, port=19001)])
    for conf in ("/x y", "relative", "/a/../etc", "/a\n"):
        with pytest.raises(RouterError, match="config folder"):
            render_files(SETTINGS, [ROUTE], conf=conf)


def test_safe_values_render_and_ipv6_binds_work():
    files = render_files(replace(SETTINGS, bind="::", max_body_mb=safety.MAX_BODY_MB, timeout_s=86400), [ROUTE])
    assert f"tune.bufsize {129 * 1024 * 1024}" in files["haproxy.cfg"] and "bind :::8000" in files["haproxy.cfg"]
    assert files["models.map"] == f"alpha {ROUTE.backend}\n"
    assert local_host("::") == "[::1]" and local_host("::1") == "[::1]" and local_host("0.0.0.0") == "127.0.0.1"


def test_the_schema_allows_only_what_haproxy_takes(tmp_path):
    router = schema()["properties"]["router"]["properties"]
    assert router["max_body_mb"]["maximum"] == safety.MAX_BODY_MB
    assert router["max_body_mb"]["maximum"] * 1024 * 1024 < 256 * 1024 * 1024  # HAProxy: "must be below 256 MB"
    assert router["timeout"]["maximum"] * 1000 < 2**31  # HAProxy's timeouts are signed 32-bit milliseconds
    assert router["port"] == {"$ref": "#/$defs/port"}
    load_config(str(write_config(tmp_path, "version: 1\nproject: lab\nrouter: {max_body_mb: 128}\nmodels: {}\n")))
    for bad, message in (("max_body_mb: 129", "router.max_body_mb"), ("bind: 224.0.0.1", "multicast")):
        text = f"version: 1\nproject: lab\nrouter: {{{bad}}}\nmodels: {{}}\n"
        with pytest.raises(ConfigInvalid) as caught:
            load_config(str(write_config(tmp_path, text)))
        assert message in "\n".join(caught.value.lines())


@pytest.mark.parametrize(
    "key, why",
    [
        ("sk-a\x00b", "NUL"),
        ("sk-é", "non-ASCII"),
        ("sk\u00a0one", "non-ASCII"),
        ("sk one", "space"),
        ("sk\tone", "space"),
        ("sk\x1bone", "control"),
        ("sk\x7fone", "control"),
        ("k" * 1025, "longer than 1024"),
    ],
)
def test_keys_that_haproxy_would_cut_or_split_are_refused_without_showing_them(key, why):
    with pytest.raises(RouterError) as caught:
        keys_file(["sk-good", key])
    assert why in str(caught.value) and "key 2 of 2" in str(caught.value)
    assert key not in str(caught.value)


def test_keys_are_parsed_trimmed_and_digested_never_stored():
    assert safety.parse_keys(" sk-one, sk-two\r\n\nsk-three\t,") == ["sk-one", "sk-two", "sk-three"]
    assert safety.parse_keys("sk\u00a0one") == ["sk\u00a0one"]  # judged (and refused), not silently cut
    assert keys_file(["sk-one"]) == "Bearer sk-one\n"
    with pytest.raises(RouterError, match="holds no key"):
        keys_file([])
    one = safety.keys_digest("lab", ["sk-one", "sk-two"])
    assert one == safety.keys_digest("lab", ["sk-two", "sk-one", "sk-one"])
    assert one != safety.keys_digest("lab", ["sk-one"]) and one != safety.keys_digest("other", ["sk-one", "sk-two"])
    files = render_files(replace(SETTINGS, api_keys=True, keys_digest=one), [ROUTE])
    assert files[KEYS_DIGEST_FILE] == f"pbkdf2-sha256 {one}\n" and "sk-one" not in json.dumps(files)


def keyed(tmp_path, monkeypatch, keys):
    monkeypatch.setenv("AIGO_UNIT_KEYS", keys)
    return router_checks(desired(tmp_path, KEYED), port_start=1024)


def test_a_changed_key_is_a_planned_reload_and_the_same_keys_are_no_change(tmp_path, monkeypatch):
    old, checks = keyed(tmp_path, monkeypatch, "sk-old-0123456789abcdef")
    assert checks == [] and len(old.router.settings.keys_digest) == 64
    deployed = observed(old)
    same, _ = keyed(tmp_path, monkeypatch, "sk-old-0123456789abcdef")
    assert {a.kind for a in build_plan(same, deployed).actions} == {"noop"}
    new, _ = keyed(tmp_path, monkeypatch, "sk-new-0123456789abcdef")
    plan = build_plan(new, deployed)
    router = next(a for a in plan.actions if a.address == "router")
    assert router.kind == "reload_router"
    assert any("router.api_keys: the keys changed" in r for r in router.reasons)
    assert "sk-old-0123456789abcdef" not in json.dumps(plan.to_dict()) and "sk-new-0123456789abcdef" not in json.dumps(
        plan.to_dict()
    )


@pytest.mark.parametrize("value, why", [("sk-one, sk-é", "non-ASCII"), ("sk one", "space"), (" , ", "no key")])
def test_unusable_keys_block_the_plan_before_anything_changes(tmp_path, monkeypatch, value, why):
    d, checks = keyed(tmp_path, monkeypatch, value)
    assert [c.status for c in checks] == ["blocking"] and why in checks[0].message
    assert "sk-" not in checks[0].message
    plan = build_plan(d, observed(desired(tmp_path)), facts=_facts(checks))
    assert [b.id for b in plan.blockers] == ["router.api_keys"]


def test_an_unset_key_variable_blocks_the_plan_once(tmp_path, monkeypatch):
    from aigo_apply.platforms.docker.secret_checks import reference_checks

    monkeypatch.delenv("AIGO_UNIT_KEYS", raising=False)
    d = desired(tmp_path, KEYED)
    unchanged, checks = router_checks(d, port_start=1024)
    assert checks == [] and unchanged.router.settings.keys_digest == ""  # the reference check says it
    found = reference_checks(d)
    assert [c.status for c in found] == ["blocking"] and "AIGO_UNIT_KEYS" in found[0].message


def _facts(checks):
    from aigo_apply.plan.facts import PlanFacts

    return PlanFacts(tuple(checks))


def test_an_open_bind_without_keys_is_a_plan_warning():
    spec = {"bind": "0.0.0.0", "port": 8000, "api_keys": None, "user": "1000:1000"}
    for bind in ("0.0.0.0", "::", "192.168.1.5"):
        found = exposure_checks({**spec, "bind": bind}, 1024)
        assert [(c.id, c.status) for c in found] == [("router.open", "warning")]
    assert exposure_checks({**spec, "bind": "127.0.0.1"}, 1024) == []
    assert exposure_checks({**spec, "api_keys": {"from_env": "K"}}, 1024) == []
    low = exposure_checks({**spec, "bind": "127.0.0.1", "port": 80}, 1024)
    assert [(c.id, c.status) for c in low] == [("router.port", "blocking")]
    assert exposure_checks({**spec, "bind": "127.0.0.1", "port": 80, "user": "0:0"}, 1024) == []


def test_read_keys_names_the_reference_never_the_key(tmp_path):
    secret = tmp_path / "keys"
    secret.write_text("sk-secret\x00tail\n")  # an environment variable cannot hold a NUL; a file can
    with pytest.raises(AigoError) as caught:
        read_keys({"api_keys": {"from_file": str(secret)}})
    assert "sk-secret" not in str(caught.value)
    assert read_keys({"api_keys": None}) is None


def test_a_failed_check_shows_haproxys_own_words(tmp_path):
    output = (
        "[NOTICE]   (1) : haproxy version is 2.6.12\n"
        "[ALERT]    (1) : config : global.tune.bufsize must be below 256 MB when HTTP is in use\n"
        "[ALERT]    (1) : config : Fatal errors found in configuration.\n"
    )
    assert check_output(output)[0].endswith("must be below 256 MB when HTTP is in use")
    assert check_output("") == ["(haproxy printed nothing)"]
    runtime = FakeRuntime()
    seen = []
    runtime.run_once = lambda image, command, entrypoint, binds, user=None: (seen.append(command), (1, output))[1]
    router = Router(runtime, tmp_path / "router", SETTINGS, "aigo-lab-router", "haproxy:3.2")
    with pytest.raises(RouterError) as caught:
        router.prepare_first([ROUTE])
    assert "-q" not in seen[0] and "must be below 256 MB" in str(caught.value)


def test_keys_are_checked_before_any_file_of_a_generation_is_written(tmp_path):
    settings = replace(SETTINGS, api_keys=True, keys_digest="0" * 64)
    router = Router(FakeRuntime(), tmp_path / "router", settings, "aigo-lab-router", "img", keys=["sk bad"])
    with pytest.raises(RouterError, match="space"):
        router.prepare_first([ROUTE], check=False)
    assert list((tmp_path / "router").glob("gen-*")) == []


def test_a_hostile_route_table_in_the_state_folder_is_not_taken(tmp_path):
    live = tmp_path / "live"
    live.mkdir()
    hostile = [{"alias": "a\nbackend x", "port": 1, "max_model_len": 1, "owned_by": "vllm"}]
    for text in (json.dumps(hostile), "[" * 100000, '[{"alias": 1}]', "{}"):
        (live / "routes.json").write_text(text)
        assert live_routes(tmp_path) == []


def test_router_for_never_takes_the_folder_or_image_from_a_label(tmp_path, monkeypatch):
    from aigo_apply.plan.types import Plan
    from aigo_apply.platforms.docker.platform import router_for

    monkeypatch.setenv("AIGO_STATE_DIR", str(tmp_path / "state"))
    d = desired(tmp_path)
    entries = [dict(e) for e in __import__("helpers.planner_inputs", fromlist=["running"]).running(d)]
    spec = {**d.router.spec, "config_dir": str(tmp_path / "victim"), "image": "evil:1"}
    from aigo_apply.desired import labels as L

    entries[0]["Labels"] = {**entries[0]["Labels"], L.SPEC: json.dumps(spec)}
    seen = observed(d, entries)
    router = router_for(Plan("lab", "f", "", ()), seen, FakeRuntime(), d)
    assert router is not None and router.folder == tmp_path / "state" / "lab" / "router"
    assert router.image == d.router.container.image
    moved = replace(d, router=replace(d.router, spec={**d.router.spec, "config_dir": "/etc"}))
    with pytest.raises(AigoError, match="is not .*this tool's state folder"):
        router_for(Plan("lab", "f", "", ()), seen, FakeRuntime(), moved)
    assert Path(tmp_path / "victim").exists() is False


@pytest.mark.parametrize(
    "change",
    [
        {"image": "--privileged"},
        {"image": "haproxy:3.2 x"},
        {"user": "0:0 --privileged"},
        {"config_dir": "/state/a:/etc"},
        {"config_dir": "relative"},
        {"config_dir": "/state/../etc"},
        {"bind": "127.0.0.1\n"},
        {"bind": 2130706433},
    ],
)
def test_router_values_are_checked_again_before_the_docker_api(tmp_path, change):
    from aigo_apply.desired.engines.router import router_container
    from aigo_apply.errors import UnsafeSetting

    spec = desired(tmp_path).router.spec
    router_container("lab", spec)
    with pytest.raises(UnsafeSetting, match="router: refusing"):
        router_container("lab", {**spec, **change})


def test_keys_that_cannot_be_read_here_keep_the_deployed_digest_and_plan_no_reload(tmp_path, monkeypatch):
    """A CI shell without the keys: the router's files are not seen as changed because of them."""
    deployed_with, _ = keyed(tmp_path, monkeypatch, "sk-live")
    files = render_files(deployed_with.router.settings, list(deployed_with.router.routes))
    monkeypatch.delenv("AIGO_UNIT_KEYS")
    here, checks = router_checks(desired(tmp_path, KEYED), files, port_start=1024)
    assert checks == [] and here.router.settings.keys_digest == deployed_with.router.settings.keys_digest
    plan = build_plan(here, observed(here, files=files))
    assert [a.kind for a in plan.actions if a.is_router] == ["noop"], plan.actions


def test_keys_that_are_set_but_unusable_block_even_a_plan_without_changes(tmp_path, monkeypatch):
    deployed_with, _ = keyed(tmp_path, monkeypatch, "sk-live")
    files = render_files(deployed_with.router.settings, list(deployed_with.router.routes))
    monkeypatch.setenv("AIGO_UNIT_KEYS", "sk-a,sk\tb")
    _, checks = router_checks(desired(tmp_path, KEYED), files, port_start=1024)
    assert [(c.id, c.status) for c in checks] == [("router.api_keys", "blocking")]
    assert "sk\tb" not in checks[0].message
