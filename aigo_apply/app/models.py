"""The `aigo-apply models` commands: download the models a file names ahead of time (so an apply
later downloads nothing), and list what the model store on this host holds. A model's LoRA adapters
given by repo are its downloads too: pulled with it, and listed as used by it (marked as adapters)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aigo_apply.apply.fetch_steps import download_folder
from aigo_apply.apply.outcome import Reporter
from aigo_apply.desired.model_store import MARKER, downloads, kind_of, label
from aigo_apply.desired.types import DesiredState
from aigo_apply.errors import UsageProblem
from aigo_apply.observe.markers import read_marker


def pull(desired: DesiredState, aliases: tuple[str, ...], reporter: Reporter) -> list[dict[str, Any]]:
    """Download every missing folder of the named models (all models when none are named)."""
    if off := sorted(set(aliases) & set(desired.disabled)):
        raise UsageProblem(
            f"model {', '.join(off)} is disabled in {desired.file} (enabled: false): enable it to download it"
        )
    unknown = sorted(set(aliases) - set(desired.models))
    if unknown:
        raise UsageProblem(f"no model {', '.join(unknown)} in {desired.file}; models: {', '.join(desired.models)}")

    wanted = set(aliases) or set(desired.models)
    done = []
    for need in downloads({a: spec for a, spec in desired.specs().items() if a in wanted}):
        marker = download_folder(f"download.{label(need)}", need, reporter)
        if marker is not None:
            done.append(marker)
    return done


def listing(desired: DesiredState, store: Path) -> list[dict[str, Any]]:
    """What the store holds (every completed folder), and the file's models that are missing."""
    users: dict[str, list[str]] = {}
    adapters: set[str] = set()
    for need in downloads(desired.specs()):
        users.setdefault(need["dest"], []).extend(need["models"])
        if kind_of(need) == "adapter":
            adapters.add(need["dest"])
    rows = []
    for marker_path in sorted(store.glob(f"*/*/{MARKER}")):
        marker = read_marker(marker_path.parent) or {}
        folder = str(marker_path.parent)
        rows.append(
            {
                "repo": marker.get("repo"),
                "revision": marker.get("revision"),
                "commit": marker.get("commit"),
                "bytes": sum(marker.get("files", {}).values()),
                "files": len(marker.get("files", {})),
                "folder": folder,
                "downloaded_at": marker.get("downloaded_at"),
                "used_by": sorted(users.pop(folder, [])),
                **({"kind": "adapter"} if marker.get("kind") == "adapter" else {}),
            }
        )
    for folder, aliases in sorted(users.items()):
        rows.append(
            {
                "repo": None,
                "revision": None,
                "commit": None,
                "bytes": None,
                "files": 0,
                "folder": folder,
                "downloaded_at": None,
                "used_by": sorted(aliases),
                "missing": True,
                **({"kind": "adapter"} if folder in adapters else {}),
            }
        )
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "The model store is empty, and the file names no Hugging Face model."
    lines = []
    for row in rows:
        adapter = "LoRA adapter " if row.get("kind") == "adapter" else ""
        if row.get("missing"):
            lines.append(
                f"missing     {adapter}{row['folder']}  (used by {', '.join(row['used_by'])}; `aigo-apply models pull`)"
            )
            continue
        used = f"used by {', '.join(row['used_by'])}" if row["used_by"] else "not used by this file"
        lines.append(
            f"{adapter}{row['repo']}@{row['revision']}  commit {str(row['commit'])[:12]}  {row['bytes'] / 1e9:.2f} GB "
            f"in {row['files']} files  {used}\n    {row['folder']}"
        )
    return "\n".join(lines)
