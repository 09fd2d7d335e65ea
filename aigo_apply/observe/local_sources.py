"""Reads whether each model's local source (`source.path`, a speculative draft's `path`) is on this
host as the plan needs it: a folder with the model's config.json, or a .gguf file (every part of a
split one). Docker creates a missing bind-mount folder, empty and as root, so a missing path must
stop the plan before anything changes; so must one that cannot be read (permission denied, a
symlink loop, a name too long): said in words, never raised. A folder's config.json is judged as the
plan reads it (model_files.judge): a FIFO, a device or a link out of the folder is a problem too.
Returns plain data: alias -> what is wrong (empty when fine)."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from aigo_apply.config.host_paths import OS_WHY
from aigo_apply.desired.model_store import gguf_parts
from aigo_apply.desired.spec import ModelSpec
from aigo_apply.observe.host_paths import try_resolve
from aigo_apply.observe.model_files import MAX_CONFIG, Unreadable, judge


def local_source_problems(specs: Mapping[str, ModelSpec]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    folders: dict[tuple[str, str], list[str]] = {}  # several aliases of one folder: it is read once

    def folder(path: str, what: str) -> list[str]:
        if (path, what) not in folders:
            folders[(path, what)] = _folder_problems(Path(path), what)
        return folders[(path, what)]

    for alias, spec in sorted(specs.items()):
        problems: list[str] = []
        if "path" in spec.get("source", {}):
            if "model_file" in spec:
                problems += _file_problems(Path(spec["model_dir"]), spec["model_file"])
            else:
                problems += folder(spec["model_dir"], "source.path")
        draft = spec.get("vllm", {}).get("speculative", {}).get("draft", {})
        if "path" in draft:
            problems += folder(draft["path"], "the speculative draft")
        if problems:
            out[alias] = problems
    return out


def _folder_problems(folder: Path, what: str) -> list[str]:
    st = _stat(folder)
    if isinstance(st, str):
        return [f"{what} {folder} {st}"]
    if not stat.S_ISDIR(st.st_mode):
        return [f"{what} {folder} is a file; the engine needs the model's folder (config.json and weights)"]
    try:  # judged as the plan reads it (model_files): a regular file in the folder, also through a link
        judge(folder, "config.json", MAX_CONFIG)
    except FileNotFoundError:
        return [f"{what} {folder} holds no config.json, so it is not a model folder"]
    except Unreadable as exc:
        return [f"{what} {folder}: {exc}"]
    except OSError as exc:
        why = OS_WHY.get(exc.errno or 0, exc.strerror or type(exc).__name__)
        return [f"{what} {folder}: its config.json cannot be read: {why}"]
    except ValueError:
        return [f"{what} {folder}: its config.json cannot be read: it holds a character no file name can hold"]
    return []


def _file_problems(folder: Path, name: str) -> list[str]:
    problems = []
    for part in gguf_parts(name):
        path = folder / part
        st = _stat(path, follow=False)
        if isinstance(st, str):
            problems.append(f"{path} {st}")
        elif stat.S_ISLNK(st.st_mode):
            problems.append(f"{path} is a symlink; name the file it points to ({try_resolve(path)})")
        elif not stat.S_ISREG(st.st_mode):
            problems.append(f"{path} is not a regular file")
    return problems


def _stat(path: Path, follow: bool = True) -> os.stat_result | str:
    """The path's stat, or what stops it as words (never an exception): it does not exist, a part
    of it is a file, permission denied, a symlink loop, a name too long."""
    try:
        return os.stat(path, follow_symlinks=follow)
    except FileNotFoundError:
        return "does not exist on this machine"
    except OSError as exc:
        return f"cannot be read: {OS_WHY.get(exc.errno or 0, exc.strerror or type(exc).__name__)}"
    except ValueError:
        return "cannot be read: it holds a character no file name can hold"
