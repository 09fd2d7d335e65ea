"""Reads the metadata at the head of a GGUF file (llama.cpp's format) and turns the attention sizes into
the config.json-shaped numbers the VRAM estimate uses, so a llama.cpp model's KV cache is estimated
like any other. Only the head of the file is read: the metadata keys up to the tokenizer's (writers put
the model's own keys first), never the tensors.

GGUF layout (versions 2 and 3, little-endian): magic "GGUF", uint32 version, uint64 tensor count,
uint64 metadata count, then each entry as a string key (uint64 length + UTF-8 bytes), a uint32 value
type and the value. Arrays are a uint32 element type, a uint64 count and the elements.
"""

from __future__ import annotations

import math
import os
import stat
import struct
from pathlib import Path
from typing import BinaryIO

from aigo_apply.json_types import JsonMap, JsonObject, JsonValue
from aigo_apply.safe_read import judged

# value type -> struct format of one element (8: string, 9: array, handled apart)
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
MAX_KEY = 65536  # no real key comes near it; a larger length means the file is not GGUF
MAX_STRING = 64 * 1024 * 1024
MAX_READ = 128 * 1024 * 1024  # what is read of the head at most (real metadata before the tokenizer: some KiB)
MAX_ITEMS = 1 << 20  # elements of an array of strings or arrays kept (the tokenizer's long ones come after)
MAX_DEPTH = 4  # arrays of arrays
LLAMA_CPP_KV_DTYPE = "float16"  # llama-server's default --cache-type-k/-v is f16


class _Head:
    """The file's head as read so far: reads are exact and, all together, at most MAX_READ bytes."""

    def __init__(self, f: BinaryIO) -> None:
        self.f, self.left = f, MAX_READ

    def exact(self, n: int) -> bytes:
        if n > self.left:
            raise ValueError(f"the GGUF metadata is larger than {MAX_READ >> 20} MiB: not one this reader takes")
        data = self.f.read(n)
        if len(data) != n:
            raise ValueError("the GGUF metadata ends early")
        self.left -= n
        return data

    def skip(self, n: int) -> None:
        end = self.f.tell() + n
        if end > os.fstat(self.f.fileno()).st_size:
            raise ValueError("the GGUF metadata ends early")
        self.f.seek(end)


def read_metadata(source: Path | BinaryIO, stop_prefix: str = "tokenizer.", name: str | None = None) -> JsonObject:
    """Every metadata entry before the first key that starts with `stop_prefix` (the tokenizer's
    vocabulary can be hundreds of thousands of strings, and nothing after it is needed). `source`: the
    file open for reading (model_files.folder_file opens a model's file the safe way; `name` names it
    in errors), or its path (opened without waiting; anything but a regular file is refused). Raises
    ValueError for a file that is not GGUF."""
    if not isinstance(source, Path):
        return _read(source, name or "the GGUF file", stop_prefix)

    def regular(info: os.stat_result) -> None:  # a FIFO or device is not opened (safe_read.judged)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{source.name} is not a regular file")

    with judged(source, True, regular) as f:
        return _read(f, name or source.name, stop_prefix)


def _read(f: BinaryIO, name: str, stop_prefix: str) -> JsonObject:
    head = _Head(f)
    if f.read(4) != b"GGUF":
        raise ValueError(f"{name} is not a GGUF file (no GGUF magic)")
    version, _tensors, count = struct.unpack("<IQQ", head.exact(20))
    if version not in (2, 3):
        raise ValueError(f"{name}: GGUF version {version} is not one this reader knows (2 or 3)")
    meta: JsonObject = {}
    for _ in range(count):
        key = _string(head, MAX_KEY)
        if key.startswith(stop_prefix):
            break
        (kind,) = struct.unpack("<I", head.exact(4))
        meta[key] = _value(head, kind)
    return meta


def _string(head: _Head, limit: int = MAX_STRING) -> str:
    (length,) = struct.unpack("<Q", head.exact(8))
    if length > limit:
        raise ValueError(f"a GGUF string of {length} bytes: not a GGUF file, or a damaged one")
    return head.exact(length).decode("utf-8", errors="replace")


def _value(head: _Head, kind: int, depth: int = 0) -> JsonValue:
    if kind == _STRING:
        return _string(head)
    if kind == _ARRAY:
        inner, count = struct.unpack("<IQ", head.exact(12))
        if inner in _SCALARS:
            size = struct.calcsize(_SCALARS[inner])
            if count > 4096:  # a long table (per-token scores, ...): skipped, not kept
                head.skip(count * size)
                return None
            return [v[0] for v in struct.iter_unpack(_SCALARS[inner], head.exact(count * size))]
        if count > MAX_ITEMS or depth >= MAX_DEPTH:
            raise ValueError(f"a GGUF array of {count} entries, {depth + 1} deep: not one this reader takes")
        return [_value(head, inner, depth + 1) for _ in range(count)]
    if kind in _SCALARS:
        fmt = _SCALARS[kind]
        scalar: int | float | bool = struct.unpack(fmt, head.exact(struct.calcsize(fmt)))[0]
        return scalar
    raise ValueError(f"unknown GGUF value type {kind}")


def as_config(meta: JsonMap) -> tuple[JsonObject | None, list[str]]:
    """(config.json-shaped attention sizes, notes) from GGUF metadata; (None, [why]) when the
    architecture's sizes are missing. Per-layer head counts (a list) count at their largest."""
    arch = meta.get("general.architecture")
    if not isinstance(arch, str):
        return None, ["the GGUF metadata names no general.architecture"]

    def number(key: str) -> int | None:
        value = meta.get(f"{arch}.{key}")
        if isinstance(value, list):
            value = max((v for v in value if isinstance(v, (int, float)) and math.isfinite(v)), default=None)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            return None  # a float32 NaN or infinity is no size (int() of it would raise)
        return int(value) if value >= 0 else None

    layers, heads, hidden = number("block_count"), number("attention.head_count"), number("embedding_length")
    if not layers or not heads or not hidden:
        return None, [f"the GGUF metadata lacks {arch}.block_count, attention.head_count or embedding_length"]
    config: JsonObject = {
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "hidden_size": hidden,
        "num_key_value_heads": number("attention.head_count_kv") or heads,
        "torch_dtype": LLAMA_CPP_KV_DTYPE,
    }
    key_length, value_length = number("attention.key_length"), number("attention.value_length")
    if key_length or value_length:  # K and V heads of different sizes count at their mean
        mean = ((key_length or value_length or 0) + (value_length or key_length or 0)) / 2  # one is set
        config["head_dim"] = int(mean) if mean == int(mean) else mean
    notes = [f"GGUF metadata ({arch}), f16 KV cache"]
    if number("attention.kv_lora_rank"):
        config["kv_lora_rank"] = number("attention.kv_lora_rank")
        config["qk_rope_head_dim"] = number("rope.dimension_count") or 0
    if number("attention.sliding_window"):
        notes.append("sliding-window layers counted at full length")
    if any(k.startswith(f"{arch}.ssm.") for k in meta):
        notes.append("recurrent (SSM) state not counted; attention layers taken as every layer")
    return config, notes
