"""The router's one door, as rendered (router/haproxy.py, templates/haproxy.cfg.j2, router/
haproxy_allowlist.py): an allowlist of exact inference paths, POST only; a path with a control
character or not in normal form is a 400 before any other rule; bodies over the limit are a 413
whatever their framing; the model's name is checked for control characters; metrics need a key when
keys are set; each engine is reached at its socket (or port, or Service). The real HAProxy's answers
to all of this are in tests/docker/test_one_door_at_docker.py."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from aigo_apply.desired.types import Route, RouterSettings
from aigo_apply.router import haproxy_allowlist as allowlist
from aigo_apply.router.haproxy import render_files, server_address

SETTINGS = RouterSettings("lab", "127.0.0.1", 8000, False, max_body_mb=16)
ROUTES = [Route("alpha", None, 4096), Route("beta", 20001, 8192, "sglang")]


def frontend(settings: RouterSettings = SETTINGS, routes=ROUTES) -> list[str]:
    """The frontend's rule lines, comments left out."""
    cfg = render_files(settings, routes)["haproxy.cfg"]
    body = cfg[cfg.index("frontend openai") : cfg.index("\nbackend ")]
    return [line.strip() for line in body.splitlines() if line.strip() and not line.strip().startswith("#")]


def first(lines: list[str], needle: str) -> int:
    return next(n for n, line in enumerate(lines) if needle in line)


def test_every_routed_path_is_named_exactly_once_and_matched_as_sent():
    lines = frontend()
    named = [p for line in lines if line.startswith("acl api_") for p in line.split(" -m str ")[1].split()]
    assert sorted(named) == allowlist.routed_paths() and len(named) == len(set(named))
    # as sent: no decoding, no prefix, no case folding on the allowlist's own match
    assert all(" path -m str " in line for line in lines if line.startswith("acl api_"))
    matches = [line for line in lines if " path " in line or line.startswith("acl api_")]
    assert not [line for line in matches if "engine_control" in line or "-m beg" in line or "-i" in line.split()]


def test_a_path_that_is_not_plain_is_refused_before_any_other_rule():
    lines = frontend()
    rules = [n for n, line in enumerate(lines) if line.startswith("http-request")]
    assert "400-path.json" in lines[rules[0]] and "path_control || path_odd" in lines[rules[0]]
    control = next(line for line in lines if line.startswith("acl path_control"))
    assert "path,url_dec,hex -m reg ^(..)*(0[0-9A-F]|1[0-9A-F]|7F)" in control  # a NUL cannot cut it short
    odd = [line for line in lines if line.startswith("acl path_odd")]
    assert {"//", "/./", "/../"} <= set(odd[0].split()) and {"/.", "/.."} <= set(odd[1].split())


@pytest.mark.parametrize(
    "decoded, control",
    [
        ("/sleep\n", True),
        ("/sleep\x00", True),
        ("/sleep\t", True),
        ("/sleep\x7f", True),
        ("/sleep", False),
        ("/v1/chat/completions", False),
        ("/caf\u00e9", False),
        ("/\x1b[31m", True),
    ],  # fmt: skip
)
def test_the_control_character_pattern_reads_whole_characters_of_the_hex(decoded, control):
    """HAProxy's hex converter writes two upper-case digits per byte; the pattern must find a control
    byte at a byte boundary only (0x30 0x41 is "0A", which is no newline)."""
    pattern = next(line for line in frontend() if line.startswith("acl path_control")).split(" -m reg ")[1]
    hexed = decoded.encode().hex().upper()
    assert bool(re.search(pattern, hexed)) is control
    assert not re.search(pattern, b"/0A1F".hex().upper())


def test_only_post_to_an_allowed_path_goes_further_and_the_model_is_checked_before_the_map():
    lines = frontend()
    gate = first(lines, "404-path.json")
    assert "if !api_json !api_form || !METH_POST" in lines[gate]
    for later in ("set-var(txn.model)", "lua.aigo_form_model", "400-model.json", "use_backend"):
        assert first(lines, later) > gate, later
    assert first(lines, "413.json") < first(lines, "set-var(txn.model)")
    assert first(lines, "400-model.json") < first(lines, "does not exist")
    model_control = next(line for line in lines if line.startswith("acl model_control"))
    assert "var(txn.model),hex -m reg" in model_control


def test_the_413_limit_is_the_setting_and_the_buffer_holds_a_mebibyte_more():
    for mb in (1, 16, 128):
        cfg = render_files(replace(SETTINGS, max_body_mb=mb), ROUTES)["haproxy.cfg"]
        limit = mb * 1024 * 1024
        assert f"tune.bufsize {limit + 1024 * 1024}" in cfg
        # a length said too big is refused before any body is read; a chunked one once it is
        assert f"413.json if {{ req.body_size gt {limit} }}\n    http-request wait-for-body time 60s\n" in cfg
        assert f"413.json if {{ req.body_len gt {limit} }}" in cfg


def test_with_keys_the_metrics_come_after_the_key_check_unless_the_file_opts_out():
    swap = replace(SETTINGS, api_keys=True, keys_digest="0" * 64)
    keyed = frontend(swap)
    assert first(keyed, "use-service lua.aigo_metrics ") > first(keyed, "if !authorized")
    assert first(keyed, "/health") < first(keyed, "if !authorized")  # liveness needs no key
    opted = frontend(replace(swap, metrics_without_key=True))
    assert first(opted, "use-service lua.aigo_metrics ") < first(opted, "if !authorized")
    assert not [line for line in frontend() if "authorized" in line]  # no keys, no key check


def test_each_engine_is_reached_at_its_socket_its_port_or_its_service():
    alpha, beta = ROUTES
    assert server_address(alpha) == "unix@/run/aigo-engines/alpha/engine.sock"
    assert server_address(beta) == "127.0.0.1:20001"
    assert server_address(alpha, {"alpha": "aigo-lab-alpha.ns.svc:8000"}) == "aigo-lab-alpha.ns.svc:8000"
    cfg = render_files(SETTINGS, ROUTES)["haproxy.cfg"]
    assert "server engine unix@/run/aigo-engines/alpha/engine.sock check" in cfg
    assert "server engine 127.0.0.1:20001 check" in cfg


def test_the_error_bodies_are_openai_shaped():
    import json

    files = render_files(SETTINGS, ROUTES)
    for name, code, kind in [
        ("400-path.json", 400, "BadRequestError"),
        ("400-model.json", 400, "BadRequestError"),
        ("404-path.json", 404, "NotFoundError"),
        ("413.json", 413, "RequestTooLargeError"),
    ]:
        error = json.loads(files[f"errors/{name}"])["error"]
        assert (error["code"], error["type"]) == (code, kind) and error["message"], name
    assert "16 MiB" in json.loads(files["errors/413.json"])["error"]["message"]


def test_the_allowlist_says_what_each_path_is_for_and_overlaps_nothing():
    routed = set(allowlist.JSON_PATHS) | set(allowlist.FORM_PATHS)
    assert not routed & set(allowlist.OWN_PATHS) and not routed & set(allowlist.NOT_ROUTED)
    assert all(p.startswith("/") and p == p.strip() and "//" not in p for p in routed)
    assert {"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/audio/transcriptions"} <= routed
    for path, why in {**allowlist.JSON_PATHS, **allowlist.FORM_PATHS, **allowlist.NOT_ROUTED}.items():
        assert why.strip(), path


def test_the_key_is_checked_and_dropped_before_any_body_is_read():
    keyed = frontend(replace(SETTINGS, api_keys=True, keys_digest="0" * 64))
    cfg = render_files(replace(SETTINGS, api_keys=True, keys_digest="0" * 64), ROUTES)["haproxy.cfg"]
    assert "http-buffer-request" not in cfg  # it would hold every unkeyed client's body before the 401
    assert first(keyed, "if !authorized") < first(keyed, "wait-for-body") < first(keyed, "set-var(txn.model)")
    assert first(keyed, "if !authorized") < first(keyed, "del-header authorization") < first(keyed, "use_backend")
    assert "http-request del-header authorization" in frontend()  # never forwarded, with keys or without


def test_only_json_reaches_a_json_path_and_a_web_page_reads_no_answer():
    lines = frontend()
    assert first(lines, "415.json if api_json !{ req.fhdr(content-type),lower -m beg application/json }") < first(
        lines, "wait-for-body"
    )
    assert "415.json if api_form !{ req.fhdr(content-type),lower -m beg multipart/form-data }" in "\n".join(lines)
    for header in ("allow-origin", "allow-credentials", "allow-methods", "allow-headers", "expose-headers"):
        assert f"http-response del-header access-control-{header}" in lines


def test_an_upload_a_web_page_sent_is_refused_before_its_body_is_read():
    lines = frontend()
    assert first(
        lines, "403-page.json if api_form page_sent || api_form !fetch_metadata page_origin !own_origin"
    ) < first(lines, "wait-for-body")
    assert "acl page_sent req.fhdr(sec-fetch-site),lower -m str cross-site same-site" in lines  # not same-origin


def test_no_header_a_rule_judges_is_split_at_its_commas():
    """req.hdr() splits a value at commas and judges one part; every rule reads the whole header."""
    text = "\n".join(frontend()) + "\n".join(frontend(replace(SETTINGS, api_keys=True)))
    assert "req.hdr(" not in text and "req.fhdr(host)" in text


def test_an_absolute_request_target_is_a_400_before_any_other_rule():
    lines = frontend()
    assert "acl absolute_target url -m reg ^[^/]" in lines
    assert first(lines, "400-path.json if path_control || path_odd || absolute_target !{ req.ver 2.0 }") < first(
        lines, "403-host.json"
    )


def test_a_loopback_router_answers_only_requests_that_name_this_machine():
    lines = frontend()
    rule = next(line for line in lines if line.startswith("acl local_host"))
    assert rule == "acl local_host req.fhdr(host),lower,regsub(:[0-9]+$,) -m str localhost localhost. 127.0.0.1 [::1]"
    assert "403-host.json if { req.fhdr(host) -m found } !local_host" in "\n".join(lines)
    assert first(lines, "403-host.json") < first(lines, "/health")
    for bind in ("0.0.0.0", "192.168.1.5", "::"):
        assert not [line for line in frontend(replace(SETTINGS, bind=bind)) if "local_host" in line], bind
    assert [line for line in frontend(replace(SETTINGS, bind="::1")) if "403-host.json" in line]
