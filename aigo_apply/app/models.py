"""The `aigo-apply models` commands: download the models a file names ahead of time (so an apply
later downloads nothing), and list what the model store on this host holds. A model's LoRA adapters
given by repo are its downloads too: pulled with it, and listed as used by it (marked as adapters)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from aigo_apply.desired.model_store import (
    ADAPTERS,
    KINDS,
    MARKER,
    Download,
    downloads,
    kind_of,
    label,
    repo_dir,
    source_of,
    source_text,
    wanted_source,
)
from aigo_apply.desired.types import DesiredState
from aigo_apply.errors import UsageProblem
from aigo_apply.json_types import JsonObject, JsonValue, maybe_text
from aigo_apply.observe.markers import marker_or_why
from aigo_apply.platforms.docker.fetch_steps import download_folder
from aigo_apply.platforms.outcome import Reporter


def pull(desired: DesiredState, aliases: tuple[str, ...], reporter: Reporter) -> list[dict[str, object]]:
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


def listing(desired: DesiredState, store: Path) -> list[JsonObject]:
    """What the store holds (every completed folder, with the source its marker records), and the
    file's models that are missing. A folder's models are those that need the source it holds; one
    that needs another source there is its `mismatch` (the plan blocks on it), and a folder that is
    not where the store keeps the source it holds (an older layout's) says where that is (`moved`)."""
    users: dict[str, list[Download]] = {}
    for need in downloads(desired.specs()):
        users.setdefault(need["dest"], []).append(need)
    rows: list[JsonObject] = []
    found = [*store.glob(f"*/*/{MARKER}"), *store.glob(f"{ADAPTERS}/*/*/{MARKER}")]
    for marker_path in sorted(p for p in found if not p.parent.name.startswith(".")):  # not a staging folder
        found_marker, invalid = marker_or_why(marker_path.parent)  # a damaged marker is shown as such
        marker, folder = found_marker or {}, str(marker_path.parent)
        files = marker.get("files", {})  # marker_shape: names -> sizes
        sizes = files if isinstance(files, dict) else {}
        recorded = source_of(marker)
        needs = users.pop(folder, []) if recorded else []  # one that records no source: they miss it
        other = [n for n in needs if wanted_source(n) != recorded]
        home = repo_dir(store, recorded[1], recorded[2], recorded[0]) if recorded and recorded[0] in KINDS else None
        rows.append(
            {
                "repo": maybe_text(marker.get("repo")),
                "revision": maybe_text(marker.get("revision")),
                "commit": maybe_text(marker.get("commit")),
                "bytes": sum(sizes.values()),
                "files": len(sizes),
                "folder": folder,
                "downloaded_at": maybe_text(marker.get("downloaded_at")),
                "used_by": _used_by(n for n in needs if wanted_source(n) == recorded),
                **({"kind": "adapter"} if marker.get("kind") == "adapter" else {}),
                **({"invalid": invalid} if invalid else {}),
                **({"mismatch": _mismatch(other)} if other else {}),
                **({"moved": str(home)} if home is not None and str(home) != folder else {}),
            }
        )
    for folder, needs in sorted(users.items()):
        rows.append(
            {
                "repo": None,
                "revision": None,
                "commit": None,
                "bytes": None,
                "files": 0,
                "folder": folder,
                "downloaded_at": None,
                "used_by": _used_by(needs),
                "missing": True,
                **({"kind": "adapter"} if any(kind_of(n) == "adapter" for n in needs) else {}),
            }
        )
    return rows


def _used_by(needs: Iterable[Download]) -> list[JsonValue]:
    """The aliases of the models that need these downloads, sorted."""
    return [*sorted({a for n in needs for a in n["models"]})]


def _mismatch(needs: list[Download]) -> str:
    """Which models need which other sources in a folder than the one its marker records."""
    aliases = sorted({a for n in needs for a in n["models"]})
    wanted = ", ".join(sorted({source_text(wanted_source(n)) for n in needs}))
    return f"model{'s' if len(aliases) > 1 else ''} {', '.join(aliases)} need{'' if len(aliases) > 1 else 's'} {wanted}"


def render(rows: list[JsonObject]) -> str:
    if not rows:
        return "The model store is empty, and the file names no Hugging Face model."
    lines = []
    for row in rows:
        adapter = "LoRA adapter " if row.get("kind") == "adapter" else ""
        if row.get("missing"):
            lines.append(
                f"missing     {adapter}{row['folder']}  (used by {_aliases(row['used_by'])}; `aigo-apply models pull`)"
            )
            continue
        if row.get("invalid"):
            lines.append(
                f"invalid     {row['folder']}  (its download marker {row['invalid']}; `aigo-apply models pull` "
                "downloads the folder again)"
            )
            continue
        used = f"used by {_aliases(row['used_by'])}" if row["used_by"] else "not used by this file"
        lines.append(
            f"{adapter}{row['repo']}@{row['revision']}  commit {str(row['commit'])[:12]}  {_gb(row['bytes'])} GB "
            f"in {row['files']} files  {used}\n    {row['folder']}"
        )
        if row.get("mismatch"):
            lines.append(
                f"    MISMATCH: {row['mismatch']} here: the plan blocks until this folder is moved away or removed"
            )
        if row.get("moved"):
            lines.append(f"    an older aigo-apply's folder: the store keeps this source in {row['moved']} now")
    return "\n".join(lines)


def _aliases(used_by: JsonValue) -> str:
    """A row's `used_by` (the aliases listing makes it), comma-separated."""
    aliases = [a for a in used_by if isinstance(a, str)] if isinstance(used_by, list) else []
    if not isinstance(used_by, list) or len(aliases) != len(used_by):
        raise TypeError(f"used_by is a list of aliases, not {used_by!r}")
    return ", ".join(aliases)


def _gb(size: JsonValue) -> str:
    """A row's `bytes` in GB."""
    if not isinstance(size, int | float):
        raise TypeError(f"bytes is a number, not {size!r}")
    return f"{size / 1e9:.2f}"
