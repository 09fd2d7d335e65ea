"""Reads what a LoRA adapter's folder holds, as vLLM v0.31.0 loads it (vllm/lora/peft_helper.py): an
adapter_config.json with its rank `r`, `target_modules` and the `base_model_name_or_path` it was
trained on, and safetensors weights beside it. Returns plain data (AdapterFiles) and never raises: a
folder that is missing, unreadable or not an adapter says why in `problem`, which the plan shows as a
blocker (Docker would create a missing bind-mount folder empty, and vLLM refuses an adapter it
cannot load only once the engine starts). Its files are read as a model's are (model_files.folder_file):
a FIFO, device or link out of the folder is a problem in words, never a wait or a read elsewhere."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from aigo_apply.config.host_paths import OS_WHY
from aigo_apply.desired.types import AdapterFiles
from aigo_apply.json_types import JsonValue
from aigo_apply.observe.model_files import Unreadable, read_folder_file
from aigo_apply.safe_read import BadData, json_value

CONFIG = "adapter_config.json"
MAX_CONFIG_BYTES = 1024 * 1024  # peft writes about 1 KiB
MAX_RANK = 1 << 20


def adapter_files(folders: list[str]) -> dict[str, AdapterFiles]:
    """folder -> what it holds, for each adapter folder the desired state names."""
    return {folder: read_adapter(Path(folder)) for folder in folders}


def read_adapter(folder: Path) -> AdapterFiles:
    try:
        st = os.stat(folder)
        if not stat.S_ISDIR(st.st_mode):
            return AdapterFiles(problem=f"{folder} is a file; an adapter is a folder ({CONFIG} and safetensors)")
        names = os.listdir(folder)
    except FileNotFoundError:
        return AdapterFiles(problem=f"{folder} does not exist on this machine")
    except OSError as exc:
        return AdapterFiles(problem=f"{folder} cannot be read: {OS_WHY.get(exc.errno or 0, exc.strerror or '')}")
    except ValueError:
        return AdapterFiles(problem=f"{folder} cannot be read: it holds a character no file name can hold")
    if CONFIG not in names:
        return AdapterFiles(problem=f"{folder} holds no {CONFIG}, so it is not a LoRA adapter (peft's layout)")
    parsed = _config(folder)
    if isinstance(parsed, str):
        return AdapterFiles(problem=parsed)
    rank, modules, base = parsed
    if not any(name.endswith(".safetensors") for name in names):
        return AdapterFiles(rank, modules, base, f"{folder} holds no .safetensors weights (adapter_model.safetensors)")
    return AdapterFiles(rank, modules, base)


def _config(folder: Path) -> tuple[int, tuple[str, ...], str | None] | str:
    """(r, target modules, base model) from FOLDER/adapter_config.json, or what is wrong with it, in
    words: read as model_files reads a model's files (a regular file inside the folder, also through a
    symlink; a FIFO or device refused without waiting; at most MAX_CONFIG_BYTES)."""
    path = folder / CONFIG
    try:
        raw = read_folder_file(folder, CONFIG, MAX_CONFIG_BYTES)
    except Unreadable as exc:
        return str(exc)
    except OSError as exc:
        return f"{path} cannot be read: {OS_WHY.get(exc.errno or 0, exc.strerror or type(exc).__name__)}"
    except ValueError:
        return f"{path} cannot be read: it holds a character no file name can hold"
    try:  # bounded as every file from outside: nesting, digits, finite numbers
        data: JsonValue = json_value(raw, 16)
    except BadData as exc:
        return f"{path} {exc}"
    facts = config_facts(data)
    return f"{path} {facts}" if isinstance(facts, str) else facts


def hub_adapter(where: str, data: JsonValue) -> AdapterFiles:
    """What a repo adapter's adapter_config.json on the Hub says (`data`: the parsed JSON, None when
    the repo has none or it is not JSON), before any of it is downloaded: its rank sizes the engine's
    --max-lora-rank in the plan, and a config vLLM cannot load blocks the plan before the download."""
    parsed = config_facts(data) if data is not None else "is not JSON or cannot be read"
    if isinstance(parsed, str):
        return AdapterFiles(problem=f"{where}: {CONFIG} on the Hub {parsed}", hub=True)
    return AdapterFiles(*parsed, hub=True)


def config_facts(data: JsonValue) -> tuple[int, tuple[str, ...], str | None] | str:
    """(r, target modules, base model) from a parsed adapter_config.json, or what is wrong with it."""
    if not isinstance(data, dict):
        return "is not a JSON object"
    rank = data.get("r")
    if type(rank) is not int or not 1 <= rank <= MAX_RANK:
        return f"declares no rank vLLM can load (r: {rank!r}; vLLM needs a positive whole number)"
    targets = data.get("target_modules")
    modules = (
        (targets,)
        if isinstance(targets, str)
        else tuple(t for t in targets if isinstance(t, str))
        if isinstance(targets, list)
        else ()
    )
    base = data.get("base_model_name_or_path")
    return rank, tuple(sorted(modules))[:64], base if isinstance(base, str) and base else None
