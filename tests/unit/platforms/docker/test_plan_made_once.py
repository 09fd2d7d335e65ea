"""Gather, then decide once: a Docker plan is made by the planner once, from facts gathered first,
whatever those facts hold (measured starts of the models it takes away, secrets its changes cannot
resolve, both, or neither); the secrets' findings are added to that one plan, as the planner adds
every check, and the plan is the one the planner makes given every fact at once."""

from __future__ import annotations

from dataclasses import replace

import pytest

from aigo_apply.observe.start_log import StartRecord
from aigo_apply.plan.facts import PlanFacts, PlanRequest
from aigo_apply.plan.host_checks import Check
from aigo_apply.platforms.docker import planning, start_records

from helpers.fakes import FakeRuntime, Log
from helpers.planner_inputs import CONFIG, desired, observed, running

SECRET = "    env: {T: {from_env: AIGO_TEST_UNSET_SECRET}}\n"
BASE = CONFIG.replace("    gpus: none\n  beta", "    gpus: none\n    update: recreate\n  beta")  # alpha goes away
WITH_SECRET = BASE.replace("  beta", SECRET + "  beta")
CASES = {
    "no-op": (BASE, False, frozenset()),
    "a start measured": (BASE, True, frozenset({"alpha"})),
    "a secret missing": (WITH_SECRET, False, None),
    "both": (WITH_SECRET, True, None),
    "a secret of a model left alone": (
        WITH_SECRET,
        True,
        frozenset({"beta"}),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_plan_is_made_once_and_is_the_plan_of_every_fact(tmp_path, monkeypatch, case):
    text, measured, replacing = CASES[case]
    monkeypatch.delenv("AIGO_TEST_UNSET_SECRET", raising=False)
    d = desired(tmp_path, text)
    state = tmp_path / "state" / "lab"
    if measured:
        spec = d.models["alpha"].container.definition_hash()
        record = StartRecord("2026-12-06T10:00:00Z", 41.3, {}, "warm", "sha256:img", "local/engine:1", spec_hash=spec)
        start_records.keep(state, "alpha", record)
    seen = observed(d, running(d)) if replacing is not None else observed(d, running(d, router=False)[:0])
    request = PlanRequest(replacing or frozenset())
    made: list[PlanFacts | None] = []
    real = planning.build_plan

    def counted(desired_, observed_, facts=None, request_=None):
        made.append(facts)
        return real(desired_, observed_, facts, request_)

    monkeypatch.setattr(planning, "build_plan", counted)
    plan = planning.plan_for(d, seen, FakeRuntime(Log()), request, state=state)
    assert len(made) == 1
    facts = made[0]
    assert facts is not None
    # the one plan is the planner's own, given the secrets' checks with the other facts
    secrets = planning.reference_checks(d, aliases=planning.needs_env(plan), router=plan.has_changes)
    whole = real(d, seen, replace(facts, checks=facts.checks + tuple(secrets)), request)
    assert plan == whole
    assert all(isinstance(c, Check) for c in facts.checks)
    by = {a.model: a for a in plan.actions if a.model}
    if measured and replacing and "alpha" in replacing:
        assert by["alpha"].downtime is not None and by["alpha"].downtime.seconds == 41.3
    missing = [b for b in plan.blockers if "AIGO_TEST_UNSET_SECRET" in b.message]
    assert bool(missing) == (SECRET in text and by["alpha"].kind in ("create", "recreate")), plan.blockers
