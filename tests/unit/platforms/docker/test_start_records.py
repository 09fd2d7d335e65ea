"""Each start apply saw through to serving is kept: measured from the engine's own lines, in the
project's state folder, private, the newest few per model; read back by plan and status, and a file
apply did not write read as nothing."""

from __future__ import annotations

import json
import os
import stat
from datetime import UTC, datetime

import pytest
from unit.platforms.docker.test_executor import World, config, desired, machine, observe, outcome, plan_of

from aigo_apply.errors import AigoError
from aigo_apply.observe.start_log import StartRecord
from aigo_apply.plan.facts import PlanFacts, PlanRequest
from aigo_apply.plan.payloads import ModelPayload
from aigo_apply.plan.planner import build_plan
from aigo_apply.plan.types import Action, Downtime
from aigo_apply.platforms.docker import start_records

from helpers.fakes import Log
from helpers.paths import ROOT

COLD = (ROOT / "tests" / "fixtures" / "vllm-v0.32.0-cpu-start-compiled-cold.log").read_text().splitlines()
WARM = (ROOT / "tests" / "fixtures" / "vllm-v0.32.0-cpu-start-compiled-warm.log").read_text().splitlines()


def record(seconds: float = 40.0, cache: str | None = "warm", at: str = "2026-12-06T17:00:00Z") -> StartRecord:
    return StartRecord(at, seconds, {"compile": 10.0, "other": seconds - 10.0}, cache, "sha256:img", "local/engine:1")


def test_kept_records_read_back_newest_first_and_only_the_newest_few(tmp_path):
    for i in range(start_records.KEEP + 3):
        start_records.keep(tmp_path, "chat", record(seconds=30.0 + i))
    start_records.keep(tmp_path, "other", record(seconds=99.0))
    got = start_records.read(tmp_path, "chat")
    assert [r.seconds for r in got] == [30.0 + i for i in reversed(range(3, start_records.KEEP + 3))]
    assert start_records.newest(tmp_path, "other") == record(seconds=99.0)
    assert start_records.read_all(tmp_path, ["chat", "other", "never"]).keys() == {"chat", "other"}


def test_the_file_is_this_accounts_alone(tmp_path):
    path = start_records.keep(tmp_path, "chat", record())
    assert path == tmp_path / "starts" / "chat.jsonl"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) & 0o077 == 0


def test_lines_apply_did_not_write_are_skipped_and_the_rest_read(tmp_path):
    path = start_records.keep(tmp_path, "chat", record(seconds=41.0))
    good = path.read_text()
    path.write_text('{"not": "a record"}\n[1, 2]\nnot json\n' + '{"a": ' * 100 + "\n" + good + '{"seconds": NaN}\n')
    assert [r.seconds for r in start_records.read(tmp_path, "chat")] == [41.0]


@pytest.mark.parametrize("what", ["link", "folder", "fifo", "huge"])
def test_a_file_that_is_not_a_small_regular_one_reads_as_nothing(tmp_path, what):
    path = tmp_path / "starts" / "chat.jsonl"
    path.parent.mkdir()
    real = tmp_path / "elsewhere.jsonl"
    real.write_text(json.dumps(record().to_dict()) + "\n")
    if what == "link":
        path.symlink_to(real)
    elif what == "folder":
        path.mkdir()
    elif what == "fifo":
        os.mkfifo(path)  # never opened: a read would wait for a writer
    else:
        path.write_text((json.dumps(record().to_dict()) + "\n") * 1000)
    assert start_records.read(tmp_path, "chat") == ()
    assert start_records.newest(tmp_path, "chat") is None


def test_an_alias_that_would_leave_the_folder_is_refused(tmp_path):
    with pytest.raises(AigoError):
        start_records.keep(tmp_path, "../chat", record())
    assert start_records.read(tmp_path, "../../etc/passwd") == ()


def test_destroy_removes_them(tmp_path):
    start_records.keep(tmp_path, "chat", record())
    start_records.remove_all(tmp_path)
    assert not (tmp_path / "starts").exists() and start_records.read(tmp_path, "chat") == ()


def test_a_record_is_taken_from_the_engines_log_the_image_it_runs_and_its_definition(tmp_path):
    from helpers.fakes import FakeRuntime

    d = desired(tmp_path, config(alpha="none"))
    rt = FakeRuntime(Log())
    cid = rt.add_existing(d.models["alpha"].container)
    rt.logs["aigo-lab-alpha"] = COLD
    action = Action(
        "model.alpha",
        "create",
        ("new",),
        model="alpha",
        image="local/engine:1",
        payload=ModelPayload(d.models["alpha"].spec),
    )
    got = start_records.take(rt, action, cid, d.models["alpha"].container, 65.2, datetime(2026, 12, 6, tzinfo=UTC))
    assert got.at == "2026-12-06T00:00:00Z" and got.seconds == 65.2 and got.cache == "cold"
    assert got.phases["compile"] == pytest.approx(19.6) and got.image_id == "sha256:img"
    assert got.spec_hash == d.models["alpha"].container.definition_hash() and got.kind == "create"


def test_every_start_apply_sees_through_to_serving_is_kept_and_the_next_plan_predicts_from_it(tmp_path):
    """create, recreate and start each leave a record; the plan's downtime for the model is then
    its last start's (the records read from the state folder, as platforms/docker/planning.py reads them)."""
    d = desired(tmp_path, config(alpha="none\nupdate: recreate"))
    w = World(tmp_path, d, seconds=0.05, routed=())
    w.rt.logs["aigo-lab-alpha"] = WARM
    state = tmp_path / "state"

    def planned(replace=()):
        starts = start_records.read_all(state, ["alpha"])
        plan = build_plan(d, observe(d, w.rt), PlanFacts(starts=starts), PlanRequest(frozenset(replace)))
        return plan, next(a for a in plan.actions if a.address == "model.alpha")

    assert outcome(w.run(planned()[0]), "model.alpha").ok
    first = start_records.newest(state, "alpha")
    assert first is not None and (first.kind, first.cache) == ("create", "warm") and first.seconds >= 0.05

    plan, replace = planned(replace={"alpha"})
    assert replace.kind == "recreate" and replace.strategy is not None and replace.strategy.name == "recreate"
    assert replace.downtime == Downtime(first.seconds, f"its last warm start took {first.seconds:.1f} s")
    assert outcome(w.run(plan), "model.alpha").ok

    w.rt.stop("aigo-lab-alpha")
    plan, start = planned()
    assert start.kind == "start" and start.downtime is not None and start.downtime.seconds is not None
    assert outcome(w.run(plan), "model.alpha").ok
    assert [r.kind for r in start_records.read(state, "alpha")] == ["start", "recreate", "create"]


def test_an_unpaused_engine_and_a_start_that_failed_leave_no_record(tmp_path):
    d = desired(tmp_path, config(alpha="none", beta="none"))
    w = World(tmp_path, d, fail={"beta": 1}, routed=("alpha", "beta"))
    machine(d, w.rt, states={"alpha": "paused", "beta": "exited"})
    report = w.run(plan_of(d, observe(d, w.rt)))
    assert outcome(report, "model.alpha").ok and not outcome(report, "model.beta").ok
    assert start_records.read_all(tmp_path / "state", ["alpha", "beta"]) == {}


def test_a_record_that_cannot_be_kept_is_journaled_and_the_model_serves(tmp_path):
    d = desired(tmp_path, config(alpha="none"))
    w = World(tmp_path, d, routed=())
    (tmp_path / "state" / "starts").write_text("a file where the folder goes")
    report = w.run(plan_of(d, observe(d, w.rt)))
    assert outcome(report, "model.alpha").ok
    assert ("start_record", "not kept") in [(e["step"], e["outcome"]) for e in w.journal_entries()]


@pytest.mark.parametrize(
    ("started", "unix"),
    [
        ("2026-12-06T17:11:28.971234567Z", 1796577088.971234567),
        ("2026-12-06T17:11:28Z", 1796577088.0),
        ("0001-01-01T00:00:00Z", None),  # a container never started
        ("yesterday", None),
        (None, None),
    ],
)
def test_the_log_is_read_from_the_start_docker_says_the_container_made(started, unix):
    """A container started again keeps its earlier runs' lines: only those since its StartedAt count."""
    got = start_records._unix(started)
    assert got == (pytest.approx(unix, abs=1e-6) if unix is not None else None)


def test_a_container_started_again_is_measured_by_this_runs_lines_only(tmp_path):
    from helpers.fakes import FakeRuntime

    class Restarted(FakeRuntime):
        """Docker's answers for a container whose first run compiled cold and whose second, started
        at 2026-12-06T17:12:38Z, found its cache: lines carry the time Docker logged them."""

        def state(self, container):
            return {**super().state(container), "StartedAt": "2026-12-06T17:12:38.2Z"}

        def log_lines(self, container, follow, tail, since):
            earlier = [(1796577088.0, line) for line in COLD]
            later = [(1796577158.5, line) for line in WARM]
            return iter(line for at, line in earlier + later if since is None or at >= since)

    d = desired(tmp_path, config(alpha="none"))
    rt = Restarted(Log())
    cid = rt.add_existing(d.models["alpha"].container, "running")
    action = Action("model.alpha", "start", ("stopped",), model="alpha", image="local/engine:1")
    got = start_records.take(rt, action, cid, d.models["alpha"].container, 42.9)
    assert got.cache == "warm" and got.phases["compile"] == pytest.approx(14.0) and got.phases["inspect"] == 0.0
