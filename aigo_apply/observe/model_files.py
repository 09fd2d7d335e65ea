"""Reads what the VRAM estimate needs from a model's files on this host: config.json and the
safetensors headers (only the first bytes of each file: the JSON header with every tensor's byte
range), or a GGUF file's size and metadata (aigo_apply.observe.gguf). Returns plain data and never raises:
a model not downloaded yet, or a folder without weights, is "unknown" with the reason, which the plan
shows as a warning."""

from __future__ import annotations

import json
import os
import stat
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aigo_apply.desired.model_store import MARKER, gguf_parts
from aigo_apply.observe import gguf
from aigo_apply.observe.hub_answer import HubAnswer

MAX_HEADER = 100 * 1024 * 1024  # safetensors' own limit on the JSON header


def read_safetensors_header(path: Path) -> dict[str, Any]:
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        if length > MAX_HEADER:
            raise ValueError(f"{path.name}: header of {length} bytes is not a safetensors header")
        header: dict[str, Any] = json.loads(f.read(length))
        return header


def weight_files(folder: Path) -> list[Path]:
    """The safetensors files an engine loads: those the index names when there is one (some repos
    also carry a consolidated copy of the same weights), else every *.safetensors in the folder."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        names = sorted(set(json.loads(index.read_text()).get("weight_map", {}).values()))
        return [folder / n for n in names]
    return sorted(folder.glob("*.safetensors"))


def read_config(folder: Path) -> dict[str, Any] | None:
    return _load_config(folder)[0]


def _load_config(folder: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(config.json, None), or (None, why it cannot be read)."""
    try:
        data = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"no readable config.json in {folder} ({exc.__class__.__name__})"
    return (data, None) if isinstance(data, dict) else (None, f"config.json in {folder} is not a JSON object")


def _gguf_facts(path: Path) -> dict[str, Any]:
    """A GGUF file's size (its weights) and the attention sizes in its metadata (for the KV cache)."""

    parts = [path.with_name(name) for name in gguf_parts(path.name)]  # llama.cpp's split files: all parts count
    split = len(parts) > 1
    try:
        weights = sum(part.stat().st_size for part in parts)
    except OSError:
        return {"problem": f"{path}{' (or another of its parts)' if split else ''} is not on this machine yet"}
    try:
        config, notes = gguf.as_config(gguf.read_metadata(path))
    except (OSError, ValueError, struct.error) as exc:
        config, notes = None, [f"cannot read the GGUF metadata of {path.name}: {exc}"]
    found = (f"sizes of the {len(parts)} parts of the .gguf file" if split else "size of the .gguf file") + (
        " and its metadata" if config else ""
    )
    return {"weights": weights, "config": config, "notes": notes, "found": found}


def quant_method(config: dict[str, Any] | None) -> str | None:
    """The method of a pre-quantized checkpoint (AWQ, GPTQ, FP8, NVFP4...), from config.json."""
    section = (config or {}).get("quantization_config")
    method = section.get("quant_method") if isinstance(section, dict) else None
    return str(method) if method else None


def model_facts(spec: dict[str, Any], remote: HubAnswer | None = None, weights_too: bool = True) -> dict[str, Any]:
    """{weights: bytes | None, config: dict | None, found: how, problem: why unknown}. For a model
    not downloaded yet, `remote` (what the Hub said: file sizes, config.json) stands in."""
    folder = Path(spec["model_dir"])
    out: dict[str, Any] = {"weights": None, "config": None, "found": None, "problem": None}
    if remote and remote.weights is not None and not _is(folder / MARKER, stat.S_ISREG):
        return {
            "weights": remote.weights,
            "config": remote.config,
            "problem": None,
            "found": "file sizes on the Hub (not downloaded yet)",
        }
    if weights_too is False:
        out["config"] = read_config(folder)
        return out
    if "model_file" in spec:
        return {**out, **_gguf_facts(folder / spec["model_file"])}
    if not _is(folder, stat.S_ISDIR):
        out["problem"] = f"{folder} is not on this machine yet (its size is unknown until it is downloaded)"
        return out
    out["config"], out["problem"] = _load_config(folder)
    try:
        files = weight_files(folder)
        if files:
            out["weights"] = weights_from_headers([read_safetensors_header(p) for p in files])
            out["found"] = f"safetensors headers of {len(files)} file{'s' if len(files) != 1 else ''}"
        else:
            bins = sorted(folder.glob("*.bin")) + sorted(folder.glob("*.pt"))
            if bins:
                out.update(weights=sum(p.stat().st_size for p in bins), found="size of the .bin files")
            else:
                out["problem"] = out["problem"] or f"no weight files in {folder}"
    except (OSError, ValueError, KeyError, TypeError, struct.error) as exc:
        out["problem"] = f"cannot read the weights' headers in {folder}: {exc}"
        out["weights"] = None
    return out


def weights_from_headers(headers: list[dict[str, Any]]) -> int:
    """Bytes of every tensor in safetensors headers (the JSON at the head of each file)."""
    total = 0
    for header in headers:
        for name, tensor in header.items():
            if name != "__metadata__":
                begin, end = tensor["data_offsets"]
                total += end - begin
    return total


def _is(path: Path, kind: Callable[[int], bool]) -> bool:
    """stat's answer, where a folder that cannot be searched (PermissionError, a loop) counts as absent:
    the plan then says the size is unknown instead of failing."""
    try:
        return kind(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False
