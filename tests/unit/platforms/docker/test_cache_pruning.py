"""The compile-cache volumes on the Docker platform (platforms/docker/cache_volumes.py), on the in-memory runtime:
after an apply of the whole file the volumes of images no model uses are removed and apply says so,
a targeted apply removes none, destroy removes every one, a volume a container still mounts is kept
and said so; status says whether each model's next start is warm; the plan says why a container an
earlier aigo-apply made on the project's one cache volume is replaced, once."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from aigo_apply.desired import labels as L
from aigo_apply.desired.engines.common import cache_volume, legacy_cache_volume
from aigo_apply.desired.types import Mount
from aigo_apply.observe.start_log import StartRecord
from aigo_apply.plan.planner import build_plan
from aigo_apply.platforms.docker import start_records
from aigo_apply.platforms.docker.platform import DockerPlatform
from aigo_apply.platforms.docker.status import collect, render
from aigo_apply.platforms.requests import ApplyRequest

from helpers.fakes import FakeRuntime
from helpers.planner_inputs import desired, observed, running

IMAGE = "local/engine:1"  # the engine image of helpers.planner_inputs' file
MINE, OLD, LEGACY = cache_volume("lab", IMAGE), cache_volume("lab", "local/engine:0"), legacy_cache_volume("lab")


class Say:
    def __init__(self) -> None:
        self.out: list[str] = []
        self.err: list[str] = []

    def say(self, message: str, err: bool = False, head: str = "", colour: str | None = None) -> None:
        (self.err if err else self.out).append(message)


def machine() -> FakeRuntime:
    rt = FakeRuntime()
    rt.volumes = {
        MINE: L.for_volume("lab", IMAGE),
        OLD: L.for_volume("lab", "local/engine:0"),
        LEGACY: L.for_volume("lab"),
        cache_volume("lab", "local/engine:9"): {"owner": "me"},  # named like ours, not labelled ours
        "aigo-lab-notes": L.for_volume("lab", "local/engine:0"),  # labelled ours, a name we never derive
        cache_volume("other", "local/engine:0"): L.for_volume("other", "local/engine:0"),
    }
    return rt


def removed(rt: FakeRuntime) -> list[str]:
    return sorted(name for _, name in rt.log.ops("remove_volume"))


def settle(tmp_path, rt: FakeRuntime, command: str, **request: Any) -> Say:
    d = desired(tmp_path)
    platform = DockerPlatform("lab", d.file, d, runtime=rt, state_root=tmp_path / "state")
    console = Say()
    platform.settled(command, build_plan(d, observed(d, running(d))), ApplyRequest(**request), console)  # type: ignore[arg-type]
    return console


def test_an_apply_of_the_whole_file_removes_the_volumes_of_images_no_model_uses(tmp_path):
    rt = machine()
    console = settle(tmp_path, rt, "apply")
    assert removed(rt) == sorted([OLD, LEGACY])
    assert MINE in rt.volumes and cache_volume("lab", "local/engine:9") in rt.volumes and "aigo-lab-notes" in rt.volumes
    assert cache_volume("other", "local/engine:0") in rt.volumes
    assert (
        f"removed the cache volume {OLD} (the compile cache of local/engine:0, which no model of the file uses now)"
        in console.out
    )
    assert any(
        line.startswith(f"removed the cache volume {LEGACY} (the one cache volume per project") for line in console.out
    )


def test_a_targeted_apply_removes_no_volume(tmp_path):
    rt = machine()
    settle(tmp_path, rt, "apply", target=("alpha",))
    assert rt.log.ops("remove_volume") == []


def test_a_volume_a_container_still_mounts_is_kept_and_said(tmp_path):
    rt = machine()
    d = desired(tmp_path)
    leftover = d.models["alpha"].container
    mounts = tuple(Mount(OLD, m.target, m.read_only) if m.source == MINE else m for m in leftover.mounts)
    rt.add_existing(replace(leftover, name=leftover.name + "-aigo-previous", mounts=mounts), "exited")
    console = settle(tmp_path, rt, "apply")
    assert OLD in rt.volumes and LEGACY not in rt.volumes
    (kept,) = console.err
    assert kept.startswith(f"kept the cache volume {OLD}: ") and "in use" in kept


def test_destroy_removes_every_cache_volume_of_the_project_and_only_those(tmp_path):
    rt = machine()
    console = settle(tmp_path, rt, "destroy")
    assert removed(rt) == sorted([MINE, OLD, LEGACY])
    assert set(rt.volumes) == {
        cache_volume("lab", "local/engine:9"),
        "aigo-lab-notes",
        cache_volume("other", "local/engine:0"),
    }
    assert sorted(console.out) == sorted(f"removed the cache volume {v}" for v in (MINE, OLD, LEGACY))


def test_status_says_whether_each_model_s_next_start_is_warm(tmp_path):
    d = desired(tmp_path)
    state = tmp_path / "state"
    rt = FakeRuntime()
    rt.volumes = {MINE: L.for_volume("lab", IMAGE)}
    rt.volume_created = {MINE: "2026-12-06T10:00:00Z"}
    alpha = d.models["alpha"].container
    start_records.keep(
        state,
        "alpha",
        StartRecord("2026-12-06T10:05:00Z", 40.0, {}, "cold", "sha256:img", IMAGE, spec_hash=alpha.definition_hash()),
    )
    start_records.keep(  # beta started, but with other settings than the file's now
        state, "beta", StartRecord("2026-12-06T10:05:00Z", 40.0, {}, "cold", "sha256:img", IMAGE, spec_hash="sha256:x")
    )
    report = collect(d, observed(d, running(d)), rt, state=state)
    rows = {r["model"]: r for r in report["models"]}
    assert (rows["alpha"]["next_start_cache"], rows["beta"]["next_start_cache"]) == ("warm", "cold")
    json.dumps(report)  # the JSON status carries it as is
    text = render(report)
    assert "alpha: its next start will be warm (its image's cache volume holds what a start of these settings" in text
    assert "beta: its next start will be cold (nothing compiled for these settings on this image" in text
    rt.volumes = {}  # the volume gone (docker volume rm, or destroy of the volumes alone): cold
    report = collect(d, observed(d, running(d)), rt, state=state)
    assert {r["model"]: r["next_start_cache"] for r in report["models"]} == {"alpha": "cold", "beta": "cold"}


def test_status_without_docker_says_nothing_of_the_next_start(tmp_path):
    d = desired(tmp_path)
    assert {r["next_start_cache"] for r in collect(d, observed(d, []))["models"]} == {None}


def legacy_machine(d) -> list[dict[str, Any]]:
    """The containers an aigo-apply before per-image caches made from the same file: the same
    settings, the project's one cache volume mounted, and the definition hash that went with it."""
    entries = running(d)
    for entry in entries:
        alias = entry["Labels"].get(L.MODEL)
        if alias:
            entry["Labels"] = {**entry["Labels"], L.SPEC_HASH: "sha256:" + "0" * 64}
            entry["Mounts"] = [{"Type": "volume", "Name": LEGACY, "Destination": "/root/.cache"}]
    return entries


def test_containers_on_the_project_s_one_volume_are_replaced_once_saying_why(tmp_path):
    d = desired(tmp_path)
    plan = build_plan(d, observed(d, legacy_machine(d)))
    for alias in ("alpha", "beta"):
        action = next(a for a in plan.actions if a.model == alias)
        assert action.kind == "recreate", action
        (why,) = action.reasons
        assert (
            f"its compile cache moves from the project's one volume {LEGACY} to the volume of its image, {MINE}" in why
        )
    again = running(d)  # what that apply leaves: this version's containers, on the image's volume
    for entry in again:
        entry["Mounts"] = [{"Type": "volume", "Name": MINE, "Destination": "/root/.cache"}]
    assert {a.kind for a in build_plan(d, observed(d, again)).actions} == {"noop"}
