"""Reads whether each model's local source (`source.path`, a speculative draft's `path`) is on this
host as the plan needs it: a folder with the model's config.json, or a .gguf file (every part of a
split one). Docker creates a missing bind-mount folder, empty and as root, so a missing path must
stop the plan before anything changes. Returns plain data: alias -> what is wrong (empty when fine)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from aigo_apply.desired.model_store import gguf_parts


def local_source_problems(specs: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for alias, spec in sorted(specs.items()):
        problems: list[str] = []
        if "path" in spec.get("source", {}):
            if "model_file" in spec:
                problems += _file_problems(Path(spec["model_dir"]), spec["model_file"])
            else:
                problems += _folder_problems(Path(spec["model_dir"]), "source.path")
        draft = spec.get("vllm", {}).get("speculative", {}).get("draft", {})
        if "path" in draft:
            problems += _folder_problems(Path(draft["path"]), "the speculative draft")
        if problems:
            out[alias] = problems
    return out


def _folder_problems(folder: Path, what: str) -> list[str]:
    if not folder.exists():
        return [f"{what} {folder} does not exist on this machine"]
    if not folder.is_dir():
        return [f"{what} {folder} is a file; the engine needs the model's folder (config.json and weights)"]
    if not (folder / "config.json").is_file():
        return [f"{what} {folder} holds no config.json, so it is not a model folder"]
    return []


def _file_problems(folder: Path, name: str) -> list[str]:
    problems = []
    for part in gguf_parts(name):
        path = folder / part
        if not os.path.lexists(path):
            problems.append(f"{path} does not exist on this machine")
        elif path.is_symlink():
            problems.append(f"{path} is a symlink; name the file it points to ({os.path.realpath(path)})")
        elif not path.is_file():
            problems.append(f"{path} is not a regular file")
    return problems
