"""`aigo.lock`, next to the config file: what a successful apply installed, so a config repo can
reproduce a workstation exactly. It records each image the file uses (its local id and registry
digest) and each Hugging Face repo@revision (the commit it resolved to; a model's LoRA adapter given
by repo too, under `models` as `adapter:repo@revision`, with the models that serve it and its `adapters`), and, for the record, the
last canary gate each model passed (both engines' figures beside the image the new one ran). `plan` reports drift from
it; `apply --locked` downloads exactly the recorded commits and puts the recorded images back
(re-tagged when still on the machine, else pulled by digest).

JSON with sorted keys, so it diffs cleanly in git. Pure: platforms/lock_file.py reads and writes the file.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aigo_apply.desired.model_store import ADAPTER_LABEL, downloads, label, marker_for
from aigo_apply.desired.types import DesiredState
from aigo_apply.errors import AigoError, shown_path, visible
from aigo_apply.json_types import text
from aigo_apply.safe_read import LOCK, BadData, json_value

FORMAT = 1
NAME = "aigo.lock"
IMAGE_ID = re.compile(r"sha256:[0-9a-f]{64}")
DIGEST = re.compile(r"[^@\s]+@sha256:[0-9a-f]{64}")


def parse(raw: bytes, path: Path) -> dict[str, Any]:
    """The lock file's bytes (read by platforms/lock_file.py) as checked data, or an AigoError naming `path`."""
    where = shown_path(str(path))  # on its line, whatever the folder is called
    try:  # bounded: nesting, and numbers (a huge integer or 1e999 is refused, never a traceback)
        data = json_value(raw, LOCK.depth)
    except BadData as exc:
        raise AigoError(f"{where}: not a readable lock file: it {exc}; {LOCK.fix}") from None
    version = data.get("version") if isinstance(data, dict) else None
    if not isinstance(data, dict) or type(version) is not int or version != FORMAT:  # `true` is no 1
        raise AigoError(f"{where}: not an aigo-apply lock file of version {FORMAT}; delete it and apply again")
    data.setdefault("images", {})
    data.setdefault("models", {})
    problem = _shape_problem(data)
    if problem:
        raise AigoError(
            f"{where}: {problem}: the lock file was edited or damaged; restore it from git, or delete it and "
            "apply again to write a new one"
        )
    data["models"] = _with_kinds(data["models"])
    return data


def _with_kinds(models: dict[str, Any]) -> dict[str, Any]:
    """`models` keyed as this release writes them (model_store.label). A lock written before keys named
    the kind keyed a LoRA adapter's download as `repo@revision` too, with its aliases in `adapters`:
    such an entry is the adapter's (`adapter:repo@revision`), the others are models'. Where a model and
    an adapter shared one repo@revision such a lock kept only the adapter's commit: the model has none
    in it (drift says nothing of it, and `apply --locked` asks for an apply without --locked first),
    never the adapter's."""
    out = {key: entry for key, entry in models.items() if key.startswith(ADAPTER_LABEL) or not entry.get("adapters")}
    for key, entry in models.items():
        if not key.startswith(ADAPTER_LABEL) and entry.get("adapters"):
            out.setdefault(ADAPTER_LABEL + key, entry)
    return out


def text_of(data: dict[str, Any]) -> bytes:
    """What the lock file holds for `data`: JSON with sorted keys, so it diffs cleanly in git."""
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8")


def _shape_problem(data: dict[str, Any]) -> str | None:
    """Where a lock file (from a repository, maybe edited by hand) is not what `write` makes."""
    for section, fields in (("images", ("id", "digest")), ("models", ("commit",))):
        entries = data[section]
        if not isinstance(entries, dict):
            return f"{section} is not a mapping"
        for name_in_file, entry in entries.items():
            key = visible(name_in_file)  # on its line in the message, whatever it holds
            if not isinstance(entry, dict):
                return f"{section}.{key} is not a mapping"
            for name in fields:
                if entry.get(name) is not None and not isinstance(entry[name], str):
                    return f"{section}.{key}.{name} is not text"
            if section == "models" and not isinstance(entry.get("commit"), str):
                return f"models.{key}.commit is missing"
            for names in ("models", "adapters") if section == "models" else ():
                if not (
                    isinstance(entry.get(names, []), list) and all(isinstance(m, str) for m in entry.get(names, []))
                ):
                    return f"models.{key}.{names} is not a list of aliases"
    canary = data.get("canary", {})
    if not isinstance(canary, dict) or not all(isinstance(v, dict) for v in canary.values()):
        return "canary is not a mapping of models to their last measurement"
    return None


def with_canaries(
    data: dict[str, Any],
    desired: DesiredState,
    measured: tuple[dict[str, Any], ...],
    previous: dict[str, Any],
) -> dict[str, Any]:
    """`data` (build's) with each model's last passed canary gate: this run's, else the one the lock
    held while the model is in the file. Each records the image the new engine ran (with its id as
    the lock has it), when, the settings and both engines' figures."""
    images = data["images"]
    records = {  # a record holds while the model runs the image it measured (else it describes nothing here)
        alias: entry
        for alias, entry in previous.items()
        if alias in desired.models and entry.get("image") == desired.models[alias].container.image
    }
    for result in measured:
        alias = result.get("model")
        if not result.get("passed") or alias not in desired.models:
            continue
        image = desired.models[alias].container.image
        records[alias] = {
            "image": image,
            "image_id": (images.get(image) or {}).get("id"),
            "measured_at": result.get("measured_at"),
            "settings": result.get("settings"),
            "old": result.get("old"),
            "new": result.get("new"),
            "slowdown": result.get("slowdown"),
        }
    return {**data, "canary": dict(sorted(records.items()))} if records else data


def build(desired: DesiredState, images: list[dict[str, Any]], markers: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The lock of what this machine runs for `desired`: images from GET /images/json, model commits
    from the download markers of the model store."""
    by_tag = {tag: image for image in images for tag in image.get("RepoTags") or []}
    locked_images = {}
    for ref in sorted(desired.images()):
        image = by_tag.get(ref)
        if image:
            repo = ref.rsplit(":", 1)[0]
            digest = next((d for d in image.get("RepoDigests") or [] if d.startswith(repo + "@")), None)
            locked_images[ref] = {"id": image.get("Id"), "digest": digest}
    locked_models = {}
    for need in downloads(desired.specs()):
        marker = marker_for(markers, need)  # a marker of another source says nothing of this one
        if marker.get("commit"):
            entry = {"commit": marker["commit"], "models": sorted(need["models"])}
            if need.get("adapters"):  # a LoRA adapter's download: the adapters' aliases beside their models'
                entry["adapters"] = sorted(need["adapters"])
            locked_models[label(need)] = entry
    return {"version": FORMAT, "project": desired.project, "images": locked_images, "models": locked_models}


def drift(
    lock: dict[str, Any],
    desired: DesiredState,
    images: dict[str, str],
    markers: dict[str, dict[str, Any]],
    hub_commits: dict[str, str],
) -> list[str]:
    """Where this machine or the Hub no longer matches the lock (plan warnings). `images` maps local
    tags to ids; `hub_commits` maps repo@revision keys to the commit the Hub names now."""
    out = []
    for ref, entry in sorted(lock["images"].items()):
        local = images.get(ref)
        if local and entry.get("id") and local != entry["id"]:
            out.append(
                f"image {ref} is now {local[:19]}, aigo.lock records {entry['id'][:19]}"
                + (f" ({entry['digest']})" if entry.get("digest") else "")
            )
    for need in downloads(desired.specs()):
        entry = lock["models"].get(label(need))
        if not entry:
            continue
        here = text(marker_for(markers, need).get("commit"))
        if here and here != entry["commit"]:
            out.append(f"{label(need)} on this machine is commit {here[:12]}, aigo.lock records {entry['commit'][:12]}")
        now = hub_commits.get(label(need))
        if now and now != entry["commit"]:
            out.append(
                f"{label(need)} now points to commit {now[:12]} on the Hub; aigo.lock records "
                f"{entry['commit'][:12]} (`apply --locked` installs the recorded one)"
            )
    return out


@dataclass(frozen=True)
class LockRestore:
    """How `apply --locked` puts back the image aigo.lock records for a tag: re-tag `locked_id` when
    it is still on this machine, or pull `digest` (repo@sha256:...) and tag that."""

    locked_id: str
    how: str  # "retag" | "pull"
    digest: str | None = None

    def to_spec(self) -> dict[str, Any]:
        """The pull action's `spec` in the plan JSON."""
        return {"locked_id": self.locked_id, "how": self.how, **({"digest": self.digest} if self.digest else {})}

    @classmethod
    def from_spec(cls, ref: str, spec: Any) -> LockRestore | None:
        """A pull action's spec read back, or None when it is not one restore_for makes (an edited
        plan): checked again right before tagging."""
        if not isinstance(spec, dict) or not valid_restore(ref, spec):
            return None
        return cls(str(spec["locked_id"]), str(spec["how"]), spec.get("digest"))


def restore_for(ref: str, entry: dict[str, Any], local_ids: frozenset[str]) -> LockRestore | None:
    """How `apply --locked` puts the image aigo.lock records for `ref` back: re-tag it when it is
    still on this machine, else pull its registry digest; None when neither is possible."""
    image_id, digest = str(entry.get("id") or ""), entry.get("digest")
    if not IMAGE_ID.fullmatch(image_id):
        return None
    if image_id in local_ids:
        return LockRestore(image_id, "retag")
    if _digest_of(ref, digest):
        return LockRestore(image_id, "pull", str(digest))
    return None


def valid_restore(ref: str, restore: dict[str, Any]) -> bool:
    """Whether a (saved) plan's restore is one restore_for makes: checked again before tagging."""
    return IMAGE_ID.fullmatch(str(restore.get("locked_id"))) is not None and (
        restore.get("how") == "retag" or (restore.get("how") == "pull" and _digest_of(ref, restore.get("digest")))
    )


def _digest_of(ref: str, digest: Any) -> bool:
    """A registry digest of the same repository as `ref` (repo@sha256:...)."""
    return (
        isinstance(digest, str)
        and DIGEST.fullmatch(digest) is not None
        and digest.split("@")[0] == ref.rpartition(":")[0]
    )
