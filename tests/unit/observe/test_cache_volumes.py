"""The project's compile-cache volumes read from Docker's volume list (observe/cache_volumes.py): which
are ours (labels AND the name aigo-apply derives from the image its label names), which no model of
the file mounts now, whether a model's next start is warm, and why a container an earlier aigo-apply
made (one cache volume per project) is replaced once."""

from __future__ import annotations

from typing import Any

import pytest

from aigo_apply.desired import labels as L
from aigo_apply.desired.engines.common import CACHE_DIR, cache_volume, legacy_cache_volume
from aigo_apply.observe.cache_volumes import (
    COLD,
    WARM,
    CacheVolume,
    cache_of,
    moved_from_project_volume,
    next_start,
    parse,
    unused,
)
from aigo_apply.observe.containers import parse_container
from aigo_apply.observe.start_log import StartRecord

from helpers.planner_inputs import desired

IMAGE, OTHER = "local/engine:1", "local/engine:2"
MADE = "2026-12-06T10:00:00Z"


def entry(name: str, found: Any, created: Any = MADE) -> dict[str, Any]:
    return {"Name": name, "Labels": found, "CreatedAt": created, "Driver": "local"}


def test_a_volume_counts_as_ours_only_with_our_labels_and_the_name_derived_from_its_image():
    mine, legacy = cache_volume("lab", IMAGE), legacy_cache_volume("lab")
    raw = [
        entry(mine, L.for_volume("lab", IMAGE)),
        entry(legacy, L.for_volume("lab")),  # an earlier aigo-apply's one volume per project
        entry(cache_volume("lab", OTHER), L.for_volume("lab", IMAGE)),  # its label names another image
        entry(cache_volume("lab", OTHER), L.for_volume("lab")),  # no image label, a per-image name
        entry(legacy, L.for_volume("lab", IMAGE)),  # an image label on the per-project name
        entry("aigo-lab-other", L.for_volume("lab", IMAGE)),  # our labels on a name we never derive
        entry(cache_volume("other", IMAGE), L.for_volume("other", IMAGE)),  # another project's
        entry(cache_volume("lab", "x:1"), {**L.for_volume("lab", "x:1"), L.ROLE: "engine"}),  # not the cache role
        entry(cache_volume("lab", "y:1"), {"owner": "me"}),
        entry(cache_volume("lab", "z:1"), None),
        {"Name": 5, "Labels": L.for_volume("lab", IMAGE)},
        "not an object",
        entry(cache_volume("lab", ""), L.for_volume("lab", "")),  # an empty image label
    ]
    found = parse(raw, "lab")
    assert [(v.name, v.image) for v in found] == sorted([(mine, IMAGE), (legacy, None)])
    assert {v.name: v.created for v in found}[mine] == 1796551200.0


@pytest.mark.parametrize("created", [None, "", "yesterday", 5, "2026-12-06T10:00:00"])
def test_a_creation_time_docker_did_not_write_reads_as_unknown(created):
    (volume,) = parse([entry(cache_volume("lab", IMAGE), L.for_volume("lab", IMAGE), created)], "lab")
    assert volume.created is None


def test_unused_volumes_are_those_no_engine_of_the_file_mounts(tmp_path):
    d = desired(tmp_path)  # alpha and beta, both on local/engine:1
    containers = [m.container for m in d.models.values()]
    assert {cache_of(c) for c in containers} == {cache_volume("lab", IMAGE)}
    volumes = [
        CacheVolume(cache_volume("lab", IMAGE), IMAGE),
        CacheVolume(cache_volume("lab", OTHER), OTHER),
        CacheVolume(legacy_cache_volume("lab"), None),
    ]
    assert [v.name for v in unused(volumes, containers)] == [cache_volume("lab", OTHER), legacy_cache_volume("lab")]
    assert unused(volumes, []) == volumes  # no model left: every one goes
    assert unused([], containers) == []


def start(at: str, image_id: str, spec_hash: str | None) -> StartRecord:
    return StartRecord(at, 30.0, {}, "cold", image_id, IMAGE, spec_hash=spec_hash)


def test_the_next_start_is_warm_only_after_a_start_of_this_container_on_this_image_served_on_its_volume(tmp_path):
    container = desired(tmp_path).models["alpha"].container
    mine = container.definition_hash()
    volumes = {cache_volume("lab", IMAGE): CacheVolume(cache_volume("lab", IMAGE), IMAGE, 1796551200.0)}
    served = start("2026-12-06T10:05:00Z", "sha256:img", mine)
    assert next_start(container, volumes, "sha256:img", [served]) == WARM
    cases = {
        "no volume": ({}, "sha256:img", [served]),
        "the image not on this machine": (volumes, None, [served]),
        "never started": (volumes, "sha256:img", []),
        "another image": (volumes, "sha256:new", [served]),
        "other settings": (volumes, "sha256:img", [start("2026-12-06T10:05:00Z", "sha256:img", "sha256:other")]),
        "a start before the volume was made": (
            volumes,
            "sha256:img",
            [start("2026-12-06T09:59:59Z", "sha256:img", mine)],
        ),
        "a record without a readable time": (volumes, "sha256:img", [start("soon", "sha256:img", mine)]),
    }
    for case, (found, image_id, starts) in cases.items():
        assert next_start(container, found, image_id, starts) == COLD, case
    unknown = {cache_volume("lab", IMAGE): CacheVolume(cache_volume("lab", IMAGE), IMAGE, None)}
    assert next_start(container, unknown, "sha256:img", [served]) == WARM  # Docker did not say when


def test_an_engine_without_a_cache_volume_has_no_next_start_verdict(tmp_path):
    text = """
version: 1
project: lab
engines: {llama.cpp: {image_tag: server}}
models:
  g: {source: {path: /m/g.gguf}, context_length: 4096, gpus: none}
"""
    container = desired(tmp_path, text).models["g"].container
    assert cache_of(container) is None and CACHE_DIR not in [m.target for m in container.mounts]
    assert next_start(container, {}, "sha256:img", []) is None


def test_a_container_on_the_project_volume_is_replaced_once_and_the_plan_says_why(tmp_path):
    container = desired(tmp_path).models["alpha"].container
    why = moved_from_project_volume("lab", ("aigo-lab-cache",), container)
    assert why is not None
    assert "moves from the project's one volume aigo-lab-cache" in why and cache_volume("lab", IMAGE) in why
    assert "first start compiles anew" in why
    for mounted in ((), (cache_volume("lab", IMAGE),), ("aigo-other-cache",)):
        assert moved_from_project_volume("lab", mounted, container) is None, mounted


def test_a_containers_named_volumes_are_read_from_its_mounts_as_input():
    raw = {"Id": "x", "Names": ["/aigo-lab-alpha"], "State": "running", "Labels": {}}
    mounts = [
        {"Type": "volume", "Name": "aigo-lab-cache", "Destination": "/root/.cache"},
        {"Type": "bind", "Source": "/m/alpha", "Destination": "/models/alpha"},
        {"Type": "volume", "Name": 5},
        "odd",
    ]
    assert parse_container({**raw, "Mounts": mounts}).volumes == ("aigo-lab-cache",)
    for odd in (None, "x", {"Name": "v"}, [None]):
        assert parse_container({**raw, "Mounts": odd}).volumes == ()
