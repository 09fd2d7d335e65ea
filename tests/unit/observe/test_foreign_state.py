"""Labels are the state, so they are trusted only where the tool could have written them: a container
is this project's only when its labels are valid AND its name is the one the tool derives from them.
A container that is not ours but holds a name the tool creates or uses (an engine's, its
`-aigo-previous` copy, the router's) blocks the plan; apply and destroy never stop, remove or rename
it; and destroy removes the cache volume only when its labels say it is ours. On the in-memory
runtime (tests/helpers/fakes.py), with plans made by the real pure core."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from aigo_apply.adapters.docker_engine import _EngineEvents
from aigo_apply.desired import labels as L
from aigo_apply.errors import PlanFileError
from aigo_apply.observe.containers import parse_state, running_engines
from aigo_apply.plan.facts import PlanRequest
from aigo_apply.plan.planner import build_plan, destroy_plan
from aigo_apply.plan.types import Action, Plan
from aigo_apply.platforms.docker.executor import Executor
from aigo_apply.platforms.journal import Journal

from helpers.fakes import FakeReporter, FakeRoutes, FakeRuntime, FakeWaits, Log, no_router_wait
from helpers.planner_inputs import CONFIG, desired, observed, running


def entry(name: str, labels: dict[str, str] | None = None, state: str = "running", port: int | None = None):
    """A container as Docker's list call returns it (no labels: someone's own container)."""
    return {
        "Id": f"id-{name}",
        "Names": [f"/{name}"],
        "State": state,
        "Status": "Up 1 minute",
        "Image": "aigo-test-idle:1",
        "ImageID": "sha256:idle",
        "Labels": dict(labels or {}),
        "Ports": [{"IP": "127.0.0.1", "PrivatePort": 9000, "PublicPort": port, "Type": "tcp"}] if port else [],
    }


def copied(d, alias: str, name: str, **changes: str) -> dict[str, Any]:
    """A container named `name` carrying exactly the labels the tool gives model `alias`'s container."""
    return entry(name, {**d.models[alias].container.labels, **changes})


# -- who is ours ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["evil", "aigo-lab-alpha2", "aigo-lab-beta", "AIGO-LAB-ALPHA", "aigo-lab-alpha-old"])
def test_valid_labels_under_another_name_are_not_ours(tmp_path, name):
    d = desired(tmp_path)
    entries = [e for e in running(d) if e["Names"] != [f"/{name}"]] + [copied(d, "alpha", name)]
    state = observed(d, entries)
    assert name not in [c.name for c in state.ours] and name in [c.name for c in state.others]
    [warning] = [w for w in state.damaged if f"container {name} " in w]
    assert "labelled model 'alpha'" in warning and "not aigo-lab-alpha" in warning and "leaves it alone" in warning


def test_an_impostor_is_a_warning_never_acted_on_by_plan_or_destroy(tmp_path):
    d = desired(tmp_path)
    entries = [e for e in running(d) if e["Names"] != ["/aigo-lab-alpha"]] + [copied(d, "alpha", "evil")]
    state = observed(d, entries)
    plan = build_plan(d, state)
    assert "evil" not in [a.container for a in plan.actions]
    alpha = next(a for a in plan.actions if a.address == "model.alpha")
    assert alpha.kind == "create"  # the impostor does not stand for the model
    assert plan.blockers == () and any("container evil carries project 'lab' labels" in w for w in plan.warnings)
    gone = destroy_plan("lab", "f", state)
    assert "evil" not in [a.container for a in gone.actions]
    assert any("container evil" in w for w in gone.warnings)
    assert running_engines("lab", entries) == {"beta": "id-beta"}


def test_an_impostor_holding_another_models_name_blocks_that_model(tmp_path):
    d = desired(tmp_path)
    entries = [e for e in running(d) if e["Names"] != ["/aigo-lab-beta"]] + [copied(d, "alpha", "aigo-lab-beta")]
    plan = build_plan(d, observed(d, entries))
    [blocker] = [b for b in plan.blockers if b.address == "model.beta"]
    assert blocker.id == "conflict.name" and "its aigo-apply labels are not ones aigo-apply writes" in blocker.message
    assert "docker rm -f aigo-lab-beta" in blocker.remediation


def test_an_alias_label_the_config_would_refuse_is_not_ours(tmp_path):
    d = desired(tmp_path)
    name = "aigo-lab-alpha-aigo-previous"
    state = observed(d, running(d) + [copied(d, "alpha", name, **{L.MODEL: "alpha-aigo-previous"})])
    assert name not in [c.name for c in state.ours]
    assert any("an alias that ends like a name aigo-apply keeps" in w for w in state.damaged)
    assert ("conflict.name", "model.alpha") in [(b.id, b.address) for b in build_plan(d, state).blockers]


def test_our_own_kept_copy_is_ours_and_goes_as_a_leftover(tmp_path):
    d = desired(tmp_path)
    state = observed(d, running(d) + [copied(d, "alpha", "aigo-lab-alpha-aigo-previous")])
    assert "aigo-lab-alpha-aigo-previous" in [c.name for c in state.ours] and state.damaged == ()
    plan = build_plan(d, state)
    assert plan.blockers == ()
    assert ("remove", "aigo-lab-alpha-aigo-previous") in [(a.kind, a.container) for a in plan.actions]
    assert running_engines("lab", state_entries(d, state)) == {"alpha": "id-alpha", "beta": "id-beta"}


def state_entries(d, state) -> list[dict[str, Any]]:
    return running(d) + [copied(d, "alpha", "aigo-lab-alpha-aigo-previous")]


# -- foreign containers in our names block the plan -------------------------------------------------


FOREIGN_NAMES = {
    "engine": ("aigo-lab-alpha", "model.alpha"),
    "kept copy": ("aigo-lab-alpha-aigo-previous", "model.alpha"),
    "router": ("aigo-lab-router", "router"),
}


@pytest.mark.parametrize("labels", ["none", "another project", "another manager", "damaged"])
@pytest.mark.parametrize("which", sorted(FOREIGN_NAMES))
def test_a_foreign_container_in_one_of_our_names_blocks_the_plan(tmp_path, which, labels):
    d = desired(tmp_path)
    name, address = FOREIGN_NAMES[which]
    own = {
        "none": {},
        "another project": {**d.models["alpha"].container.labels, L.PROJECT: "other"},
        "another manager": {**d.models["alpha"].container.labels, L.MANAGED_BY: "someone"},
        "damaged": {**d.models["alpha"].container.labels, L.LABELS_VERSION: "7"},
    }[labels]
    entries = [e for e in running(d) if e["Names"] != [f"/{name}"]] + [entry(name, own)]
    plan = build_plan(d, observed(d, entries))
    found = [b for b in plan.blockers if b.id == "conflict.name" and b.address == address]
    assert len(found) == 1, plan.blockers
    assert f"a container named {name} exists but is not managed by aigo-apply" in found[0].message
    assert "never stops, removes or renames" in found[0].message
    assert f"docker rm -f {name}" in found[0].remediation and f"docker rename {name}" in found[0].remediation
    assert name not in [a.container for a in plan.actions if a.kind in ("remove", "recreate", "start")]
    assert name not in [a.container for a in destroy_plan("lab", "f", observed(d, entries)).actions]


def test_a_foreign_kept_copy_name_blocks_even_a_replace_and_the_plan_text_says_why(tmp_path):
    from aigo_apply.plan.text import plan_text

    d = desired(tmp_path)
    entries = running(d) + [entry("aigo-lab-beta-aigo-previous")]
    plan = build_plan(d, observed(d, entries), None, PlanRequest(replace=frozenset({"beta"})))
    assert [b.address for b in plan.blockers] == ["model.beta"]
    assert "the previous version during a replace" in plan.blockers[0].message
    assert "aigo-lab-beta-aigo-previous" in plan_text(plan)


def test_destroy_says_which_unlabelled_containers_in_our_names_it_leaves(tmp_path):
    d = desired(tmp_path)
    entries = running(d) + [entry("aigo-lab-alpha-aigo-previous"), entry("aigo-labx-alpha"), entry("mine")]
    gone = destroy_plan("lab", "f", observed(d, entries))
    assert {a.container for a in gone.actions} == {"aigo-lab-alpha", "aigo-lab-beta", "aigo-lab-router"}
    assert [w for w in gone.warnings if "destroy leaves it alone" in w] == [
        "container aigo-lab-alpha-aigo-previous is named like project 'lab' containers but carries no aigo-apply "
        "labels: destroy leaves it alone (remove it yourself if it is not needed)"
    ]


# -- apply acts only on its own names -------------------------------------------------------------


class World:
    def __init__(self, tmp_path: Path):
        self.log = Log()
        self.rt = FakeRuntime(self.log)
        self.reporter = FakeReporter()
        (tmp_path / "state").mkdir(exist_ok=True)
        self.journal = Journal(tmp_path / "state")
        self.waits = FakeWaits(self.log)

    def run(self, plan, d):
        routes = FakeRoutes(self.log, d.router.settings, {r.alias: r for r in d.router.routes})
        executor = Executor(
            self.rt,
            self.reporter,
            self.journal,
            routes=routes,
            interrupted=threading.Event(),
            make_waiter=self.waits,
            wait_router=no_router_wait(self.log),
        )
        return executor.run(plan)


def test_a_kept_copy_name_taken_after_the_plan_stops_the_replace_before_anything_is_touched(tmp_path):
    d = desired(tmp_path, CONFIG.replace("    gpus: none\n", "    gpus: none\n    update: recreate\n", 1))
    w = World(tmp_path)
    for model in d.models.values():
        w.rt.add_existing(model.container)
    w.rt.add_existing(d.router.container)
    seen = parse_state("lab", w.rt.list_containers(), w.rt.list_images())
    plan = build_plan(d, seen, None, PlanRequest(replace=frozenset({"alpha"})))
    assert plan.blockers == () and "recreate" in [a.kind for a in plan.actions]
    foreign = d.models["beta"].container  # someone makes a container at the kept copy's name since
    w.rt.add_existing(type(foreign)(**{**foreign.__dict__, "name": "aigo-lab-alpha-aigo-previous", "labels": {}}))
    before = w.rt.list_containers()

    report = w.run(plan, d)

    [failed] = report.failed
    assert failed.address == "model.alpha" and "aigo-lab-alpha-aigo-previous exists" in failed.message
    touched = {s for op, s in w.log.ops() if op in ("stop", "remove", "rename", "start", "create", "kill")}
    assert touched == set(), w.log.ops()
    assert w.rt.list_containers() == before
    assert ("route_remove", "alpha") not in w.log.ops()  # it keeps serving, routed


@pytest.mark.parametrize(
    "address,model,container",
    [
        ("model.alpha", "alpha", "evil"),
        ("model.alpha", "alpha", "aigo-lab-beta"),
        ("container.evil", None, "evil"),
        ("router", None, "evil"),
    ],
)
def test_apply_refuses_a_remove_of_a_name_the_tool_does_not_give(tmp_path, address, model, container):
    d = desired(tmp_path)
    w = World(tmp_path)
    w.rt.add_existing(d.models["alpha"].container)
    plan = Plan("lab", "f", "sha256:x", (Action(address, "remove", ("r",), model=model, container=container),))
    with pytest.raises(PlanFileError, match="not a name aigo-apply gives"):
        w.run(plan, d)
    assert w.log.ops() == []


def test_apply_removes_a_leftover_new_engine_of_an_interrupted_parallel_replace(tmp_path):
    """A parallel replace cut short (a daemon restart, Ctrl-C) leaves NAME-aigo-next; the next plan
    removes it, and the executor accepts that name as one the tool gives the model."""
    from dataclasses import replace

    d = desired(tmp_path)
    w = World(tmp_path)
    leftover = replace(d.models["alpha"].container, name="aigo-lab-alpha-aigo-next")
    w.rt.add_existing(leftover)
    plan = Plan(
        "lab", "f", "sha256:x", (Action("model.alpha", "remove", ("r",), model="alpha", container=leftover.name),)
    )
    w.run(plan, d)
    assert ("remove", leftover.name) in w.log.ops()


def test_engine_events_count_only_the_models_own_container():
    def event(name, alias="alpha", status="die"):
        return {"status": status, "id": f"id-{name}", "Actor": {"Attributes": {"name": name, L.MODEL: alias}}}

    class Stream(list):
        def close(self):
            pass

    stream = Stream(
        [
            event("evil"),
            event("aigo-lab-alpha-aigo-previous"),
            event("aigo-lab-beta", alias="alpha"),
            event("aigo-lab-alpha"),
            event("aigo-lab-alpha", status="start"),
            {"status": "die", "Actor": {"Attributes": {"name": "aigo-lab-x", L.MODEL: 5}}},
        ]
    )
    assert list(_EngineEvents(stream, "lab")) == [
        {"action": "die", "alias": "alpha", "container": "id-aigo-lab-alpha"},
        {"action": "start", "alias": "alpha", "container": "id-aigo-lab-alpha"},
    ]


# -- the cache volume -------------------------------------------------------------------------------


class VolumeRuntime(FakeRuntime):
    """The fake runtime with named volumes: name -> labels (Docker reports null for none)."""

    def __init__(self, volumes: dict[str, Any]):
        super().__init__()
        self.volumes = dict(volumes)

    def volume_labels(self, name: str) -> dict[str, Any] | None:
        if name not in self.volumes:
            return None
        return self.volumes[name] or {}

    def remove_volume(self, name: str) -> bool:
        self.log.add("remove_volume", name)
        return self.volumes.pop(name, None) is not None or True


class Say:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def event(self, kind: str, **fields: Any) -> None:
        pass

    def show_plan(self, plan: Plan) -> None:
        self.lines += list(plan.warnings)

    def say(self, message: str, err: bool = False, head: str = "", colour: str | None = None) -> None:
        self.lines.append(message)


VOLUMES = {
    "no labels": (None, False),
    "empty labels": ({}, False),
    "a user's labels": ({"owner": "me"}, False),
    "another project's": ({**L.for_volume("other")}, False),
    "ours without the cache role": ({L.MANAGED_BY: L.MANAGER, L.PROJECT: "lab"}, False),
    "ours": (L.for_volume("lab"), True),
}


@pytest.mark.parametrize("case", sorted(VOLUMES))
def test_destroy_removes_the_cache_volume_only_when_its_labels_say_it_is_ours(tmp_path, monkeypatch, case):
    from aigo_apply.app.apply import ApplyRequest, run_destroy

    monkeypatch.setenv("AIGO_STATE_DIR", str(tmp_path / "state"))
    volume_labels, removed = VOLUMES[case]
    rt = VolumeRuntime({"aigo-lab-cache": volume_labels, "aigo-lab-other": L.for_volume("lab")})
    console = Say()
    assert run_destroy(ApplyRequest(yes=True, project="lab"), console, runtime=rt) == 0
    assert ("aigo-lab-cache" not in rt.volumes) is removed
    assert "aigo-lab-other" in rt.volumes  # only the one name destroy owns is ever looked at
    if removed:
        assert "removed the cache volume aigo-lab-cache" in console.lines
    else:
        assert rt.log.ops("remove_volume") == []
        [kept] = [line for line in console.lines if "kept the volume aigo-lab-cache" in line]
        assert "docker volume rm aigo-lab-cache" in kept


def test_destroy_without_a_cache_volume_says_nothing_about_one(tmp_path, monkeypatch):
    from aigo_apply.app.apply import ApplyRequest, run_destroy

    monkeypatch.setenv("AIGO_STATE_DIR", str(tmp_path / "state"))
    rt, console = VolumeRuntime({}), Say()
    assert run_destroy(ApplyRequest(yes=True, project="lab"), console, runtime=rt) == 0
    assert rt.log.ops("remove_volume") == [] and not any("volume" in line for line in console.lines)


def test_volume_labels_are_read_as_input():
    assert L.owns_volume(L.for_volume("lab"), "lab")
    for odd in (None, [], "x", {L.MANAGED_BY: L.MANAGER, L.PROJECT: "lab", L.ROLE: "engine"}):
        assert not L.owns_volume(odd, "lab")
