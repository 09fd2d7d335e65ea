"""Getting what containers need onto the machine, for `apply` and `models pull` alike: pulling an
image with per-layer progress, and downloading a model folder from the Hub with throttled progress
(skipped when it is complete already, taken over from the older store layout's folder where that holds
exactly it). A download's spec is re-checked before it is acted on, and its folder's marker must record
its source: a folder holding another is neither used nor written over."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import TypeGuard

from aigo_apply.adapters.hub import download
from aigo_apply.adapters.runtime import Runtime
from aigo_apply.config.schema import schema
from aigo_apply.desired.model_store import (
    KINDS,
    foreign_source,
    is_complete,
    label,
    legacy_dir,
    repo_dir,
    source_text,
    store_depth,
    wanted_source,
)
from aigo_apply.errors import AigoError, PlanFileError
from aigo_apply.json_types import JsonObject, obj
from aigo_apply.observe.markers import read_marker
from aigo_apply.plan.types import Action
from aigo_apply.platforms.docker.legacy_store import take_over
from aigo_apply.platforms.outcome import Reporter

# How a download step fetches a folder (adapters.hub.download unless a test passes another): repo, revision,
# dest, file, progress(done, total), pin, kind; its answer is the folder's new completion marker.
Fetch = Callable[[str, str, Path, str | None, Callable[[int, int], None], str | None, str], dict[str, object]]


def download_folder(
    address: str,
    spec: Mapping[str, object],
    reporter: Reporter,
    fetch: Fetch | None = None,
    clock: Callable[[], float] = time.monotonic,
    begin: Callable[[], None] | None = None,
) -> dict[str, object] | None:
    """One model (or LoRA adapter: `kind` "adapter") folder from the Hub with progress (`apply` and
    `models pull` alike): None when the folder is complete already (at `pin`, when aigo.lock pins
    it), else the new completion marker (one taken over from the older store layout's folder, too)."""
    dest = Path(str(spec["dest"]))
    kind = str(spec.get("kind", "model"))
    pin, file, size_bytes = _text_or_none(spec.get("pin")), _text_or_none(spec.get("file")), spec.get("bytes")
    here = read_marker(dest)
    other = foreign_source(here, spec)
    if other:
        raise AigoError(
            f"{address}: {dest} holds {other} by its download marker, not {source_text(wanted_source(spec))} "
            "(an older aigo-apply gave both one folder): it is neither used nor written over; move it away "
            "or remove it, then run the command again"
        )
    if is_complete(here, spec, pin):
        reporter.event(
            "step", address=address, step="download", outcome="ok", message=f"already on this machine ({dest})"
        )
        return None
    legacy = legacy_dir(spec)
    if legacy is not None and is_complete(old := read_marker(Path(legacy)), spec, pin):
        taken, why = take_over(spec, Path(legacy), old or {})
        if taken is not None:
            reporter.event(
                "step",
                address=address,
                step="download",
                outcome="ok",
                message=f"{label(spec)} linked into {dest} from {legacy}, where an older aigo-apply kept it: "
                f"nothing downloaded; {legacy} stays for a container that still mounts it (remove it once none does)",
            )
            return taken
        reporter.event(
            "step", address=address, step="download", outcome="warning", message=f"{legacy} is not taken over: {why}"
        )
    size = f" ({size_bytes / 1e9:.1f} GB)" if isinstance(size_bytes, int) and size_bytes else ""
    reporter.event("download_start", address=address, total=size_bytes, message=f"downloading into {dest}{size}")
    if begin:
        begin()
    last = [0.0]

    def progress(done: int, total: int) -> None:
        now = clock()
        if now - last[0] >= 0.25 or done >= total:
            last[0] = now
            reporter.event("download_progress", address=address, done=done, total=total)

    marker = (fetch or _hub_download)(str(spec["repo"]), str(spec["revision"]), dest, file, progress, pin, kind)
    reporter.event(
        "download_done",
        address=address,
        message=f"downloaded {len(obj(marker.get('files')))} files at commit {str(marker.get('commit'))[:12]}",
    )
    return marker


def _text_or_none(value: object) -> str | None:
    """A download's `pin` or `file`: text, or None (check_download and model_store.downloads made it one of them)."""
    return value if isinstance(value, str) else None


def _hub_download(
    repo: str,
    revision: str,
    dest: Path,
    file: str | None,
    progress: Callable[[int, int], None],
    pin: str | None = None,
    kind: str = "model",
) -> dict[str, object]:
    return download(repo, revision, dest, file, progress, pin, kind)


def check_download(action: Action) -> Mapping[str, object]:
    """A download's spec, re-checked like a command line: a hand-edited saved plan must not point a
    download at another folder or smuggle a strange repo, revision or file name in. The repo,
    revision and file must match the very patterns the file's schema allows."""

    allowed = schema()["$defs"]["source"]["properties"]
    if action.download is None:
        raise PlanFileError(f"{action.address}: the plan's download names nothing to fetch; make a new plan")
    spec = action.download.to_spec()
    repo, revision, file, dest = spec.get("repo"), spec.get("revision"), spec.get("file"), spec.get("dest")
    pin, kind = spec.get("pin"), str(spec.get("kind", "model"))  # DownloadSpec.kind: text

    def fits(value: object, key: str) -> TypeGuard[str]:
        return isinstance(value, str) and re.search(allowed[key]["pattern"], value) is not None

    ok = (
        fits(repo, "repo")
        and fits(revision, "revision")
        and ".." not in revision.split("/")
        and (file is None or fits(file, "file"))
        and isinstance(dest, str)
        and (pin is None or (isinstance(pin, str) and re.fullmatch(r"[0-9a-f]{40}", pin) is not None))
        and kind in KINDS
        and (kind == "model" or file is None)  # an adapter is a whole folder, never one file
    )
    if ok and isinstance(repo, str) and isinstance(revision, str) and isinstance(dest, str):  # as `ok` says
        layout = repo_dir(PurePosixPath("/"), repo, revision, kind)  # the folder must end as the store lays it out
        depth = store_depth(kind)
        ok = PurePosixPath(dest).is_absolute() and PurePosixPath(dest).parts[-depth:] == layout.parts[-depth:]
    if not ok:
        raise PlanFileError(f"{action.address}: the plan's download is not one aigo-apply makes; make a new plan")
    return spec


def pull_image(runtime: Runtime, reporter: Reporter, image: str) -> None:
    """Pull one image, reporting per-layer progress (rich bars on a TTY, JSON lines with -o json)."""
    address = f"image.{image}"
    reporter.event("pull_start", address=address, image=image)

    def progress(event: JsonObject) -> None:
        detail = obj(event.get("progressDetail"))  # Docker's: an object, or absent
        if event.get("id"):
            reporter.event(
                "pull_progress",
                image=image,
                layer=event["id"],
                status=event.get("status", ""),
                current=detail.get("current"),
                total=detail.get("total"),
            )

    runtime.pull(image, progress)
    reporter.event("pull_done", address=address, image=image)
