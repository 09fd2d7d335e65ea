"""The ordinary token ids of a model's own tokenizer, read from the tokenizer.json in its folder on
this host: the canary gate's prompts are drawn from them (no data set to download, and the same ids
mean the same text to the old and the new engine). Added and special tokens, and byte-fallback
tokens, are left out. Never raises: no file, or one it cannot read, is an empty list and the reason."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

MAX_BYTES = 64 * 1024 * 1024  # the largest tokenizer.json read (big vocabularies are some 10-20 MiB)
_BYTE_TOKEN = re.compile(r"<0x[0-9A-Fa-f]{2}>")


def vocabulary(folder: str | Path) -> tuple[list[int], str]:
    """(ids, "") from FOLDER/tokenizer.json, or ([], why not)."""
    path = Path(folder) / "tokenizer.json"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return [], f"{path}: {exc.strerror or exc}"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return [], f"{path} is not a regular file"
        if info.st_size > MAX_BYTES:
            return [], f"{path} is larger than {MAX_BYTES // 1024 // 1024} MiB"
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = json.loads(f.read(MAX_BYTES + 1))
    except (OSError, ValueError, RecursionError) as exc:
        return [], f"{path}: {exc}"
    finally:
        os.close(fd)
    try:
        ids = _ordinary_ids(data)
    except (TypeError, AttributeError, ValueError):  # a file of another shape than a tokenizer's
        ids = []
    return (ids, "") if ids else ([], f"{path} holds no vocabulary it understands")


def _ordinary_ids(data: Any) -> list[int]:
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
