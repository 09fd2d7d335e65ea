"""Reads what a LoRA adapter's folder holds, as vLLM v0.31.0 loads it (vllm/lora/peft_helper.py): an
adapter_config.json with its rank `r`, `target_modules` and the `base_model_name_or_path` it was
trained on, and safetensors weights beside it. Returns plain data (AdapterFiles) and never raises: a
folder that is missing, unreadable or not an adapter says why in `problem`, which the plan shows as a
blocker (Docker would create a missing bind-mount folder empty, and vLLM refuses an adapter it
cannot load only once the engine starts)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from aigo_apply.config.host_paths import OS_WHY
from aigo_apply.desired.types import AdapterFiles

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
    parsed = _config(folder / CONFIG)
    if isinstance(parsed, str):
        return AdapterFiles(problem=f"{folder}/{CONFIG} {parsed}")
    rank, modules, base = parsed
    if not any(name.endswith(".safetensors") for name in names):
        return AdapterFiles(rank, modules, base, f"{folder} holds no .safetensors weights (adapter_model.safetensors)")
    return AdapterFiles(rank, modules, base)


def _config(path: Path) -> tuple[int, tuple[str, ...], str | None] | str:
    """(r, target modules, base model) from adapter_config.json, or what is wrong with it, in words."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        return f"cannot be read: {OS_WHY.get(exc.errno or 0, exc.strerror or '')}"
    if len(raw) > MAX_CONFIG_BYTES:
        return f"is larger than {MAX_CONFIG_BYTES} bytes, which no adapter config is"
    try:
        data: Any = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return "is not JSON"
    return config_facts(data)


def hub_adapter(where: str, data: Any) -> AdapterFiles:
    """What a repo adapter's adapter_config.json on the Hub says (`data`: the parsed JSON, None when
    the repo has none or it is not JSON), before any of it is downloaded: its rank sizes the engine's
    --max-lora-rank in the plan, and a config vLLM cannot load blocks the plan before the download."""
    parsed = config_facts(data) if data is not None else "is not JSON or cannot be read"
    if isinstance(parsed, str):
        return AdapterFiles(problem=f"{where}: {CONFIG} on the Hub {parsed}", hub=True)
    return AdapterFiles(*parsed, hub=True)


def config_facts(data: Any) -> tuple[int, tuple[str, ...], str | None] | str:
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
