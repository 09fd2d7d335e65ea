"""The ordinary token ids of a model's own tokenizer, read from the tokenizer.json in its folder on
this host: the canary gate's prompts are drawn from them (no data set to download, and the same ids
mean the same text to the old and the new engine). Added and special tokens, and byte-fallback
tokens, are left out. Never raises: no file, or one it cannot read, is an empty list and the reason."""

from __future__ import annotations

import re
from pathlib import Path

from aigo_apply.json_types import JsonValue
from aigo_apply.observe.model_files import Unreadable, read_folder_json

MAX_BYTES = 64 * 1024 * 1024  # the largest tokenizer.json read (big vocabularies are some 10-20 MiB)
_BYTE_TOKEN = re.compile(r"<0x[0-9A-Fa-f]{2}>")


def vocabulary(folder: str | Path) -> tuple[list[int], str]:
    """(ids, "") from FOLDER/tokenizer.json, or ([], why not). Read as model_files reads a model's
    files: a regular file inside the folder (also through a symlink), a FIFO or device refused
    without waiting, at most MAX_BYTES."""
    path = Path(folder) / "tokenizer.json"
    try:
        data = read_folder_json(Path(folder), "tokenizer.json", MAX_BYTES)
    except Unreadable as exc:
        return [], str(exc)
    except (OSError, ValueError) as exc:
        return [], f"{path}: {getattr(exc, 'strerror', None) or exc}"
    try:
        ids = _ordinary_ids(data)
    except (TypeError, AttributeError, ValueError):  # a file of another shape than a tokenizer's
        ids = []
    return (ids, "") if ids else ([], f"{path} holds no vocabulary it understands")


def _ordinary_ids(data: JsonValue) -> list[int]:
    model = data.get("model") if isinstance(data, dict) else None
    vocab = model.get("vocab") if isinstance(model, dict) else None
    listed = data.get("added_tokens") if isinstance(data, dict) else None
    tokens = listed if isinstance(listed, list) else []
    added = {t["id"] for t in tokens if isinstance(t, dict) and type(t.get("id")) is int}
    pairs: list[tuple[str, int]] = []
    if isinstance(vocab, dict):  # BPE and WordPiece: token -> id
        pairs = [(k, v) for k, v in vocab.items() if isinstance(k, str) and type(v) is int]
    elif isinstance(vocab, list):  # Unigram: [token, score] by id
        pairs = [(e[0], i) for i, e in enumerate(vocab) if isinstance(e, list) and e and isinstance(e[0], str)]
    return sorted(i for token, i in pairs if i not in added and i >= 0 and not _BYTE_TOKEN.fullmatch(token))
