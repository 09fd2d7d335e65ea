"""A replace whose old engine sleeps meanwhile (platforms/docker/sleep_replace.py), on the in-memory runtime: the
order of its side effects (hold, sleep, the new engine on the other socket, the route moved, the old
one gone), and its ways back (a new engine that fails: the old one wakes and takes its route back; one
that cannot be woken: restarted; one that will not sleep: nothing changes). Plans are made by the real
pure core, with a GPU ledger where parallel does not fit and the host's free memory holds the weights."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from aigo_apply.desired.build import build_desired
from aigo_apply.observe.config_file import load_config
from aigo_apply.observe.containers import parse_state
from aigo_apply.plan import gpu_ledger
from aigo_apply.plan.facts import PlanFacts, PlanRequest
from aigo_apply.plan.planner import build_plan
from aigo_apply.platforms.docker.executor import Executor
from aigo_apply.platforms.journal import Journal
from aigo_apply.router.haproxy import render_files

from helpers.configs import host_context, write_config
from helpers.fakes import FakeReporter, FakeRoutes, FakeRuntime, FakeWaits, Log, no_router_wait

GIB = 1024**3
OLD = "aigo-lab-alpha"
NEXT = "aigo-lab-alpha-aigo-next"


def config(fraction: float, update: str = "sleep") -> str:
    return (
        'version: 1\nproject: lab\nengines: {vllm: {image: local/engine, image_tag: "1"}}\nmodels:\n'
        "  alpha:\n    source: {path: /m/alpha}\n    context_length: 4096\n    gpus: [0]\n"
        f"    vllm: {{gpu_memory_utilization: {fraction}}}\n    update: {update}\n"
    )


class World:
    """alpha runs (0.9 of GPU 0, started with sleep mode); the file asks for 0.85: parallel does not fit,
    and its 15 GiB of weights fit in the host's 60 GiB free memory. `answers`: what the engine says to
    each control path (200 unless told), every call logged as ("engine", "PATH@SLOT")."""

    def __init__(self, tmp_path: Path, fail=None, answers=None, old_update: str = "sleep"):
        self.tmp = tmp_path
        self.before = self._desired(config(0.9, old_update))
        self.after = self._desired(config(0.85))
        self.log = Log()
        self.rt = FakeRuntime(self.log)
        self.rt.add_existing(self.before.router.container)
        self.rt.add_existing(self.before.models["alpha"].container)
        self.waits = FakeWaits(self.log, fail=fail)
        self.routes = FakeRoutes(self.log, self.before.router.settings, {r.alias: r for r in self.before.router.routes})
        self.reporter = FakeReporter()
        (tmp_path / "state").mkdir(exist_ok=True)
        self.journal = Journal(tmp_path / "state")
        self.interrupted = threading.Event()
        self.answers = dict(answers or {})
        self.calls: list[tuple[str, str, str]] = []

    def _desired(self, text: str):
        return build_desired(load_config(str(write_config(self.tmp, text))), host_context(Path("/store")))

    def plan(self):
        files = render_files(self.before.router.settings, list(self.before.router.routes))
        seen = parse_state("lab", self.rt.list_containers(), self.rt.list_images(), files, {})
        nvml = {"available": True, "gpus": [{"index": 0, "memory_total": 80 * GIB, "memory_used": 0, "processes": []}]}
        ledger = tuple(gpu_ledger.build(self.after, nvml, {"alpha": {"weights": 15 * GIB}}, set()))
        return build_plan(self.after, seen, PlanFacts(gpu_ledger=ledger, host_memory_free=60 * GIB), PlanRequest())

    def call(self, address, method: str, path: str) -> tuple[int, str]:
        slot = "b" if address.socket.endswith("engine-b.sock") else "a"
        self.log.add("engine", f"{path}@{slot}")
        return self.answers.get(path, (200, "{}"))

    def run(self, plan):
        executor = Executor(
            self.rt,
            self.reporter,
            self.journal,
            routes=self.routes,
            interrupted=self.interrupted,
            make_waiter=self.waits,
            wait_router=no_router_wait(self.log),
            call=self.call,
        )
        return executor.run(plan)

    def before_(self, *steps: tuple) -> None:
        where = [self.log.index(*step) for step in steps]
        assert where == sorted(where), f"expected {steps} in this order; calls: {self.log.ops()}"

    def outcome(self, report):
        (found,) = [o for o in report.outcomes if o.address == "model.alpha"]
        return found


SLEEP = "/sleep?level=1&mode=wait@a"


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path, monkeypatch):
    """The project's lock and sockets folder in the test's own folder, not this account's state."""
    monkeypatch.setenv("AIGO_STATE_DIR", str(tmp_path / "state"))


def test_the_old_engine_sleeps_while_the_new_one_starts_beside_it_and_goes_once_it_serves(tmp_path):
    w = World(tmp_path)
    plan = w.plan()
    (action,) = [a for a in plan.actions if a.model == "alpha"]
    assert (action.kind, action.strategy.name, action.slot) == ("recreate", "sleep", "b")

    report = w.run(plan)

    alpha = w.outcome(report)
    assert (alpha.ok, alpha.restored) == (True, False), alpha
    assert "the previous one, asleep, was removed" in alpha.message
    w.before_(
        ("hold", "alpha->b"),  # no request reaches an engine about to sleep; the held go to the new one...
        ("drain", "router"),  # ...the ones it has finish...
        ("engine", SLEEP),  # ...then it sleeps, on its own socket
        ("create", NEXT),  # the new engine on the other socket, in the memory the old one freed
        ("start", NEXT),
        ("wait_end", "alpha"),
        ("route_add", "alpha"),  # the route moves to it...
        ("release", "alpha"),  # ...the held requests go on to it...
        ("stop", OLD),  # ...and only then does the sleeping one go
        ("remove", OLD),
        ("rename", f"{NEXT}->{OLD}"),
    )
    assert w.log.count("engine", "/wake_up@a") == 0 and w.log.count("route_remove", "alpha") == 0
    assert w.routes.routes["alpha"].slot == "b" and w.routes.held == set()
    assert w.rt.specs[w.rt.id_of(OLD)].labels["io.aigo-apply.slot"] == "b"
    (engine,) = w.waits.engines
    assert engine.address.socket.endswith("/sockets/alpha/engine-b.sock")
    steps = [json.loads(line)["step"] for line in w.journal.path.read_text().splitlines()]
    assert steps.index("sleep") < steps.index("route_moved") < steps.index("remove_previous")


def test_a_new_engine_that_fails_is_removed_and_the_old_one_wakes_and_takes_its_route_back(tmp_path):
    w = World(tmp_path, fail={"alpha": 1})
    report = w.run(w.plan())

    alpha = w.outcome(report)
    assert (alpha.ok, alpha.restored) == (False, True), alpha
    assert f"the previous {OLD} woke in" in alpha.message and "serves again" in alpha.message
    assert alpha.log_tail == ["engine: out of memory"]
    w.before_(
        ("engine", SLEEP),
        ("create", NEXT),
        ("wait_failed", "alpha"),
        ("remove", NEXT),  # the new, unready one goes...
        ("engine", "/wake_up@a"),  # ...the old one wakes...
        ("wait_begin", "alpha", 1),  # ...is proven serving...
        ("route_add", "alpha"),  # ...takes its route back...
        ("release", "alpha"),  # ...and the held requests go on to it
    )
    assert w.log.count("stop", OLD) == 0 and w.log.count("start", OLD) == 0  # no whole start
    assert w.rt.id_of(OLD) == f"old-{OLD}" and NEXT not in w.rt.containers
    assert w.routes.routes["alpha"].slot == "a" and w.routes.held == set()
    assert w.waits.engines[1].container == OLD and w.waits.engines[1].address.socket.endswith("/alpha/engine.sock")


def test_an_old_engine_that_cannot_be_woken_is_restarted_and_routed(tmp_path):
    w = World(tmp_path, fail={"alpha": 1}, answers={"/wake_up": (500, "wake failed")})
    alpha = w.outcome(w.run(w.plan()))
    assert (alpha.ok, alpha.restored) == (False, True) and "the previous version was restored" in alpha.message
    w.before_(
        ("engine", "/wake_up@a"), ("stop", OLD), ("start", OLD), ("wait_begin", "alpha", 1), ("route_add", "alpha")
    )
    assert w.routes.routes["alpha"].slot == "a" and w.routes.held == set()


def test_an_old_engine_that_will_not_sleep_changes_nothing_and_serves_on(tmp_path):
    w = World(tmp_path, answers={"/sleep?level=1&mode=wait": (400, "Sleep mode is not enabled")})
    alpha = w.outcome(w.run(w.plan()))
    assert not alpha.ok and "could not be put to sleep (it answered 400 Sleep mode is not enabled)" in alpha.message
    assert "update: recreate" in alpha.message
    assert w.log.count("create", NEXT) == 0 and w.log.count("stop", OLD) == 0
    assert w.routes.routes["alpha"].slot == "a" and w.routes.held == set()


def test_an_interrupt_during_the_new_engines_start_wakes_the_old_one(tmp_path):
    w = World(tmp_path)
    w.waits.on_begin = lambda engine: w.interrupted.set()
    w.waits.seconds = 5.0  # the interrupt ends the wait early
    alpha = w.outcome(w.run(w.plan()))
    assert (alpha.ok, alpha.restored, alpha.message) == (False, True, "interrupted")
    w.before_(("engine", SLEEP), ("remove", NEXT), ("engine", "/wake_up@a"), ("release", "alpha"))
    assert w.log.count("stop", OLD) == 0 and w.routes.routes["alpha"].slot == "a"


@pytest.mark.parametrize(
    "why",
    ["fails", "will not sleep", "interrupted"],
)
def test_where_the_route_did_not_move_the_held_requests_reach_the_old_engine_through_a_link(tmp_path, monkeypatch, why):
    """The router's worker that held the requests sends them to the new engine's socket (its
    configuration since the hold): on every way back, that path leads to the old engine's socket
    until the held requests are answered (the router drained), then the link goes."""
    fail = {"alpha": 1} if why == "fails" else None
    answers = {"/sleep?level=1&mode=wait": (400, "no")} if why == "will not sleep" else None
    w = World(tmp_path, fail=fail, answers=answers)
    if why == "interrupted":
        w.waits.on_begin = lambda engine: w.interrupted.set()
        w.waits.seconds = 5.0
    plan = w.plan()
    (action,) = [a for a in plan.actions if a.model == "alpha"]
    folder = Path(action.spec["socket"])
    folder.mkdir(parents=True)
    (folder / "engine-b.sock").write_text("")  # what a removed engine leaves
    seen = []
    release = w.routes.release

    def released(alias):
        link = folder / "engine-b.sock"
        seen.append((os.readlink(link) if link.is_symlink() else None, w.routes.routes["alpha"].slot))
        release(alias)

    w.routes.release = released
    w.outcome(w.run(plan))
    assert seen == [("engine.sock", "a")], seen  # routed back to the old engine, held ones linked to it
    assert w.log.index("release", "alpha") < w.log.index("drain", "router", w.log.count("drain", "router") - 1)
    assert not (folder / "engine-b.sock").is_symlink()  # the link goes once they are answered
