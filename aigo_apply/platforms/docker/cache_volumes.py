"""The project's compile-cache volumes on this machine's Docker, one per engine image (desired/engines/
common.cache_volume; observe/cache_volumes.py says which volumes are ours): after an apply of the whole
file ends well, the volumes of images no model uses now are removed, so an upgrade does not leave the
old release's compiled code behind for ever; destroy removes every one; status says whether each model's
next start will find what an earlier start compiled (warm) or compile anew (cold).

Docker refuses to remove a volume a container still mounts: such a volume is kept, and said so."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from aigo_apply.adapters.runtime import Runtime
from aigo_apply.desired import labels
from aigo_apply.desired.engines.common import legacy_cache_volume
from aigo_apply.desired.types import DesiredState
from aigo_apply.errors import AigoError
from aigo_apply.observe import cache_volumes
from aigo_apply.observe.cache_volumes import CacheVolume, Start
from aigo_apply.observe.containers import ObservedState

if TYPE_CHECKING:
    from aigo_apply.platforms.views import Console


def prune(desired: DesiredState, runtime: Runtime, console: Console) -> None:
    """After an apply of the whole file: remove the project's cache volumes that no model mounts now
    (their image is no model's any more, or the one volume per project of an earlier aigo-apply)."""
    found = cache_volumes.parse(runtime.list_volumes(desired.project), desired.project)
    for volume in cache_volumes.unused(found, [m.container for m in desired.models.values()]):
        _remove(volume, runtime, console, _why_unused(volume))


def remove_all(project: str, runtime: Runtime, console: Console) -> None:
    """destroy: every cache volume of the project. A volume of the old per-project name that does not
    carry our labels (the user's own, or one an older aigo-apply let Docker make) is kept, and said so."""
    for volume in cache_volumes.parse(runtime.list_volumes(project), project):
        _remove(volume, runtime, console, "")
    legacy = legacy_cache_volume(project)
    found = runtime.volume_labels(legacy)
    if found is not None and not labels.owns_volume(found, project):
        console.say(
            f"kept the volume {legacy}: it does not carry aigo-apply's labels for project '{project}', so "
            f"aigo-apply did not make it (or an older version did); remove it with `docker volume rm {legacy}` "
            "if it is not needed",
            err=True,
        )


def next_starts(
    desired: DesiredState, observed: ObservedState, runtime: Runtime, starts: Callable[[str], Iterable[Start]]
) -> dict[str, str | None]:
    """alias -> "warm" | "cold" for the next start of each model of the file (None: its engine keeps
    no compile cache), from one volume list and each model's kept starts (`starts`: alias -> its records,
    platforms/docker/start_records.read)."""
    found = {v.name: v for v in cache_volumes.parse(runtime.list_volumes(desired.project), desired.project)}
    out = {}
    for alias, model in desired.models.items():
        image_id = observed.images.get(model.container.image)
        out[alias] = cache_volumes.next_start(model.container, found, image_id, starts(alias))
    return out


def _why_unused(volume: CacheVolume) -> str:
    if volume.image is None:
        return "the one cache volume per project of an earlier aigo-apply; each image has its own now"
    return f"the compile cache of {volume.image}, which no model of the file uses now"


def _remove(volume: CacheVolume, runtime: Runtime, console: Console, why: str) -> None:
    try:
        removed = runtime.remove_volume(volume.name)
    except AigoError as exc:  # in use by a container (one not made from the file, or left by a replace)
        console.say(f"kept the cache volume {volume.name}: {exc}", err=True)
        return
    if removed:
        console.say(f"removed the cache volume {volume.name}" + (f" ({why})" if why else ""))
