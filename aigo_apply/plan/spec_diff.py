"""What changed between a container's recorded spec and the desired one, field by field (a list counts
as one value), and whether its image tag now names another image: the `changes` of a plan's actions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aigo_apply.config.doc_path import dotted
from aigo_apply.json_types import obj
from aigo_apply.observe.containers import ObservedContainer
from aigo_apply.plan.plan_file import Effect
from aigo_apply.plan.types import Change


def image_moved(
    ref: str, container: ObservedContainer, images: dict[str, str], effect: Effect = "recreate"
) -> tuple[list[str], list[Change]]:
    """A container made from `ref` (repo:tag), which now names another image on this machine (pulled
    or rebuilt since), runs stale code: recreate it, as docker compose does. An image no longer here,
    or an id Docker did not report, says nothing either way. (Docker's list shows such a container's
    image as a bare id, so the ref comes from the file.)"""
    local, running = images.get(ref), container.image_id
    if not local or not running or local == running:
        return [], []
    return (
        [
            f"image {ref} on this machine is now {local[:19]}; the container runs {running[:19]} "
            "(the tag was pulled or rebuilt since the container was made)"
        ],
        [Change("image_id", running, local, effect)],
    )


def diff_specs(before: Mapping[str, object], after: Mapping[str, object]) -> list[Change]:
    """Field-level changes between two canonical specs; a list counts as one value (gpus: [0, 1] -> [0])."""
    from deepdiff import DeepDiff  # only paid for when something differs

    paths: set[tuple[Any, ...]] = set()
    for level in (lvl for items in DeepDiff(before, after, verbose_level=2).tree.values() for lvl in items):
        path = tuple(level.path(output_format="list"))
        cut = next((i for i, part in enumerate(path) if isinstance(part, int)), len(path))
        paths.add(path[:cut])
    return [Change(dotted(p), _get(before, p), _get(after, p), "recreate") for p in sorted(paths, key=dotted)]


def change_reasons(changes: list[Change]) -> list[str]:
    """One reason per changed field (`logs.max_size changed`), a model's adapters aside (adapter_reasons
    words those). A container made by an aigo-apply that did not rotate logs has no `logs` in its spec:
    that is said as what it is, not as a setting that changed."""
    out = []
    for change in changes:
        if change.path == "logs" and change.before is None and isinstance(change.after, dict):
            out.append(
                f"its logs grow without bound (made by an earlier aigo-apply, before log rotation): it is made "
                f"again with its logs rotated at {change.after.get('max_size')} per file, at most "
                f"{change.after.get('max_files')} files"
            )
        elif not is_adapter_path(change.path):
            out.append(f"{change.path} changed")
    return out


def adapter_reasons(before: Mapping[str, object], after: Mapping[str, object]) -> list[str]:
    """Which of a model's LoRA adapters were added, removed or changed, one reason each: vLLM loads
    adapters only when it starts (aigo-apply never loads them at run time), so each replaces the engine."""
    old, new = obj(before.get("adapters")), obj(after.get("adapters"))
    out = []
    for name in sorted(set(old) | set(new)):
        if name not in old:
            out.append(f"adapter '{name}' added ({_where(new[name])}); vLLM loads adapters only at start")
        elif name not in new:
            out.append(f"adapter '{name}' removed ({_where(old[name])})")
        elif old[name] != new[name]:
            was, now = _where(old[name]), _where(new[name])
            out.append(f"adapter '{name}' changed: {was} -> {now}" if was != now else f"adapter '{name}' changed")
    return out


def is_adapter_path(path: str) -> bool:
    """Whether a change's path lies in the spec's adapters (adapter_reasons words those)."""
    return path == "adapters" or path.startswith("adapters.")


def _where(adapter: object) -> str:
    """An adapter's source as a plan shows it: repo@revision, or its folder."""
    source = obj(obj(adapter).get("source"))
    if "repo" in source:
        return f"{source['repo']}@{source.get('revision', 'main')}"
    return str(source.get("path", "?"))


def _get(data: object, path: tuple[Any, ...]) -> object:
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


def flatten(data: Mapping[str, object], prefix: tuple[str, ...] = ()) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for key, value in sorted(data.items()):
        if isinstance(value, dict) and not (value and set(value) <= {"from_env", "from_file"}):
            out += flatten(value, prefix + (key,))  # an empty mapping (no env) shows nothing
        else:
            out.append((dotted(prefix + (key,)), value))
    return out
