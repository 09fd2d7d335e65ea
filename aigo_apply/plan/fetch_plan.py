"""What must reach the machine before any container changes, as plan actions: image pulls (and, with
apply --locked, restores of aigo.lock's images), model downloads with their size and commit from the
Hub, models whose files move to aigo.lock's commit, and what a pre-quantized checkpoint implies."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from aigo_apply.desired.model_store import (
    KINDS,
    Download,
    downloads,
    foreign_source,
    is_complete,
    kind_of,
    label,
    legacy_dir,
    marker_for,
    repo_dir,
    repo_text,
    source_of,
    source_text,
    store_depth,
    wanted_source,
)
from aigo_apply.desired.types import DesiredState
from aigo_apply.errors import AigoError
from aigo_apply.observe.containers import ObservedState
from aigo_apply.observe.hub_answer import HubAnswer, HubKey, hub_key
from aigo_apply.plan.lockfile import LockRestore
from aigo_apply.plan.payloads import DownloadSpec
from aigo_apply.plan.types import Action, Blocker


def restores(observed: ObservedState, locked: Mapping[str, LockRestore]) -> list[Action]:
    """apply --locked: one pull action per tag that must name aigo.lock's image again."""
    out = []
    for ref, how in sorted(locked.items()):
        now = observed.images.get(ref)
        where = (
            "it is still on this machine: re-tag it" if how.how == "retag" else f"pull it by its digest {how.digest}"
        )
        out.append(
            Action(
                f"image.{ref}",
                "pull",
                (
                    f"aigo.lock records {how.locked_id[:19]}; the tag names {now[:19] if now else 'no image'} now; {where}",
                ),
                image=ref,
                payload=how,
            )
        )
    return out


def pulls(actions: list[Action], local: dict[str, str], restores: list[Action], policy: str) -> list[Action]:
    """The images to pull before anything stops, by the pull policy: the missing ones (`missing`),
    every one a container is made from (`always`), or none at all (`never`, which refuses a plan
    that needs an image this machine does not have, or a digest pull to restore aigo.lock's image)."""
    used = sorted({a.image for a in actions if a.kind in ("create", "recreate") and a.image})
    restored = {a.image for a in restores}
    missing = [ref for ref in used if ref not in local and ref not in restored]
    if policy == "never":
        if missing:
            raise AigoError(
                f"--pull never, but {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not on "
                "this machine; pull or build it first, or use --pull missing (nothing was changed)"
            )
        by_digest = [a.image for a in restores if a.restore and a.restore.how == "pull"]
        if by_digest:
            raise AigoError(
                f"--pull never, but the image aigo.lock records for {', '.join(map(str, by_digest))} must be pulled "
                "by its digest; use --pull missing (nothing was changed)"
            )
        return []
    if policy == "always":
        return [
            Action(
                f"image.{ref}", "pull", ("--pull always: every image a container is made from is pulled",), image=ref
            )
            for ref in used
            if ref not in restored
        ]
    return [Action(f"image.{ref}", "pull", ("the image is not on this machine",), image=ref) for ref in missing]


def download_actions(
    desired: DesiredState, observed: ObservedState, model_actions: list[Action], remote: Mapping[HubKey, HubAnswer]
) -> tuple[list[Action], list[Blocker], list[str]]:
    """A `download` for every model (or repo LoRA adapter) folder that is not complete on this
    machine and that a model being created, replaced or started needs; it runs before any container
    is stopped. A folder whose marker records another source blocks the plan, whatever the model does
    (foreign_blocker); one that the older store layout holds exactly is linked over, not downloaded."""
    acting = {a.model for a in model_actions if a.kind in ("create", "recreate", "start") and a.model}
    actions, blockers, warnings = [], [], []
    for need in downloads(desired.specs()):
        info = remote.get(hub_key(need)) or HubAnswer()
        kind = kind_of(need)
        here = observed.model_files.get(need["dest"])
        if foreign_source(here, need):
            blockers.append(foreign_blocker(need, here or {}))
            continue
        if is_complete(here, need, info.pin) or not acting & set(need["models"]):
            continue
        what = repo_text(need)  # the reason says whether it is a LoRA adapter's: its address, by label
        first = f"model.{need['models'][0]}"
        legacy = legacy_dir(need)
        if legacy is not None and is_complete(observed.model_files.get(legacy), need, info.pin):
            reason = (
                f"{what} is in {legacy}, where an older aigo-apply kept it (its marker records exactly this "
                f"source): its files are linked into {need['dest']}, nothing is downloaded"
            )
        elif info.error is not None:
            if info.access:
                blockers.append(Blocker(info.blocker, info.error, info.fix, first))
            else:
                warnings.append(f"{label(need)}: the Hub could not tell its size ({info.error})")
            reason = f"{what} is not on this machine (size unknown)"
        elif info.known and info.commit:
            count = len(info.files)
            reason = (
                f"{what} is not on this machine: {count} file{'s' if count != 1 else ''}, "
                f"{_size(info.bytes or 0)}, commit {info.commit[:12]}"
            )
        else:
            reason = f"{what} is not on this machine"
        if info.pin:
            reason += " (the commit aigo.lock records)"
        if kind == "adapter":
            reason = f"LoRA adapter {', '.join(need['adapters'])} of model {', '.join(need['models'])}: " + reason
        fetch = DownloadSpec(
            need["repo"],
            need["revision"],
            need["file"],
            need["dest"],
            tuple(need["models"]),
            info.commit,
            info.bytes,
            info.pin,
            kind,
        )
        actions.append(Action(f"download.{label(need)}", "download", (reason,), payload=fetch))
    return actions, blockers, warnings


def foreign_blocker(need: Download, marker: Mapping[str, Any]) -> Blocker:
    """The `model.store` blocker of a download folder whose marker records another source than
    `need`'s (an older aigo-apply gave many sources one folder): it names both, and never reuses it."""
    recorded, dest = source_of(marker), PurePath(need["dest"])
    depth = store_depth(kind_of(need))
    whose = f"model{'s' if len(need['models']) > 1 else ''} {', '.join(need['models'])}"
    move = ""
    if recorded is not None and recorded[0] in KINDS and len(dest.parts) > depth:
        home = repo_dir(dest.parents[depth - 1], recorded[1], recorded[2], recorded[0])
        move = f"move it to {home} (where the store keeps {source_text(recorded)}) or "
    return Blocker(
        "model.store",
        f"{dest} holds {source_text(recorded) if recorded else 'another source'} by its download marker, but "
        f"{whose} need{'' if len(need['models']) > 1 else 's'} {source_text(wanted_source(need))} there: "
        "an older aigo-apply gave both one folder, and it is never used for another source",
        f"{move}remove it, then plan again; a model that runs on it now serves those files: "
        f"`aigo-apply apply --replace {need['models'][0]}` then downloads {label(need)} and starts it on that",
        f"model.{need['models'][0]}",
    )


def lock_moves(
    desired: DesiredState, observed: ObservedState, actions: list[Action], remote: Mapping[HubKey, HubAnswer]
) -> list[Action]:
    """With `apply --locked`, a model whose folder (or a repo adapter's) holds another commit than
    aigo.lock records is replaced once the recorded commit is downloaded (its files change under it)."""
    moving: dict[str, str] = {}
    for need in downloads(desired.specs()):
        pin = (remote.get(hub_key(need)) or HubAnswer()).pin
        here = marker_for(observed.model_files, need).get("commit")
        if pin and here and here != pin:
            moving.update(dict.fromkeys(need["models"], pin))
    out = []
    for action in actions:
        if action.model in moving and action.kind in ("noop", "start"):
            reason = f"its model files move to commit {moving[action.model][:12]} (aigo.lock)"
            action = dataclasses.replace(
                action,
                kind="recreate",
                reasons=(reason,),
                changes=(),
                ready_timeout=desired.models[action.model].ready_timeout,
            )
        out.append(action)
    return out


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def _quant_family(method: str) -> str:
    """awq_marlin and auto_awq are kernels for an awq checkpoint; modelopt_fp4 for a modelopt one..."""
    return method.lower().removeprefix("auto_").replace("-", "_").split("_")[0]


def checkpoint_notes(
    desired: DesiredState, actions: list[Action], checkpoints: Mapping[str, Mapping[str, Any]]
) -> tuple[list[Action], list[Blocker]]:
    """Say when a checkpoint is pre-quantized; block a quantization setting that contradicts it."""
    out, blockers = [], []
    for action in actions:
        method = checkpoints.get(action.model or "", {}).get("quant_method") if action.kind != "remove" else None
        if not method or action.model is None:  # a model's action names its model
            out.append(action)
            continue
        model = desired.models[action.model]
        setting = model.spec.get("vllm", {}).get("quantization") if model.spec["engine"] == "vllm" else None
        note = f"pre-quantized checkpoint ({method}, from config.json); the engine reads its quantization from it"
        out.append(dataclasses.replace(action, notes=tuple(action.notes) + (note,)))
        if setting and _quant_family(setting) != _quant_family(method):
            blockers.append(
                Blocker(
                    "model.quantization",
                    f"models.{action.model}.vllm.quantization is '{setting}', but the checkpoint is "
                    f"quantized with '{method}' (config.json quantization_config.quant_method); vLLM would refuse it",
                    f"remove vllm.quantization (vLLM then uses the checkpoint's own method), or name a {method} kernel",
                    action.address,
                )
            )
    return out, blockers
