"""The validation-time half of the mount policy (config/host_paths.py): every host path a file
mounts, each checked where it is written, so a config from a shared repository that would mount
~/.ssh or /etc, or a path that cannot be followed, is refused at its line before anything runs.
Pure: where each path leads, and who else could write a store, come gathered (config/path_facts)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from aigo_apply.config.finder import Finder
from aigo_apply.config.host_paths import UNRESOLVABLE_FIX, expand_home, path_text_problem, short, unsafe_mount
from aigo_apply.config.path_facts import HostPaths
from aigo_apply.config.yaml_source import Path_


def mount_places(data: Mapping[str, object], models: Mapping[str, object]) -> list[tuple[Path_, str]]:
    """Every host path the file mounts (model sources, speculative drafts, adapters) and the model store."""
    places: list[tuple[Path_, str]] = []
    for alias, model in models.items():
        if not isinstance(model, dict):
            continue
        source = model.get("source")
        if isinstance(source, dict) and isinstance(source.get("path"), str):
            places.append((("models", alias, "source", "path"), source["path"]))
        spec = model.get("vllm", {}).get("speculative") if isinstance(model.get("vllm"), dict) else None
        draft = spec.get("draft") if isinstance(spec, dict) else None
        if isinstance(draft, dict) and isinstance(draft.get("path"), str):
            places.append((("models", alias, "vllm", "speculative", "draft", "path"), draft["path"]))
        adapters = model.get("adapters")
        for name, adapter in (adapters if isinstance(adapters, dict) else {}).items():
            source = adapter.get("source") if isinstance(adapter, dict) else None
            if isinstance(source, dict) and isinstance(source.get("path"), str):
                places.append((("models", alias, "adapters", name, "source", "path"), source["path"]))
    defaults = data.get("defaults")
    if isinstance(defaults, dict) and isinstance(defaults.get("models_dir"), str):
        places.append((("defaults", "models_dir"), defaults["models_dir"]))
    return places


def check_paths(data: Mapping[str, object], models: Mapping[str, object], f: Finder, paths: HostPaths) -> None:
    """A model folder is mounted into a container: it must be a model's folder or file, not the
    host's secrets or system (a config from a shared repo must not mount ~/.ssh or /etc), and a
    path that cannot be followed (a symlink loop, a name too long) is refused here, where it is
    written. `paths`: the host's facts for this file (observe/host_paths.file_facts)."""
    assert paths.base_dir is not None, "the file's facts name its folder"
    base, written_home, home = paths.base_dir, paths.home, paths.home_real
    protected = paths.protected
    store_protected = tuple(p for p in protected if p.inside_too)
    mine = paths.mine(home)

    def verdict(raw: str, is_store: bool) -> tuple[Path | str, str | None]:
        """The path resolved (or why it cannot be) and why it may not be mounted (or None)."""
        resolved = paths.real_of(base / expand_home(raw, written_home))
        if isinstance(resolved, str):
            return resolved, None
        places = store_protected if is_store else protected
        others = paths.others(resolved) if is_store else None
        why = unsafe_mount(resolved, home, places, store=is_store, homes=paths.homes, mine=mine, others=others) or (
            path_text_problem(str(resolved)) and f"a path that {path_text_problem(str(resolved))}"
        )
        return resolved, why

    verdicts: dict[tuple[str, bool], tuple[Path | str, str | None]] = {}  # models sharing a folder: once
    for where, raw in mount_places(data, models):
        problem = path_text_problem(raw)
        if problem:  # control characters are the schema's to report; ':' and ',' are Docker's
            if "control character" not in problem:
                f.at_value(where, f"the path {problem}; rename the folder or file (or link it under a plain name)")
            continue
        is_store = where[0] == "defaults"
        if (raw, is_store) not in verdicts:
            verdicts[raw, is_store] = verdict(raw, is_store)
        resolved, why = verdicts[raw, is_store]
        if isinstance(resolved, str):
            f.at_value(where, f"{short(raw)!r} cannot be resolved: {resolved}; {UNRESOLVABLE_FIX}")
        elif why:
            fix = (
                "downloads go there and are mounted into engines: choose a folder of their own"
                if is_store
                else "engines get this mounted, so it must be the model's (or adapter's) own folder or file: point it there"
            )
            f.at_value(where, f"{raw!r} is {why} ({resolved}); {fix}")
