"""How a location inside aigo.yaml is written in messages and plans: `models.qwen3.vllm.dtype`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

_PLAIN = re.compile(r"^[A-Za-z0-9_-]+\Z")


def dotted(path: Iterable[object]) -> str:
    """Join a data path; list indices become `[n]`, keys with dots or odd characters are quoted."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            text = str(part)
            seg = text if _PLAIN.match(text) else json.dumps(text, ensure_ascii=False)  # \\n, \\t shown escaped
            out += ("." if out else "") + seg
    return out
