"""Getting what containers need onto the machine, for `apply` and `models pull` alike: pulling an
image with per-layer progress, and downloading a model folder from the Hub with throttled progress
(skipped when it is complete already). A download's spec is re-checked before it is acted on."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any, TypeGuard

from aigo_apply.adapters.hub import download
from aigo_apply.adapters.runtime import Runtime
from aigo_apply.apply.outcome import Reporter
from aigo_apply.config.schema import schema
from aigo_apply.desired.model_store import KINDS, is_complete, repo_dir
from aigo_apply.errors import PlanFileError
from aigo_apply.observe.markers import read_marker
from aigo_apply.plan.types import Action


def download_folder(
    address: str,
    spec: dict[str, Any],
    reporter: Reporter,
    fetch: Callable[..., dict[str, Any]] | None = None,
    clock: Callable[[], float] = time.monotonic,
    begin: Callable[[], None] | None = None,
) -> dict[str, Any] | None:
    """One model (or LoRA adapter: `kind` "adapter") folder from the Hub with progress (`apply` and
    `models pull` alike): None when the folder is complete already (at `pin`, when aigo.lock pins
    it), else the new completion marker."""
    dest = Path(spec["dest"])
    kind = str(spec.get("kind", "model"))
    if is_complete(read_marker(dest), spec.get("file"), spec.get("pin"), kind):
        reporter.event(
            "step", address=address, step="download", outcome="ok", message=f"already on this machine ({dest})"
        )
        return None
    size = f" ({spec['bytes'] / 1e9:.1f} GB)" if spec.get("bytes") else ""
    reporter.event("download_start", address=address, total=spec.get("bytes"), message=f"downloading into {dest}{size}")
    if begin:
        begin()
    last = [0.0]

    def progress(done: int, total: int) -> None:
        now = clock()
        if now - last[0] >= 0.25 or done >= total:
            last[0] = now
            reporter.event("download_progress", address=address, done=done, total=total)

    marker = (fetch or _hub_download)(
        spec["repo"], spec["revision"], dest, spec.get("file"), progress, spec.get("pin"), kind
    )
    reporter.event(
        "download_done",
        address=address,
        message=f"downloaded {len(marker.get('files', {}))} files at commit {str(marker.get('commit'))[:12]}",
    )
    return marker


def _hub_download(
    repo: str,
    revision: str,
    dest: Path,
    file: str | None,
    progress: Callable[..., Any],
    pin: str | None = None,
    kind: str = "model",
) -> dict[str, Any]:
    return download(repo, revision, dest, file, progress, pin, kind)


def check_download(action: Action) -> dict[str, Any]:
    """A download's spec, re-checked like a command line: a hand-edited saved plan must not point a
    download at another folder or smuggle a strange repo, revision or file name in. The repo,
    revision and file must match the very patterns the file's schema allows."""

    allowed = schema()["$defs"]["source"]["properties"]
    if action.download is None:
        raise PlanFileError(f"{action.address}: the plan's download names nothing to fetch; make a new plan")
    spec = action.download.to_spec()
    repo, revision, file, dest = spec.get("repo"), spec.get("revision"), spec.get("file"), spec.get("dest")
    pin, kind = spec.get("pin"), spec.get("kind", "model")

    def fits(value: Any, key: str) -> TypeGuard[str]:
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
        layout = repo_dir(PurePosixPath("/"), repo, revision)  # the folder must end as the store lays it out
        ok = PurePosixPath(dest).is_absolute() and PurePosixPath(dest).parts[-2:] == layout.parts[-2:]
    if not ok:
        raise PlanFileError(f"{action.address}: the plan's download is not one aigo-apply makes; make a new plan")
    return spec


def pull_image(runtime: Runtime, reporter: Reporter, image: str) -> None:
    """Pull one image, reporting per-layer progress (rich bars on a TTY, JSON lines with -o json)."""
    address = f"image.{image}"
    reporter.event("pull_start", address=address, image=image)

    def progress(event: dict[str, Any]) -> None:
        detail = event.get("progressDetail") or {}
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
