"""`logs` on the in-memory runtime: names checked before anything is read, each model's containers
in the order asked, the router by its word, the last N lines, and the secret values a container was
given remembered for redaction."""

from __future__ import annotations

import pytest

from aigo_apply.app.logs import parse_since
from aigo_apply.errors import UsageProblem
from aigo_apply.platforms.docker.logs import log_stream
from aigo_apply.platforms.requests import LogsRequest
from aigo_apply.platforms.secrets import redact

from helpers.fakes import FakeRuntime
from helpers.planner_inputs import CONFIG, desired

WITH_SECRET = CONFIG.replace(
    "    gpus: none\n  beta:", "    gpus: none\n    env: {TOKEN: {from_env: SOME_TOKEN}}\n  beta:"
)


@pytest.mark.parametrize("text, seconds", [("30s", 30), ("10m", 600), ("1h30m", 5400), ("2h", 7200), (" 5s ", 5)])
def test_since_takes_a_duration(text, seconds):
    assert parse_since(text) == seconds


@pytest.mark.parametrize("text", ["", "yesterday", "10", "1d", "m", "-5s"])
def test_since_refuses_what_is_no_duration(text):
    with pytest.raises(UsageProblem, match="give a duration such as 30s"):
        parse_since(text)


def world(tmp_path, text=CONFIG):
    d = desired(tmp_path, text)
    rt = FakeRuntime()
    for alias, model in d.models.items():
        cid = rt.add_existing(model.container, cid=f"id-{alias}")
        rt.logs[model.container.name] = [f"{alias} line {i}" for i in range(5)]
        rt.envs[cid] = {"TOKEN": "the-token-value-123"} if alias == "alpha" and "TOKEN" in text else {}
    rt.add_existing(d.router.container, cid="id-router")
    rt.logs[d.router.container.name] = ["router line"]
    return d, rt


def test_names_are_checked_before_anything_is_read(tmp_path):
    d, rt = world(tmp_path)
    with pytest.raises(UsageProblem, match=r"no model 'gamma' .*models: alpha, beta, or `router`"):
        log_stream(rt, "lab", d, LogsRequest(names=("alpha", "gamma")))


def test_the_asked_models_in_order_the_last_lines_and_the_router_by_its_word(tmp_path):
    d, rt = world(tmp_path)
    stream = log_stream(rt, "lab", d, LogsRequest(names=("beta", "router", "alpha"), tail=2))
    assert stream.several
    assert list(stream.lines) == [
        ("beta", "beta line 3"),
        ("beta", "beta line 4"),
        ("router", "router line"),
        ("alpha", "alpha line 3"),
        ("alpha", "alpha line 4"),
    ]
    one = log_stream(rt, "lab", d, LogsRequest(names=("alpha",)))
    assert not one.several and len(list(one.lines)) == 5
    every = log_stream(rt, "lab", d, LogsRequest())
    assert every.several and {name for name, _ in every.lines} == {"alpha", "beta", "router"}


def test_the_values_a_container_got_for_secret_references_are_redacted(tmp_path):
    d, rt = world(tmp_path, WITH_SECRET)
    assert redact("x the-token-value-123 y") == "x the-token-value-123 y"  # not known yet
    log_stream(rt, "lab", d, LogsRequest(names=("beta",)))  # another model's: not read
    assert "the-token-value-123" in redact("the-token-value-123")
    log_stream(rt, "lab", d, LogsRequest(names=("alpha",)))
    assert redact("x the-token-value-123 y") == "x *** y"
