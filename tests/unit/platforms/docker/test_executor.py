"""The executor on an in-memory runtime (tests/helpers/fakes.py): the order of its side effects, GPU
lanes, recreate with restore, remove, refusals and interrupts. Plans are made by the real pure
core (config -> desired -> observed -> planner), never written by hand."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from aigo_apply.desired.build import build_desired
from aigo_apply.desired.types import EngineAddress
from aigo_apply.errors import AigoError, DockerUnavailable
from aigo_apply.observe.config_file import load_config
from aigo_apply.observe.containers import parse_state
from aigo_apply.plan.facts import PlanRequest
from aigo_apply.plan.planner import build_plan
from aigo_apply.platforms.docker.executor import Executor, Interrupted
from aigo_apply.platforms.journal import Journal
from aigo_apply.router.haproxy import render_files

from helpers.configs import host_context, write_config
from helpers.fakes import FakeReporter, FakeRoutes, FakeRuntime, FakeWaits, Log, no_router_wait, overlap

HEAD = """\
version: 1
project: lab
engines: {vllm: {image: local/engine, image_tag: "1"}}
defaults: {gpu_memory_utilization: 0.3}
models:
"""


def config(**models: str) -> str:
    """A file whose models (in argument order) have the given `gpus:` value; a value may carry more
    lines of the model after a newline."""
    text = HEAD
    for alias, rest in models.items():
        gpus, _, extra = rest.partition("\n")
        text += f"  {alias}:\n    source: {{path: /m/{alias}}}\n    context_length: 4096\n    gpus: {gpus}\n"
        text += "".join(f"    {line}\n" for line in extra.splitlines())
    return text


def desired(tmp_path: Path, text: str):
    return build_desired(load_config(str(write_config(tmp_path, text))), host_context(Path("/store")))


def machine(d, rt: FakeRuntime, router: bool = True, states: dict[str, str] | None = None) -> None:
    """The containers an earlier apply of `d` left on the machine."""
    if router:
        rt.add_existing(d.router.container)
    for alias, model in d.models.items():
        rt.add_existing(model.container, (states or {}).get(alias, "running"))


def observe(files_of, rt: FakeRuntime, images=None):
    """What observe() would read: the fake runtime's containers and images (or `images`), and the
    router files an apply of desired state `files_of` deployed."""
    files = render_files(files_of.router.settings, list(files_of.router.routes))
    return parse_state("lab", rt.list_containers(), rt.list_images() if images is None else images, files, {})


def plan_of(d, seen, replace=(), target=()):
    return build_plan(d, seen, None, PlanRequest(replace=frozenset(replace), target=frozenset(target)))


def kinds(plan, models_only=False) -> dict[str, str]:
    return {
        a.address: a.kind
        for a in plan.actions
        if a.kind != "pull" and (a.address.startswith("model.") or not models_only)
    }


class World:
    """One executor with every collaborator faked, sharing one call log."""

    def __init__(self, tmp_path: Path, d, seconds: float = 0.0, fail=None, routed=None, on_begin=None, together=()):
        self.log = Log()
        self.rt = FakeRuntime(self.log)
        self.waits = FakeWaits(self.log, seconds=seconds, fail=fail, on_begin=on_begin, together=together)
        routes = {r.alias: r for r in d.router.routes if routed is None or r.alias in routed}
        self.routes = FakeRoutes(self.log, d.router.settings, routes if routed is not None else {})
        self.reporter = FakeReporter()
        (tmp_path / "state").mkdir(exist_ok=True)
        self.journal = Journal(tmp_path / "state")
        self.interrupted = threading.Event()

    def run(self, plan, routes=True):
        executor = Executor(
            self.rt,
            self.reporter,
            self.journal,
            routes=self.routes if routes else None,
            interrupted=self.interrupted,
            make_waiter=self.waits,
            wait_router=no_router_wait(self.log),
        )
        return executor.run(plan)

    def journal_entries(self) -> list[dict]:
        return [json.loads(line) for line in self.journal.path.read_text(encoding="utf-8").splitlines()]

    def before(self, *steps: tuple[str, str]) -> None:
        """The calls happened in this order (each the first of its kind unless given a third item)."""
        where = [self.log.index(*step) for step in steps]
        assert where == sorted(where), f"expected {steps} in this order; calls: {self.log.ops()}"


def outcome(report, address):
    found = [o for o in report.outcomes if o.address == address]
    assert len(found) == 1, report.outcomes
    return found[0]


# -- create ---------------------------------------------------------------------------------------


def test_create_two_models_waits_for_each_before_routing_it(tmp_path):
    d = desired(tmp_path, config(alpha="none\nready_timeout: 45", beta="[0]"))
    w = World(tmp_path, d, routed=())
    plan = plan_of(d, observe(d, w.rt, images=[]))  # an empty machine: the images are pulled first
    assert kinds(plan) == {"model.alpha": "create", "model.beta": "create", "router": "create"}

    report = w.run(plan)

    assert not report.interrupted and not report.failed
    assert {(o.address, o.kind, o.ok) for o in report.outcomes} >= {
        ("router", "create", True),
        ("model.alpha", "create", True),
        ("model.beta", "create", True),
    }
    for alias in ("alpha", "beta"):
        name = f"aigo-lab-{alias}"
        # pulled first; the router serves before any route changes; ready before routed
        w.before(
            ("pull", "local/engine:1"),
            ("create", name),
            ("start", name),
            ("wait_begin", alias),
            ("wait_end", alias),
            ("route_add", alias),
        )
        w.before(("wait_router", "8000"), ("route_add", alias))
        assert w.rt.state_of(name) == "running"
        assert w.rt.specs[w.rt.id_of(name)] == d.models[alias].container
        route = w.routes.routes[alias]
        assert (route.port, route.max_model_len) == (None, 4096)  # on its Unix socket
    # the waiter watched the new container, on its socket, already started
    engines = {e.alias: (e.container, e.address) for e in w.waits.engines}
    assert engines == {a: (w.rt.id_of(f"aigo-lab-{a}"), EngineAddress.of(d.models[a].spec)) for a in ("alpha", "beta")}
    assert engines["alpha"][1].socket == f"{d.router.spec['sockets_dir']}/alpha/engine.sock"
    assert all(s["Running"] for s in w.waits.states)
    assert sorted(w.waits.timeouts) == [45, 1800]
    w.before(("create", "aigo-lab-router"), ("start", "aigo-lab-router"), ("wait_router", "8000"))
    assert w.log.ops()[-1] == ("converge", "alpha,beta")  # the last word: exactly the ready models

    entries = w.journal_entries()
    assert (entries[0]["step"], entries[0]["outcome"]) == ("apply", "started")
    assert (entries[-1]["step"], entries[-1]["outcome"], entries[-1]["failed"]) == ("apply", "finished", [])
    alpha = [(e["step"], e["outcome"]) for e in entries if e["address"] == "model.alpha"]
    assert alpha == [("create", "begin"), ("route_add", "ok"), ("create", "ok")]
    assert w.reporter.steps("model.beta") == [("create", ""), ("create", "ok")]


# -- GPU lanes ------------------------------------------------------------------------------------


def test_models_sharing_a_gpu_start_one_after_the_other(tmp_path):
    d = desired(tmp_path, config(alpha="[0]", beta="[0, 1]"))
    w = World(tmp_path, d)
    plan = plan_of(d, observe(d, w.rt), target=["alpha", "beta"])
    assert kinds(plan, models_only=True) == {"model.alpha": "create", "model.beta": "create"}

    report = w.run(plan, routes=False)

    assert [(o.address, o.ok) for o in report.outcomes] == [("model.alpha", True), ("model.beta", True)]
    # beta is not even created until alpha is ready (two vLLMs loading on one GPU mis-measure memory)
    w.before(("wait_end", "alpha"), ("create", "aigo-lab-beta"))
    assert not overlap(w.log.intervals("alpha")[0], w.log.intervals("beta")[0])


def test_models_on_disjoint_gpus_and_without_gpus_load_at_the_same_time(tmp_path):
    d = desired(tmp_path, config(alpha="[0]", beta="[1]", gamma="none", delta="none"))
    w = World(tmp_path, d, together=("alpha", "beta", "gamma", "delta"))  # each wait returns once all four began
    plan = plan_of(d, observe(d, w.rt), target=["alpha", "beta", "gamma", "delta"])

    report = w.run(plan, routes=False)

    assert len(report.outcomes) == 4 and not report.failed
    assert not w.log.ops("wait_apart"), w.log.ops()  # one after the other, the first would wait for the rest alone
    spans = {a: w.log.intervals(a)[0] for a in ("alpha", "beta", "gamma", "delta")}
    for a in spans:
        for b in spans:
            if a < b:
                assert overlap(spans[a], spans[b]), (a, b, spans)


@pytest.mark.parametrize(
    "gpus",
    [{"alpha": "[0]", "beta": "[1]", "gamma": "all"}, {"alpha": "all", "beta": "[0]", "gamma": "[1]"}],
    ids=["all-last", "all-first"],
)
def test_gpus_all_goes_alone_among_the_gpu_models(tmp_path, gpus):
    d = desired(tmp_path, config(**gpus, delta="none"))
    w = World(tmp_path, d, together=("alpha", "delta"))  # the first GPU model and the one without GPUs
    plan = plan_of(d, observe(d, w.rt), target=list(d.models))

    report = w.run(plan, routes=False)

    assert len(report.outcomes) == 4 and not report.failed
    spans = {a: w.log.intervals(a)[0] for a in ("alpha", "beta", "gamma", "delta")}
    every = next(a for a, g in gpus.items() if g == "all")
    others = [a for a in gpus if a != every]
    for other in others:
        assert not overlap(spans[every], spans[other]), (every, other, spans)
    if every == "alpha":  # first in plan order: the GPU models wait for it
        for other in others:
            w.before(("wait_end", "alpha"), ("create", f"aigo-lab-{other}"))
    else:
        for other in others:
            w.before(("wait_end", other), ("create", f"aigo-lab-{every}"))
    # a model without GPUs waits for none of them
    assert overlap(spans["delta"], spans["alpha"]) and not w.log.ops("wait_apart"), w.log.ops()


def test_a_model_on_two_gpus_joins_the_lanes_of_both(tmp_path):
    d = desired(tmp_path, config(alpha="[0]", beta="[1]", gamma="[0, 1]"))
    w = World(tmp_path, d)
    plan = plan_of(d, observe(d, w.rt), target=list(d.models))

    w.run(plan, routes=False)

    w.before(("wait_end", "alpha"), ("create", "aigo-lab-gamma"))
    w.before(("wait_end", "beta"), ("create", "aigo-lab-gamma"))


# -- recreate -------------------------------------------------------------------------------------


def test_recreate_keeps_the_old_container_until_the_new_one_is_ready(tmp_path):
    d = desired(tmp_path, config(alpha="none\nupdate: recreate", beta="none\nupdate: recreate"))
    w = World(tmp_path, d, routed=("alpha", "beta"))
    machine(d, w.rt)
    plan = plan_of(d, observe(d, w.rt), replace=["alpha"])
    assert kinds(plan) == {"model.alpha": "recreate", "model.beta": "noop", "router": "noop"}

    report = w.run(plan)

    alpha = outcome(report, "model.alpha")
    assert (alpha.kind, alpha.ok, alpha.restored) == ("recreate", True, False)
    w.before(
        ("hold", "alpha"),  # the router holds its new requests...
        ("drain", "router"),  # ...the ones it forwarded finish...
        ("stop", "aigo-lab-alpha"),  # ...and only then does the old engine stop
        ("rename", "aigo-lab-alpha->aigo-lab-alpha-aigo-previous"),
        ("create", "aigo-lab-alpha"),
        ("start", "aigo-lab-alpha"),
        ("wait_begin", "alpha"),
        ("wait_end", "alpha"),
        ("route_add", "alpha"),
        ("remove", "aigo-lab-alpha-aigo-previous"),
        ("release", "alpha"),  # the held requests go on to the new engine
    )
    assert w.log.count("route_remove", "alpha") == 0 and w.routes.held == set()
    assert w.rt.id_of("aigo-lab-alpha").startswith("new-") and w.rt.state_of("aigo-lab-alpha") == "running"
    assert "aigo-lab-alpha-aigo-previous" not in w.rt.containers
    assert w.waits.engines[0].container == w.rt.id_of("aigo-lab-alpha")  # the new one was waited for
    assert not [c for c in w.log.ops() if c[1] == "aigo-lab-beta"]  # beta untouched
    assert set(w.routes.routes) == {"alpha", "beta"}
    steps = [(e["step"], e["outcome"]) for e in w.journal_entries() if e["address"] == "model.alpha"]
    assert steps.index(("backup", "ok")) < steps.index(("route_add", "ok")) < steps.index(("remove_backup", "ok"))


def test_recreate_restores_the_previous_version_when_the_new_one_is_not_ready(tmp_path):
    before = desired(tmp_path, config(alpha="none\nport: 9001", beta="none"))
    after = desired(tmp_path, config(alpha="none\nport: 9002", beta="none"))
    w = World(tmp_path, before, fail={"alpha": 1}, routed=("alpha", "beta"))
    machine(before, w.rt)
    plan = plan_of(after, observe(before, w.rt))
    assert kinds(plan)["model.alpha"] == "recreate"

    report = w.run(plan)

    alpha = outcome(report, "model.alpha")
    assert (alpha.ok, alpha.restored) == (False, True)
    assert "the previous version was restored" in alpha.message
    assert alpha.log_tail == ["engine: out of memory"]
    assert report.failed == [alpha]
    w.before(
        ("rename", "aigo-lab-alpha->aigo-lab-alpha-aigo-previous"),
        ("create", "aigo-lab-alpha"),
        ("wait_failed", "alpha"),
        ("remove", "aigo-lab-alpha"),  # the new, unready one
        ("rename", "aigo-lab-alpha-aigo-previous->aigo-lab-alpha"),
        ("wait_begin", "alpha", 1),
        ("wait_end", "alpha"),
        ("route_add", "alpha"),
    )
    assert w.log.index("start", "aigo-lab-alpha", 1) > w.log.index(
        "rename", "aigo-lab-alpha-aigo-previous->aigo-lab-alpha"
    )
    # the old container serves again, on its old port, and is routed there
    assert w.rt.id_of("aigo-lab-alpha") == "old-aigo-lab-alpha" and w.rt.state_of("aigo-lab-alpha") == "running"
    assert set(w.rt.containers) == {"aigo-lab-router", "aigo-lab-alpha", "aigo-lab-beta"}
    assert [(e.container, e.address.port) for e in w.waits.engines][1] == ("aigo-lab-alpha", 9001)
    assert w.waits.engines[0].address.port == 9002
    assert w.routes.routes["alpha"].port == 9001
    assert ("log_tail", {"address": "model.alpha", "lines": ["engine: out of memory"]}) in w.reporter.events
    steps = [(e["step"], e["outcome"]) for e in w.journal_entries() if e["address"] == "model.alpha"]
    assert ("restore", "ok") in steps and ("remove_backup", "ok") not in steps


@pytest.mark.parametrize("how", ["recreate", "create", "parallel"])
def test_a_failed_start_keeps_the_engines_whole_log_before_its_container_goes(tmp_path, how):
    from aigo_apply.platforms.docker import failed_starts

    if how == "create":
        before = after = desired(tmp_path, config(alpha="none", beta="none"))
    else:
        way = "update: parallel\nenv: {X: '%s'}" if how == "parallel" else "update: recreate\nport: 900%s"
        before = desired(tmp_path, config(alpha="none\n" + way % "1", beta="none"))
        after = desired(tmp_path, config(alpha="none\n" + way % "2", beta="none"))
    w = World(tmp_path, before, fail={"alpha": 1}, routed=("alpha", "beta"))
    if how == "create":
        machine(before, w.rt, states={"beta": "running"})
        w.rt.remove("aigo-lab-alpha")
    else:
        machine(before, w.rt)
    long_log = [f"loading {i}" for i in range(300)] + ["ValueError: the real cause"] + [f"  at {i}" for i in range(50)]
    new_name = "aigo-lab-alpha-aigo-next" if how == "parallel" else "aigo-lab-alpha"
    w.rt.logs[new_name] = long_log

    report = w.run(plan_of(after, observe(before, w.rt)))

    alpha = outcome(report, "model.alpha")
    assert not alpha.ok and "the engine's log says: ValueError: the real cause" in alpha.message, alpha.message
    assert "aigo-apply logs alpha --failed" in alpha.message
    kept = failed_starts.newest(tmp_path / "state", "alpha")
    assert kept is not None and failed_starts.read_log(kept).splitlines() == long_log  # read before it was removed
    assert kept.container == new_name.removesuffix("-aigo-next") or kept.container == new_name
    assert ("failed_start", "kept") in [(e["step"], e["outcome"]) for e in w.journal_entries()]


def test_recreate_whose_previous_version_is_not_ready_either_leaves_it_unrouted(tmp_path):
    d = desired(tmp_path, config(alpha="none\nupdate: recreate"))
    w = World(tmp_path, d, fail={"alpha": 2}, routed=("alpha",))
    machine(d, w.rt)
    plan = plan_of(d, observe(d, w.rt), replace=["alpha"])

    report = w.run(plan)

    alpha = outcome(report, "model.alpha")
    assert (alpha.ok, alpha.restored) == (False, True) and "not ready either" in alpha.message
    assert w.log.count("wait_failed", "alpha") == 2 and w.log.count("route_add", "alpha") == 0
    assert w.rt.id_of("aigo-lab-alpha") == "old-aigo-lab-alpha"


# -- remove ---------------------------------------------------------------------------------------


def test_remove_takes_the_route_away_before_stopping_the_container(tmp_path):
    before = desired(tmp_path, config(alpha="none", beta="none"))
    after = desired(tmp_path, config(alpha="none"))
    w = World(tmp_path, before, routed=("alpha", "beta"))
    machine(before, w.rt)
    plan = plan_of(after, observe(before, w.rt))
    assert kinds(plan) == {"model.alpha": "noop", "model.beta": "remove", "router": "reload_router"}

    report = w.run(plan)

    assert (outcome(report, "model.beta").kind, outcome(report, "model.beta").ok) == ("remove", True)
    w.before(("route_remove", "beta"), ("stop", "aigo-lab-beta"), ("remove", "aigo-lab-beta"))
    assert "aigo-lab-beta" not in w.rt.containers and w.rt.state_of("aigo-lab-alpha") == "running"
    assert w.log.ops()[-1] == ("converge", "alpha") and set(w.routes.routes) == {"alpha"}


# -- refusals -------------------------------------------------------------------------------------


def test_a_start_docker_refuses_fails_that_model_and_the_next_in_its_lane_goes_on(tmp_path):
    d = desired(tmp_path, config(alpha="[0]", beta="[0]"))
    w = World(tmp_path, d, routed=())
    w.rt.fail_start["aigo-lab-alpha"] = DockerUnavailable("port 22602 is already allocated")
    plan = plan_of(d, observe(d, w.rt))

    report = w.run(plan)

    alpha, beta = outcome(report, "model.alpha"), outcome(report, "model.beta")
    assert not alpha.ok and "already allocated" in alpha.message and "the container was removed" in alpha.message
    assert beta.ok and [o.address for o in report.failed] == ["model.alpha"]
    assert "aigo-lab-alpha" not in w.rt.containers  # never left half-made
    assert w.log.count("wait_begin", "alpha") == 0 and "alpha" not in w.routes.routes
    w.before(("remove", "aigo-lab-alpha"), ("create", "aigo-lab-beta"), ("wait_end", "beta"), ("route_add", "beta"))
    assert w.rt.state_of("aigo-lab-beta") == "running"
    assert w.journal_entries()[-1]["failed"] == ["model.alpha"]
    assert w.reporter.steps("model.alpha")[-1] == ("create", "failed")


def test_a_stopped_model_that_will_not_start_fails_alone(tmp_path):
    d = desired(
        tmp_path, config(alpha="[0]\nupdate: recreate", beta="[0]\nupdate: recreate")
    )  # one lane: beta comes after alpha
    w = World(tmp_path, d, routed=("beta",))
    machine(d, w.rt, states={"alpha": "exited"})
    w.rt.fail_start["aigo-lab-alpha"] = AigoError("Docker refused to start aigo-lab-alpha")
    plan = plan_of(d, observe(d, w.rt), replace=["beta"])
    assert kinds(plan)["model.alpha"] == "start" and kinds(plan)["model.beta"] == "recreate"

    report = w.run(plan)

    alpha, beta = outcome(report, "model.alpha"), outcome(report, "model.beta")
    assert (alpha.kind, alpha.ok) == ("start", False) and "refused" in alpha.message
    assert (beta.kind, beta.ok) == ("recreate", True)
    assert w.log.count("wait_begin", "alpha") == 0 and "alpha" not in w.routes.routes
    assert w.rt.id_of("aigo-lab-beta").startswith("new-")
    w.before(("start", "aigo-lab-alpha"), ("create", "aigo-lab-beta"))


# -- interrupts -----------------------------------------------------------------------------------


def test_interrupted_before_the_run_starts_no_step(tmp_path):
    d = desired(tmp_path, config(alpha="none", beta="[0]"))
    w = World(tmp_path, d)
    w.interrupted.set()

    report = w.run(plan_of(d, observe(d, w.rt), target=["alpha", "beta"]), routes=False)

    assert report.interrupted and report.outcomes == []
    assert w.log.ops() == [] and w.rt.containers == {}
    assert w.journal_entries()[-1]["outcome"] == "interrupted"
    # with pulls and a router to make, the run stops before the first of them
    with pytest.raises(Interrupted):
        w.run(plan_of(d, observe(d, w.rt, images=[])))
    assert w.log.ops() == []


def test_interrupt_during_a_wait_removes_the_new_container_and_starts_nothing_more(tmp_path):
    d = desired(tmp_path, config(alpha="[0]", beta="[0]"))
    holder = {}
    w = World(tmp_path, d, seconds=5.0, on_begin=lambda engine: holder["event"].set())
    holder["event"] = w.interrupted
    plan = plan_of(d, observe(d, w.rt), target=["alpha", "beta"])

    began = time.monotonic()
    report = w.run(plan)

    assert time.monotonic() - began < 2  # the wait stopped at once
    assert report.interrupted
    alpha = outcome(report, "model.alpha")
    assert (alpha.ok, alpha.message) == (False, "interrupted")
    assert w.log.count("create", "aigo-lab-beta") == 0  # no new step
    assert "aigo-lab-alpha" not in w.rt.containers  # the unready alpha was removed
    assert not [c for c in w.log.ops() if c[0] in ("route_add", "converge")]
    assert w.journal_entries()[-1]["outcome"] == "interrupted"


def test_interrupt_during_a_recreate_puts_the_old_container_back(tmp_path):
    d = desired(tmp_path, config(alpha="none\nupdate: recreate"))
    holder = {}
    w = World(tmp_path, d, seconds=5.0, routed=("alpha",), on_begin=lambda engine: holder["event"].set())
    holder["event"] = w.interrupted
    machine(d, w.rt)
    plan = plan_of(d, observe(d, w.rt), replace=["alpha"])

    report = w.run(plan)

    alpha = outcome(report, "model.alpha")
    assert (alpha.ok, alpha.restored, alpha.message) == (False, True, "interrupted")
    assert report.interrupted
    w.before(
        ("wait_failed", "alpha"),
        ("remove", "aigo-lab-alpha"),
        ("rename", "aigo-lab-alpha-aigo-previous->aigo-lab-alpha"),
    )
    assert w.log.index("start", "aigo-lab-alpha", 1) > w.log.index(
        "rename", "aigo-lab-alpha-aigo-previous->aigo-lab-alpha"
    )
    assert w.log.count("wait_begin", "alpha") == 1  # the old one is started, not waited for
    assert w.rt.id_of("aigo-lab-alpha") == "old-aigo-lab-alpha" and w.rt.state_of("aigo-lab-alpha") == "running"
    assert "aigo-lab-alpha-aigo-previous" not in w.rt.containers
    # the previous version serves again, so it is routed again (the router's health check holds it
    # back until it answers): an interrupted apply leaves no serving model unrouted
    assert "alpha" in w.routes.routes
    assert w.log.index("route_add", "alpha") > w.log.index("start", "aigo-lab-alpha", 1)


def test_a_started_model_that_does_not_become_ready_fails_with_its_log_tail_and_no_route(tmp_path):
    d = desired(tmp_path, config(alpha="[0]", beta="[0]"))
    w = World(tmp_path, d, fail={"alpha": 1})
    machine(d, w.rt, states={"alpha": "exited"})
    plan = plan_of(d, observe(d, w.rt), replace=["beta"])
    assert kinds(plan)["model.alpha"] == "start"

    report = w.run(plan)

    alpha, beta = outcome(report, "model.alpha"), outcome(report, "model.beta")
    assert (alpha.kind, alpha.ok) == ("start", False) and alpha.log_tail == ["engine: out of memory"]
    assert "no route was added" in alpha.message
    assert ("log_tail", {"address": "model.alpha", "lines": ["engine: out of memory"]}) in w.reporter.events
    assert "alpha" not in w.routes.routes and beta.ok  # the next model of the lane goes on


# -- a recreate that cannot even begin, or whose route is refused ----------------------------------


def test_a_recreate_whose_rename_fails_keeps_the_old_container_serving_and_routed(tmp_path):
    """The rename to `-aigo-previous` fails (e.g. a container of that name appeared since the plan):
    the old container was stopped, so it is started again, waited for and routed again."""
    d = desired(tmp_path, config(alpha="none\nupdate: recreate"))
    w = World(tmp_path, d, routed=("alpha",))
    machine(d, w.rt)
    w.rt.fail_rename["aigo-lab-alpha"] = DockerUnavailable("Conflict: the name is already in use")
    plan = plan_of(d, observe(d, w.rt), replace=["alpha"])

    report = w.run(plan)

    alpha = outcome(report, "model.alpha")
    assert not alpha.ok and "already in use" in alpha.message and "restored and serves again" in alpha.message
    assert w.rt.id_of("aigo-lab-alpha") == "old-aigo-lab-alpha" and w.rt.state_of("aigo-lab-alpha") == "running"
    assert "alpha" in w.routes.routes and w.log.count("create", "aigo-lab-alpha") == 0
    w.before(("hold", "alpha"), ("stop", "aigo-lab-alpha"), ("start", "aigo-lab-alpha"), ("release", "alpha"))


def test_a_recreate_whose_stop_is_refused_routes_the_running_old_container_again(tmp_path):
    d = desired(tmp_path, config(alpha="none"))
    w = World(tmp_path, d, routed=("alpha",))
    machine(d, w.rt)
    w.rt.fail_stop["aigo-lab-alpha"] = DockerUnavailable("the daemon timed out")
    plan = plan_of(d, observe(d, w.rt), replace=["alpha"])

    report = w.run(plan)

    alpha = outcome(report, "model.alpha")
    assert not alpha.ok and "the daemon timed out" in alpha.message
    assert w.rt.state_of("aigo-lab-alpha") == "running" and w.log.count("start", "aigo-lab-alpha") == 0
    assert "alpha" in w.routes.routes  # deroute, refused stop, routed again: never left unrouted


def test_a_recreate_whose_new_route_is_refused_puts_the_old_version_back_and_routed(tmp_path):
    before = desired(tmp_path, config(alpha="none\nport: 9001"))
    after = desired(tmp_path, config(alpha="none\nport: 9002"))
    w = World(tmp_path, before, routed=("alpha",))
    machine(before, w.rt)
    w.routes.fail_add[("alpha", 9002)] = "haproxy -c refused the configuration"
    plan = plan_of(after, observe(before, w.rt))

    report = w.run(plan)

    alpha = outcome(report, "model.alpha")
    assert (alpha.ok, alpha.restored) == (False, True) and "haproxy -c refused" in alpha.message
    assert w.rt.id_of("aigo-lab-alpha") == "old-aigo-lab-alpha" and w.routes.routes["alpha"].port == 9001
    assert set(w.rt.containers) == {"aigo-lab-router", "aigo-lab-alpha"}


def test_a_restored_version_whose_route_is_refused_too_is_a_clear_failure_not_a_crash(tmp_path):
    before = desired(tmp_path, config(alpha="none\nport: 9001"))
    after = desired(tmp_path, config(alpha="none\nport: 9002"))
    w = World(tmp_path, before, routed=("alpha",))
    machine(before, w.rt)
    w.routes.fail_add.update({("alpha", 9002): "router down", ("alpha", 9001): "router down"})

    report = w.run(plan_of(after, observe(before, w.rt)))

    alpha = outcome(report, "model.alpha")
    assert not alpha.ok and "restored and serves, but is not routed (router down)" in alpha.message
    assert w.rt.state_of("aigo-lab-alpha") == "running"


def test_a_created_model_whose_route_is_refused_is_removed(tmp_path):
    d = desired(tmp_path, config(alpha="none"))
    w = World(tmp_path, d, routed=())
    w.routes.fail_add[("alpha", None)] = "haproxy -c refused the configuration"  # its socket route

    report = w.run(plan_of(d, observe(d, w.rt)))

    alpha = outcome(report, "model.alpha")
    assert not alpha.ok and "the container was removed" in alpha.message
    assert "aigo-lab-alpha" not in w.rt.containers


def test_the_staging_check_never_outlives_its_step(tmp_path):
    d = desired(tmp_path, config(alpha="none"))
    w = World(tmp_path, d, routed=())
    w.routes.stage_seconds = 0.3  # slower than the engine's (fake) start

    w.run(plan_of(d, observe(d, w.rt)))

    assert w.routes.staged_done == ["alpha"]
    assert not [t for t in threading.enumerate() if t.name.startswith("aigo-stage-")]


# -- parallel replace -------------------------------------------------------------------------------


def test_a_parallel_replace_serves_throughout_and_the_new_engine_takes_the_name_and_the_other_socket(tmp_path):
    d = desired(tmp_path, config(alpha="none", beta="none"))
    w = World(tmp_path, d, routed=("alpha", "beta"))
    machine(d, w.rt)
    plan = plan_of(d, observe(d, w.rt), replace=["alpha"])
    (alpha_action,) = [a for a in plan.actions if a.address == "model.alpha"]
    assert (alpha_action.strategy.name, alpha_action.slot) == ("parallel", "b")

    report = w.run(plan)

    alpha = outcome(report, "model.alpha")
    assert (alpha.kind, alpha.ok, alpha.restored) == ("recreate", True, False)
    assert "the previous one drained" in alpha.message
    w.before(
        ("create", "aigo-lab-alpha-aigo-next"),
        ("start", "aigo-lab-alpha-aigo-next"),
        ("wait_end", "alpha"),
        ("route_add", "alpha"),  # the route moves to the new engine in one reload...
        ("drain", "router"),  # ...the requests the old one took are answered...
        ("stop", "aigo-lab-alpha"),  # ...and only then does the old one stop
        ("remove", "aigo-lab-alpha"),
        ("rename", "aigo-lab-alpha-aigo-next->aigo-lab-alpha"),
    )
    assert w.log.count("route_remove", "alpha") == 0  # never unrouted
    assert w.routes.routes["alpha"].slot == "b"
    assert w.routes.routes["alpha"].router_socket == "/run/aigo-engines/alpha/engine-b.sock"
    (engine,) = [e for e in w.waits.engines if e.alias == "alpha"]
    assert engine.address.socket.endswith("/sockets/alpha/engine-b.sock")
    new = w.rt.specs[w.rt.id_of("aigo-lab-alpha")]
    assert "/run/aigo/engine-b.sock" in new.command and "rm -f /run/aigo/engine-b.sock" in new.entrypoint[2]
    assert new.labels["io.aigo-apply.slot"] == "b"
    assert new.labels["io.aigo-apply.spec-hash"] == d.models["alpha"].container.definition_hash()
    # the next plan sees the same engine, on its second socket: nothing to do
    again = plan_of(d, observe(d, w.rt))
    assert kinds(again, models_only=True) == {"model.alpha": "noop", "model.beta": "noop"}
    assert [a.slot for a in again.actions if a.model == "alpha"] == ["b"]
    # and the one after replaces it back onto the first socket
    back = plan_of(d, observe(d, w.rt), replace=["alpha"])
    assert [a.slot for a in back.actions if a.address == "model.alpha"] == ["a"]


def test_a_new_engine_that_never_serves_is_removed_and_the_old_one_served_throughout(tmp_path):
    d = desired(tmp_path, config(alpha="none"))
    w = World(tmp_path, d, fail={"alpha": 1}, routed=("alpha",))
    machine(d, w.rt)
    report = w.run(plan_of(d, observe(d, w.rt), replace=["alpha"]))

    alpha = outcome(report, "model.alpha")
    assert (alpha.ok, alpha.restored) == (False, True)
    assert "the new engine was removed, and the previous aigo-lab-alpha served throughout" in alpha.message
    assert alpha.log_tail == ["engine: out of memory"]
    assert w.log.count("stop", "aigo-lab-alpha") == 0 and w.log.count("route_remove", "alpha") == 0
    assert w.log.count("remove", "aigo-lab-alpha-aigo-next") == 1
    assert w.rt.id_of("aigo-lab-alpha") == "old-aigo-lab-alpha" and w.rt.state_of("aigo-lab-alpha") == "running"
    assert w.routes.routes["alpha"].slot == "a"


def test_a_container_at_the_next_name_made_after_the_plan_stops_the_parallel_replace(tmp_path):
    d = desired(tmp_path, config(alpha="none"))
    w = World(tmp_path, d, routed=("alpha",))
    machine(d, w.rt)
    plan = plan_of(d, observe(d, w.rt), replace=["alpha"])
    from dataclasses import replace as copy

    w.rt.add_existing(copy(d.models["alpha"].container, name="aigo-lab-alpha-aigo-next", labels={}), cid="squatter")
    report = w.run(plan)
    alpha = outcome(report, "model.alpha")
    assert not alpha.ok and "aigo-lab-alpha-aigo-next exists" in alpha.message
    assert w.log.count("stop", "aigo-lab-alpha") == 0 and w.rt.id_of("aigo-lab-alpha-aigo-next") == "squatter"


def test_a_router_that_cannot_hold_takes_the_route_away_as_before(tmp_path):
    d = desired(tmp_path, config(alpha="none\nupdate: recreate"))
    w = World(tmp_path, d, routed=("alpha",))
    machine(d, w.rt)

    def refuse(alias, seconds, route=None, to=None):
        raise AigoError("haproxy -c refused the configuration")

    w.routes.hold = refuse
    report = w.run(plan_of(d, observe(d, w.rt), replace=["alpha"]))
    assert outcome(report, "model.alpha").ok
    w.before(("route_remove", "alpha"), ("drain", "router"), ("stop", "aigo-lab-alpha"), ("route_add", "alpha"))
    assert w.log.count("release", "alpha") == 0


def test_a_router_made_anew_routes_the_models_this_apply_replaces_to_the_engines_serving_them(tmp_path):
    """The router and a model change in one apply: the new router starts routing the replaced model to
    the engine that serves it now (else it would answer 404 "does not exist" from the router's start to
    the end of that model's replace), and the model's hold keeps a route to it."""
    before = desired(tmp_path, config(alpha="none\nupdate: recreate", beta="none"))
    after = desired(
        tmp_path, config(alpha="none\nupdate: recreate\nenv: {X: '2'}", beta="none") + "router: {port: 18999}\n"
    )
    w = World(tmp_path, before, routed=("alpha", "beta"))
    machine(before, w.rt)
    plan = plan_of(after, observe(before, w.rt))
    assert kinds(plan)["router"] == "recreate" and kinds(plan)["model.alpha"] == "recreate"

    report = w.run(plan)

    assert outcome(report, "model.alpha").ok
    assert ("prepare_first", "alpha,beta") in w.log.ops()  # alpha's old engine, not left out until it is ready
    w.before(("prepare_first", "alpha,beta"), ("hold", "alpha"), ("stop", "aigo-lab-alpha"))
