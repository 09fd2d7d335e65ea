"""Log rotation in the plan: a container made by this version from an unchanged file never plans a
change (however the size is spelt); a changed size or count replaces exactly the containers it
reaches, naming the field; a container made by an aigo-apply that did not rotate logs (no `logs` in
its spec label) is replaced with that said in words; a create shows the settings."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from aigo_apply.desired import labels as L
from aigo_apply.desired.types import canonical_json
from aigo_apply.plan.planner import build_plan
from aigo_apply.plan.text import plan_text

from helpers.planner_inputs import CONFIG, desired, observed, running

WITH_LOGS = CONFIG.replace("models:\n", "defaults: {logs: {max_size: 20M}}\nrouter: {logs: {max_files: 3}}\nmodels:\n")
WITH_LOGS = WITH_LOGS.replace(
    "    gpus: none\n  beta:", "    gpus: none\n    logs: {max_size: 1g, max_files: 2}\n  beta:"
)


def kinds(plan):
    return {a.address: a.kind for a in plan.actions}


def made_before_rotation(entries):
    """The list entries Docker gives for the same containers made by an aigo-apply without rotation:
    its spec label without `logs`, its definition (and hash) without the log settings."""
    out = []
    for entry in entries:
        spec = json.loads(entry["Labels"][L.SPEC])
        del spec["logs"]
        labels = {**entry["Labels"], L.SPEC: canonical_json(spec), L.SPEC_HASH: entry["old_hash"]}
        out.append({k: v for k, v in entry.items() if k != "old_hash"} | {"Labels": labels})
    return out


def old_entries(d):
    hashes = {c.name: dataclasses.replace(c, logs=None).definition_hash() for c in containers(d)}
    return [{**e, "old_hash": hashes[e["Names"][0][1:]]} for e in running(d)]


def containers(d):
    return [m.container for m in d.models.values()] + [d.router.container]


@pytest.mark.parametrize("text", [WITH_LOGS, WITH_LOGS.replace("20M", "20MiB")], ids=["20M", "20MiB"])
def test_an_unchanged_file_plans_no_change_every_time(tmp_path, text):
    """(The built-in settings: tests/unit/plan/test_planner.py, test_unchanged_file_plans_only_noops_every_time.)"""
    seen = observed(desired(tmp_path, text))
    for _ in range(3):
        plan = build_plan(desired(tmp_path, text), seen)
        assert set(kinds(plan).values()) == {"noop"} and not plan.has_changes, plan_text(plan)


@pytest.mark.parametrize(
    "written", ["{max_size: 50M}", "{max_size: 50MB, max_files: 5}", "{max_size: 50MiB}", "{max_files: 5}", "{}"]
)
def test_writing_the_built_in_settings_out_in_any_spelling_changes_nothing(tmp_path, written):
    seen = observed(desired(tmp_path))
    text = CONFIG.replace("models:\n", f"defaults: {{logs: {written}}}\nrouter: {{logs: {written}}}\nmodels:\n")
    plan = build_plan(desired(tmp_path, text), seen)
    assert set(kinds(plan).values()) == {"noop"}, plan_text(plan)


def test_a_changed_default_replaces_every_container_it_reaches_and_names_the_field(tmp_path):
    seen = observed(desired(tmp_path))
    changed = desired(tmp_path, CONFIG.replace("models:\n", "defaults: {logs: {max_size: 10m}}\nmodels:\n"))
    plan = build_plan(changed, seen)
    assert kinds(plan) == {"model.alpha": "recreate", "model.beta": "recreate", "router": "recreate"}
    for action in plan.actions:
        assert action.reasons == ("logs.max_size changed",), action.address
        effect = "router" if action.is_router else "recreate"
        assert [c.to_dict() for c in action.changes] == [
            {"path": "logs.max_size", "before": "50m", "after": "10m", "effect": effect}
        ]
    assert 'logs.max_size: "50m" -> "10m"' in re.sub(r"\x1b\[[0-9;]*m", "", plan_text(plan))


def test_one_model_s_own_setting_replaces_that_model_only(tmp_path):
    seen = observed(desired(tmp_path))
    text = CONFIG.replace("    vllm: {tool_call_parser", "    logs: {max_files: 9}\n    vllm: {tool_call_parser")
    plan = build_plan(desired(tmp_path, text), seen)
    assert kinds(plan) == {"model.alpha": "noop", "model.beta": "recreate", "router": "noop"}
    beta = plan.actions[1]
    assert beta.reasons == ("logs.max_files changed",)
    assert [(c.path, c.before, c.after) for c in beta.changes] == [("logs.max_files", 5, 9)]


def test_the_router_s_own_setting_replaces_the_router_only(tmp_path):
    seen = observed(desired(tmp_path))
    plan = build_plan(desired(tmp_path, CONFIG.replace("models:\n", "router: {logs: {max_files: 2}}\nmodels:\n")), seen)
    assert kinds(plan) == {"model.alpha": "noop", "model.beta": "noop", "router": "recreate"}
    assert plan.actions[-1].reasons == ("logs.max_files changed",)


@pytest.mark.parametrize("text", [CONFIG, WITH_LOGS], ids=["built-in", "set in every place"])
def test_containers_made_before_rotation_are_replaced_saying_their_logs_were_unbounded(tmp_path, text):
    d = desired(tmp_path, text)
    seen = observed(d, made_before_rotation(old_entries(d)))
    assert all(c.spec is not None and "logs" not in c.spec for c in seen.ours)
    plan = build_plan(d, seen)
    assert kinds(plan) == {"model.alpha": "recreate", "model.beta": "recreate", "router": "recreate"}
    for action in plan.actions:
        logs = (d.router.spec if action.is_router else d.models[action.model].spec)["logs"]
        assert action.reasons == (
            "its logs grow without bound (made by an earlier aigo-apply, before log rotation): it is made again "
            f"with its logs rotated at {logs['max_size']} per file, at most {logs['max_files']} files",
        ), action.address
        assert [(c.path, c.before, c.after) for c in action.changes] == [("logs", None, logs)]
    # once made again by this version, the same file plans nothing
    assert set(kinds(build_plan(d, observed(d))).values()) == {"noop"}


def test_a_create_shows_the_log_settings(tmp_path):
    from aigo_apply.observe.containers import parse_state

    plan = build_plan(desired(tmp_path, WITH_LOGS), parse_state("lab", [], []))
    changes = {a.address: {c.path: c.after for c in a.changes} for a in plan.actions if a.kind == "create"}
    assert (changes["model.alpha"]["logs.max_size"], changes["model.alpha"]["logs.max_files"]) == ("1g", 2)
    assert (changes["model.beta"]["logs.max_size"], changes["model.beta"]["logs.max_files"]) == ("20m", 5)
    assert (changes["router"]["logs.max_size"], changes["router"]["logs.max_files"]) == ("20m", 3)
