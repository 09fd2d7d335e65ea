"""The router's keys must not be guessable, and development endpoints must not be open
(the config's part): `router.api_keys: {from_env: NAME}` is refused at validation when NAME is a
variable anyone on the machine can know (HOME, PATH, USER, ... the whole class: what the system, the
login, the shell and CI set); a key shorter than 16 characters, or shaped like a path, blocks the plan
(said without the key); and on-demand models behind a router bound beyond loopback without keys are
a plan blocker."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aigo_apply.errors import ConfigInvalid
from aigo_apply.observe.config_file import load_config
from aigo_apply.plan.facts import PlanFacts
from aigo_apply.plan.plan_file import READINESS_CHECK_IDS
from aigo_apply.plan.planner import build_plan
from aigo_apply.platforms.router_keys import router_checks

from helpers.planner_inputs import CONFIG, desired, observed

PUBLIC = ["HOME", "PATH", "USER", "PWD", "SHELL", "LANG", "TERM", "LOGNAME", "HOSTNAME", "OLDPWD", "TMPDIR", "TZ",
          "MAIL", "EDITOR", "LC_ALL", "LC_CTYPE", "XDG_RUNTIME_DIR", "SSH_AUTH_SOCK", "SSH_CONNECTION", "SUDO_USER",
          "GITHUB_SHA", "GITHUB_REPOSITORY", "RUNNER_TEMP", "DISPLAY", "AIGO_FILE", "KUBECONFIG"]  # fmt: skip


def _validate(tmp_path, router: str) -> list[str]:
    path = tmp_path / "aigo.yaml"
    path.write_text(CONFIG + router)
    try:
        load_config(str(path))
    except ConfigInvalid as exc:
        return [p.format().replace(str(path), "F") for p in exc.problems]
    return []


@pytest.mark.parametrize("name", PUBLIC)
def test_keys_from_a_variable_anyone_can_know_are_refused_at_their_line(tmp_path, name):
    found = _validate(tmp_path, f"router:\n  api_keys: {{from_env: {name}}}\n")
    assert len(found) == 1 and found[0].startswith("F:16:24:"), found
    assert "router.api_keys.from_env: the router's keys would be guessable" in found[0]
    assert name in found[0] and "in a variable of their own" in found[0]


@pytest.mark.parametrize("name", ["AIGO_API_KEYS", "ROUTER_KEYS", "LLM_GATEWAY_KEYS", "MY_SECRET", "GITHUB_TOKEN"])
def test_keys_from_a_variable_of_their_own_validate(tmp_path, name):
    assert _validate(tmp_path, f"router: {{api_keys: {{from_env: {name}}}}}\n") == []


def _checks(tmp_path, monkeypatch, keys: str, text: str = CONFIG):
    monkeypatch.setenv("AIGO_UNIT_KEYS", keys)
    return router_checks(desired(tmp_path, text + "router: {api_keys: {from_env: AIGO_UNIT_KEYS}}\n"), port_start=1024)


KEY_TEXT = st.text(st.characters(min_codepoint=33, max_codepoint=126, exclude_characters=","), min_size=1)


@settings(max_examples=60, deadline=None)
@given(short=KEY_TEXT.filter(lambda k: len(k) < 14).map(lambda k: "#!" + k))  # "#!": never in a message
def test_a_key_under_16_characters_blocks_the_plan_without_being_shown(tmp_path_factory, short):
    monkeypatch = pytest.MonkeyPatch()
    try:
        _, checks = _checks(tmp_path_factory.mktemp("k"), monkeypatch, f"{'a1' * 12},{short}")
    finally:
        monkeypatch.undo()
    assert [(c.id, c.status) for c in checks] == [("router.api_keys", "blocking")]
    assert f"key 2 of 2 is {len(short)} characters long" in checks[0].message and short not in checks[0].message
    assert "at least 16 random characters" in checks[0].remediation


@pytest.mark.parametrize("value", ["/root", "/usr/local/bin:/usr/bin:/bin:/sbin", "~/keys/router-key-file"])
def test_a_key_shaped_like_a_path_blocks_the_plan(tmp_path, monkeypatch, value):
    _, checks = _checks(tmp_path, monkeypatch, value)
    assert [c.id for c in checks] == ["router.api_keys"] and value not in checks[0].message
    assert "is " in checks[0].message and (
        "looks like a path" in checks[0].message or "characters long" in checks[0].message
    )


def test_random_keys_of_16_characters_or_more_are_used(tmp_path, monkeypatch):
    d, checks = _checks(tmp_path, monkeypatch, "0123456789abcdef, Zq8-3kd_LL0p9x7Yb2")
    assert checks == [] and len(d.router.settings.keys_digest) == 64


ON_DEMAND = CONFIG.replace("    gpus: none\n", "    gpus: none\n    on_demand: true\n", 1)


@pytest.mark.parametrize(
    ("router", "blocked"),
    [
        ("router: {bind: 0.0.0.0}\n", True),
        ("router: {bind: '::'}\n", True),
        ("router: {bind: 192.168.1.5}\n", True),
        ("router: {bind: 127.0.0.1}\n", False),
        ("router: {bind: 0.0.0.0, api_keys: {from_env: AIGO_UNIT_KEYS}}\n", False),
    ],
)
def test_on_demand_models_behind_an_open_router_without_keys_block_the_plan(tmp_path, monkeypatch, router, blocked):
    monkeypatch.setenv("AIGO_UNIT_KEYS", "0123456789abcdef0123")
    d = desired(tmp_path, ON_DEMAND + router)
    _, checks = router_checks(d, port_start=1024)
    found = [c for c in checks if c.id == "router.on_demand_open"]
    assert bool(found) is blocked and all(c.status == "blocking" for c in found)
    if blocked:
        assert "on-demand models alpha" in found[0].message and "api_keys" in found[0].remediation
        plan = build_plan(d, observed(desired(tmp_path)), facts=PlanFacts(tuple(checks)))
        assert "router.on_demand_open" in [b.id for b in plan.blockers]
        assert "router.on_demand_open" in json.dumps(plan.to_dict())


def test_models_that_are_not_on_demand_keep_the_warning_only(tmp_path):
    _, checks = router_checks(desired(tmp_path, CONFIG + "router: {bind: 0.0.0.0}\n"), port_start=1024)
    assert [(c.id, c.status) for c in checks] == [("router.open", "warning")]


def test_the_new_blocker_is_a_known_readiness_id():
    assert "router.on_demand_open" in READINESS_CHECK_IDS
