"""Reads what the VRAM estimate needs from a model's files on this host: config.json and the
safetensors headers (only the first bytes of each file: the JSON header with every tensor's byte
range), or a GGUF file's size and metadata (aigo_apply.observe.gguf). Returns plain data and never raises:
a model not downloaded yet, or a folder without weights, is "unknown" with the reason, which the plan
shows as a warning.

A model's or adapter's folder may come from an untrusted repository, so every file read from one goes
through folder_file()/read_folder_file() (also for adapter_files, tokenizer_vocab and local_sources):
a symlink is followed but must lead to a regular file inside the folder's own tree: the engine has
only the folder mounted, so a link out of it (a Hugging Face cache snapshot's into ../../blobs among
them) would not resolve there either, and a config repository could point one at any host file. A
FIFO, socket, device or folder is refused before it is opened, and the file is opened by the one
bounded reader's rules (aigo_apply/safe_read.py: without waiting, checked again once open); each kind
of file is read up to a limit of its own, and its JSON parsed within bounds (depth, digits, finite
numbers). What is refused is an Unreadable (a ValueError) naming the file and what to do."""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from aigo_apply.config.host_paths import short
from aigo_apply.desired.model_store import MARKER, gguf_parts
from aigo_apply.json_types import JsonObject, JsonValue, obj
from aigo_apply.observe import gguf
from aigo_apply.observe.hub_answer import HubAnswer
from aigo_apply.safe_read import BadData, file_kind, json_value, judged, read_at_most

MAX_HEADER = 100 * 1024 * 1024  # safetensors' own limit on the JSON header
MAX_CONFIG = 8 * 1024 * 1024  # a real model's config.json is a few KiB (a long quantization_config: 1-2 MiB)
MAX_INDEX = 64 * 1024 * 1024  # model.safetensors.index.json: one line per tensor (some MiB for the largest)


class Unreadable(ValueError):
    """A file of a model's or adapter's folder that is not read, in words: which, why, what to do."""


def judge(folder: Path, name: str, limit: int | None = None) -> tuple[Path, os.stat_result]:
    """FOLDER/NAME resolved, and its stat, when it may be read: a regular file (of at most `limit`
    bytes) inside the folder's tree, also through a symlink. Nothing is opened. Raises OSError as the
    system says it (FileNotFoundError: no such file) and Unreadable for a file that must not be read."""
    path = folder / name
    real = Path(os.path.realpath(path, strict=True))
    if not real.is_relative_to(os.path.realpath(folder)):  # the folder is all an engine has mounted
        how = "is a symlink to" if os.path.islink(path) else "leads to"
        raise Unreadable(
            f"{short(path)} {how} {short(real)}, outside the folder; an engine sees only the folder, "
            "so it is not read: put the file itself in the folder"
        )
    info = os.stat(real)
    _check(path, real, info, limit)
    return real, info


def _check(path: Path, real: Path, info: os.stat_result, limit: int | None) -> None:
    if not stat.S_ISREG(info.st_mode):
        led = f" (it leads to {short(real)})" if real != path else ""
        raise Unreadable(
            f"{short(path)} is {file_kind(info.st_mode)}{led}, not a regular file, so it is not read: "
            "replace it with the real file"
        )
    if limit is not None and info.st_size > limit:
        raise _too_large(path, limit)


def _too_large(path: Path, limit: int) -> Unreadable:
    size = f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit} bytes"
    return Unreadable(
        f"{short(path)} is larger than {size}, more than a real {path.name} holds, "
        "so it is not read: check that the folder holds the model's own files"
    )


@contextmanager
def folder_file(folder: Path, name: str, limit: int | None = None) -> Iterator[BinaryIO]:
    """FOLDER/NAME open for reading, once judge() allows it: opened by the one bounded reader's rules
    (safe_read.judged: without waiting, without following a link at its resolved path, judged again
    once open, which must be the file judged)."""
    real, _ = judge(folder, name, limit)
    with judged(real, False, lambda info: _check(folder / name, real, info, limit)) as f:
        yield f


def read_folder_file(folder: Path, name: str, limit: int) -> bytes:
    """The bytes of FOLDER/NAME (folder_file's rules), at most `limit` (else Unreadable)."""
    with folder_file(folder, name, limit) as f:
        data = read_at_most(f.fileno(), limit)
    if len(data) > limit:  # it grew since it was judged
        raise _too_large(folder / name, limit)
    return data


MAX_DEPTH = 64  # a real config.json nests some 6 levels (quantization_config's groups), an index 2


def read_folder_json(folder: Path, name: str, limit: int) -> JsonValue:
    """FOLDER/NAME parsed as UTF-8 JSON (read_folder_file's rules), bounded as every file from outside
    is (safe_read.json_value: nesting, digits, finite numbers; NaN or Infinity, which Python writes,
    read as unknown); Unreadable when it is not such JSON."""
    raw = read_folder_file(folder, name, limit)
    try:
        found: JsonValue = json_value(raw, MAX_DEPTH, constants=True)
    except BadData as exc:
        if str(exc).startswith("nests deeper"):
            raise Unreadable(f"{short(folder / name)} nests deeper than any real {name} ({exc})") from None
        raise Unreadable(f"{short(folder / name)} {exc}; a real {name} is UTF-8 JSON") from None
    return found


def read_safetensors_header(folder: Path, name: str) -> JsonObject:
    """The JSON header of FOLDER/NAME: its length (the first 8 bytes) must fit the file and MAX_HEADER."""
    with folder_file(folder, name) as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(8)
        if len(head) != 8:
            raise ValueError(f"{name} is shorter than a safetensors header")
        (length,) = struct.unpack("<Q", head)
        if length > MAX_HEADER or length > size - 8:
            raise ValueError(f"{name}: header of {length} bytes is not a safetensors header")
        raw = f.read(length)
    try:
        header: JsonValue = json_value(raw, 8) if len(raw) == length else None
    except BadData as exc:
        raise ValueError(f"{name}: its header is not a safetensors header: it {exc}") from None
    if not isinstance(header, dict):
        raise ValueError(f"{name}: its header is not a safetensors header (a JSON object)")
    return header


def weight_files(folder: Path) -> list[str]:
    """The names of the safetensors files an engine loads: those the index names when there is one
    (some repos also carry a consolidated copy of the same weights), else every *.safetensors in the folder."""
    index = "model.safetensors.index.json"
    if _is(folder / index, lambda mode: True):
        data = read_folder_json(folder, index, MAX_INDEX)
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(weight_map, dict):
            raise ValueError(f"{index} holds no weight_map")
        return sorted({n for n in weight_map.values() if isinstance(n, str)})
    return sorted(p.name for p in folder.glob("*.safetensors"))


def read_config(folder: Path) -> JsonObject | None:
    return _load_config(folder)[0]


def _load_config(folder: Path) -> tuple[JsonObject | None, str | None]:
    """(config.json, None), or (None, why it cannot be read)."""
    try:
        data = read_folder_json(folder, "config.json", MAX_CONFIG)
    except Unreadable as exc:
        return None, str(exc)
    except (OSError, ValueError) as exc:
        return None, f"no readable config.json in {folder} ({exc.__class__.__name__})"
    return (data, None) if isinstance(data, dict) else (None, f"config.json in {folder} is not a JSON object")


def _gguf_facts(path: Path) -> JsonObject:
    """A GGUF file's size (its weights) and the attention sizes in its metadata (for the KV cache)."""

    folder, names = path.parent, gguf_parts(path.name)  # llama.cpp's split files: all parts count
    split = len(names) > 1
    try:
        weights = sum(judge(folder, name)[1].st_size for name in names)
    except Unreadable as exc:
        return {"problem": str(exc)}
    except (OSError, ValueError):
        return {"problem": f"{path}{' (or another of its parts)' if split else ''} is not on this machine yet"}
    try:
        with folder_file(folder, path.name) as f:
            config, notes = gguf.as_config(gguf.read_metadata(f, name=path.name))
    except (OSError, ValueError, struct.error) as exc:
        config, notes = None, [f"cannot read the GGUF metadata of {path.name}: {exc}"]
    found = (f"sizes of the {len(names)} parts of the .gguf file" if split else "size of the .gguf file") + (
        " and its metadata" if config else ""
    )
    return {"weights": weights, "config": config, "notes": [*notes], "found": found}


def quant_method(config: JsonValue) -> str | None:
    """The method of a pre-quantized checkpoint (AWQ, GPTQ, FP8, NVFP4...), from config.json (a
    model_facts `config`: an object, or None)."""
    section = obj(config).get("quantization_config")
    method = section.get("quant_method") if isinstance(section, dict) else None
    return str(method) if method else None


def model_facts(spec: Mapping[str, object], remote: HubAnswer | None = None, weights_too: bool = True) -> JsonObject:
    """{weights: bytes | None, config: dict | None, found: how, problem: why unknown}. For a model
    not downloaded yet, `remote` (what the Hub said: file sizes, config.json) stands in."""
    folder = Path(str(spec["model_dir"]))
    out: JsonObject = {"weights": None, "config": None, "found": None, "problem": None}
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
        return {**out, **_gguf_facts(folder / str(spec["model_file"]))}
    if not _is(folder, stat.S_ISDIR):
        out["problem"] = f"{folder} is not on this machine yet (its size is unknown until it is downloaded)"
        return out
    out["config"], out["problem"] = _load_config(folder)
    try:
        files = weight_files(folder)
        if files:
            out["weights"] = weights_from_headers([read_safetensors_header(folder, name) for name in files])
            out["found"] = f"safetensors headers of {len(files)} file{'s' if len(files) != 1 else ''}"
        else:
            bins = sorted(p.name for p in [*folder.glob("*.bin"), *folder.glob("*.pt")])
            if bins:
                out.update(weights=sum(judge(folder, name)[1].st_size for name in bins), found="size of the .bin files")
            else:
                out["problem"] = out["problem"] or f"no weight files in {folder}"
    except Unreadable as exc:
        out["problem"], out["weights"] = str(exc), None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, struct.error) as exc:
        out["problem"] = f"cannot read the weights' headers in {folder}: {exc}"
        out["weights"] = None
    return out


def weights_from_headers(headers: list[JsonObject]) -> int:
    """Bytes of every tensor in safetensors headers (the JSON at the head of each file)."""
    total = 0
    for header in headers:
        for name, tensor in header.items():
            if name != "__metadata__":
                if not isinstance(tensor, dict):
                    raise TypeError(f"the tensor {name[:100]!r} is not a JSON object")
                begin, end = _pair(tensor["data_offsets"])
                if not (type(begin) is int and type(end) is int and 0 <= begin <= end):
                    raise ValueError(f"the tensor {name[:100]!r} has data_offsets that are not a byte range")
                total += end - begin
    return total


def _pair(offsets: JsonValue) -> list[JsonValue] | Iterator[str]:
    """What `begin, end = offsets` unpacks, for each JSON value (a non-iterable one raises as unpacking it did)."""
    if isinstance(offsets, list):
        return offsets
    if isinstance(offsets, (str, dict)):
        return iter(offsets)
    raise TypeError(f"cannot unpack non-iterable {type(offsets).__name__} object")


def _is(path: Path, kind: Callable[[int], bool]) -> bool:
    """stat's answer, where a folder that cannot be searched (PermissionError, a loop) counts as absent:
    the plan then says the size is unknown instead of failing."""
    try:
        return kind(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False
