"""`plan` gathers the measured starts of the models it takes away from the project's state folder (one
small file each, for the models with a container) and predicts their downtime from them."""

from __future__ import annotations

from aigo_apply.observe.start_log import StartRecord
from aigo_apply.plan.facts import PlanRequest
from aigo_apply.platforms.docker import start_records
from aigo_apply.platforms.docker.planning import away, plan_for

from helpers.fakes import FakeRuntime, Log
from helpers.planner_inputs import CONFIG, desired, observed, running

RECREATE = CONFIG.replace("    gpus: none\n  beta", "    gpus: none\n    update: recreate\n  beta")


def keep(state, d, alias, seconds):
    spec = d.models[alias].container.definition_hash()
    record = StartRecord("2026-12-06T10:00:00Z", seconds, {}, "warm", "sha256:img", "local/engine:1", spec_hash=spec)
    start_records.keep(state, alias, record)


def test_the_plan_predicts_from_the_state_folder_of_its_project(tmp_path):
    d = desired(tmp_path, RECREATE)
    state = tmp_path / "state" / "lab"
    keep(state, d, "alpha", 41.3)
    keep(state, d, "beta", 12.0)
    seen = observed(d, running(d, beta={"State": "exited"}))
    plan = plan_for(d, seen, FakeRuntime(Log()), PlanRequest(frozenset({"alpha"})), state=state)
    by = {a.address: a for a in plan.actions}
    assert by["model.alpha"].downtime is not None and by["model.alpha"].downtime.seconds == 41.3
    assert by["model.beta"].kind == "start" and by["model.beta"].downtime.seconds == 12.0
    assert away(plan) == {"alpha", "beta"}
    # without the state folder nothing is known, and nothing else changes
    blind = plan_for(d, seen, FakeRuntime(Log()), PlanRequest(frozenset({"alpha"})))
    assert blind.actions_digest() == plan.actions_digest()
    assert all(a.downtime is None or a.downtime.seconds is None for a in blind.actions)


def test_a_parallel_replace_and_a_no_op_need_no_record(tmp_path):
    parallel = CONFIG.replace("    gpus: none\n  beta", "    gpus: none\n    update: parallel\n  beta")
    d = desired(tmp_path, parallel)
    replaced = plan_for(d, observed(d), FakeRuntime(Log()), PlanRequest(frozenset({"alpha"})))
    assert [a.kind for a in replaced.actions if a.model == "alpha"] == ["recreate"]
    assert away(replaced) == frozenset()
    assert away(plan_for(d, observed(d), FakeRuntime(Log()), PlanRequest())) == frozenset()
