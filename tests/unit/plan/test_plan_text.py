"""The plan's two views: text in Terraform's shape, and JSON that follows schemas/plan.schema.json
(the contract docs/plan-and-state.md documents). Colours on a real terminal: tests/docker/test_plan.py."""

from __future__ import annotations

import json

import click
from jsonschema import Draft202012Validator

from aigo_apply.plan.planner import build_plan
from aigo_apply.plan.text import plan_json, plan_text
from aigo_apply.plan.types import Plan

from helpers.paths import ROOT
from helpers.planner_inputs import CONFIG, desired, observed

PLAN_SCHEMA = json.loads((ROOT / "schemas" / "plan.schema.json").read_text())


def mixed_plan(tmp_path) -> Plan:
    before = observed(desired(tmp_path))
    text = (
        CONFIG.replace("tool_call_parser: hermes", "tool_call_parser: qwen3_coder")
        + "  gamma:\n    source: {path: /m/g}\n    context_length: 2k\n    gpus: none\n    env: {T: {from_env: T}}\n"
    )
    text = text.replace('image_tag: "1"', 'image_tag: "2"')
    return build_plan(desired(tmp_path, text), before)


def test_text_has_legend_reasons_changes_and_summary(tmp_path):
    text = click.unstyle(plan_text(mixed_plan(tmp_path)))
    assert "Symbols: v pull   + create   -/+ replace" in text
    assert (
        "  # model.beta will be replaced\n    (because image changed)\n    (because vllm.tool_call_parser changed)"
        in text
    )
    assert '      ~ vllm.tool_call_parser: "hermes" -> "qwen3_coder"' in text
    assert '      + env.T: {"from_env": "T"}' in text
    assert "      note: context_length '2k' means 2000 tokens" in text
    assert text.strip().endswith(
        "Plan: 1 to pull, 1 to create, 2 to replace, 0 to start, 0 to remove, 1 to reload; 0 unchanged."
    )
    assert "  # router will be reloaded\n    (because route for model gamma to be added)" in text


def test_diff_only_when_asked(tmp_path):
    plan = mixed_plan(tmp_path)
    assert "+++ desired/models.map" not in click.unstyle(plan_text(plan))
    shown = click.unstyle(plan_text(plan, show_diff=True))
    assert "      +++ desired/models.map" in shown and "      +gamma m_gamma_" in shown


def test_no_changes_message(tmp_path):
    d = desired(tmp_path)
    text = click.unstyle(plan_text(build_plan(d, observed(d))))
    assert text.startswith("No changes. The containers of project 'lab' match ")
    assert "Symbols" not in text and "Plan:" not in text


def test_json_follows_the_contract_and_round_trips(tmp_path):
    plan = mixed_plan(tmp_path)
    data = json.loads(plan_json(plan))
    errors = sorted(e.message for e in Draft202012Validator(PLAN_SCHEMA).iter_errors(data))
    assert errors == []
    assert data["summary"] == {
        "pull": 1,
        "download": 0,
        "create": 1,
        "recreate": 2,
        "start": 0,
        "remove": 0,
        "reload_router": 1,
        "noop": 0,
        "has_changes": True,
        "blocked": False,
    }
    assert Plan.from_dict(data).to_dict() == data


def test_no_secret_values_in_plan(tmp_path, monkeypatch):
    monkeypatch.setenv("T", "very-secret-value")
    assert "very-secret-value" not in plan_json(mixed_plan(tmp_path))


def test_the_docs_document_every_top_level_plan_field():
    page = (ROOT / "docs" / "plan-and-state.md").read_text()
    for field in PLAN_SCHEMA["required"] + PLAN_SCHEMA["$defs"]["action"]["required"]:
        assert f"`{field}`" in page, field
