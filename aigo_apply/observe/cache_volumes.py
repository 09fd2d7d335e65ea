"""A project's compile-cache volumes as plain records read from Docker's volume list, and what follows
from them: which ones no model of the file uses now (apply prunes them after an apply of the whole file),
and whether a model's next start will find what an earlier start compiled (`status`). Pure.

An engine's compile caches (vLLM's compiled graphs, Inductor's and Triton's kernels, FlashInfer's) live
in one volume per engine image reference (desired/engines/common.cache_volume). The volume list is input:
a volume counts as ours only when its labels say aigo-apply made it for this project with the cache role
(desired/labels.owns_volume) AND its name is the one aigo-apply derives from the image its label names,
or the one cache volume per project an earlier aigo-apply made (`aigo-PROJECT-cache`); anything else is
left alone, whatever its labels claim."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from aigo_apply.desired import labels as L
from aigo_apply.desired.engines.common import CACHE_DIR, cache_volume, legacy_cache_volume
from aigo_apply.desired.types import ContainerSpec
from aigo_apply.json_types import JsonValue

WARM, COLD = "warm", "cold"


class Start(Protocol):
    """What a measured start says here (observe/start_log.StartRecord has it): when it served, on
    which image, and the definition hash of the container that started."""

    @property
    def at(self) -> str: ...
    @property
    def image_id(self) -> str: ...
    @property
    def spec_hash(self) -> str | None: ...


@dataclass(frozen=True)
class CacheVolume:
    """One of the project's cache volumes: its name, the image reference it keeps compiled code for
    (None: the project-wide volume of an aigo-apply before caches were kept per image) and when Docker
    made it (Unix time; None when Docker did not say)."""

    name: str
    image: str | None
    created: float | None = None


def parse(raw: Iterable[JsonValue], project: str) -> tuple[CacheVolume, ...]:
    """The project's cache volumes among the entries of GET /volumes, by name."""
    out = {}
    for entry in raw:
        if not isinstance(entry, dict) or not isinstance(name := entry.get("Name"), str):
            continue
        found = entry.get("Labels")
        if not isinstance(found, dict) or not L.owns_volume(found, project):
            continue
        image = found.get(L.IMAGE)
        if isinstance(image, str) and image and name == cache_volume(project, image):
            out[name] = CacheVolume(name, image, _unix(entry.get("CreatedAt")))
        elif L.IMAGE not in found and name == legacy_cache_volume(project):
            out[name] = CacheVolume(name, None, _unix(entry.get("CreatedAt")))
    return tuple(out[name] for name in sorted(out))


def cache_of(container: ContainerSpec) -> str | None:
    """The name of the cache volume a container mounts (None: it keeps no compile cache: llama.cpp)."""
    return next((m.source for m in container.mounts if m.target == CACHE_DIR and not m.source.startswith("/")), None)


def unused(volumes: Iterable[CacheVolume], containers: Iterable[ContainerSpec]) -> list[CacheVolume]:
    """The volumes none of `containers` (the file's engines) mounts: their image is no model's now."""
    wanted = {name for c in containers if (name := cache_of(c))}
    return [v for v in volumes if v.name not in wanted]


def moved_from_project_volume(project: str, mounted: Iterable[str], container: ContainerSpec) -> str | None:
    """Why a container an earlier aigo-apply made (`mounted`: the named volumes it mounts) is replaced
    with the same settings when what changed is where its compile cache lives; None otherwise."""
    name, legacy = cache_of(container), legacy_cache_volume(project)
    if name is None or legacy not in mounted:
        return None
    return (
        "same settings, but this aigo-apply version defines the container differently: its compile cache "
        f"moves from the project's one volume {legacy} to the volume of its image, {name}, so that an image "
        "upgrade never loads another release's compiled code (made once; its first start compiles anew)"
    )


def next_start(
    container: ContainerSpec,
    volumes: Mapping[str, CacheVolume],
    image_id: str | None,
    starts: Iterable[Start],
) -> str | None:
    """Whether the next start of `container` finds compiled code in its cache volume: WARM when the
    volume is there and a start of this same container (its definition hash: command line, mounts,
    environment) on the image its reference names now (`image_id`) served after the volume was made;
    what that start compiled is in it (vLLM keys its graphs by those settings and its own version).
    COLD otherwise: no volume yet, another image, other settings, or never started. None when the
    engine keeps no compile cache."""
    name = cache_of(container)
    if name is None:
        return None
    volume = volumes.get(name)
    if volume is None or not image_id:
        return COLD
    definition = container.definition_hash()
    for record in starts:
        at = _unix(record.at)
        if (
            record.image_id == image_id
            and record.spec_hash == definition
            and (volume.created is None or (at is not None and at >= volume.created))
        ):
            return WARM
    return COLD


def _unix(text: object) -> float | None:
    """An RFC 3339 time (Docker's CreatedAt, a start record's `at`) as Unix time; None when unreadable."""
    if not isinstance(text, str) or not 10 <= len(text) <= 64:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.timestamp() if moment.tzinfo is not None else None
