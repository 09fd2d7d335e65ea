"""A config file as it would read with another vLLM image tag: the same document with
`engines.vllm.image_tag` set, written where a test wants it, its relative `path:` values made absolute
against the folder of the original (so an example's `demo-models/...` still names the same folder)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def absolute_paths(node: Any, base: Path) -> Any:
    """The document with every relative `path:` made absolute against `base`."""
    if isinstance(node, dict):
        return {
            k: str(base / v)
            if k == "path" and isinstance(v, str) and not v.startswith("/")
            else absolute_paths(v, base)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [absolute_paths(v, base) for v in node]
    return node


def retagged(text: str, base: Path, tag: str) -> dict[str, Any]:
    """The document of a config's text with the vLLM image tag `tag` (any `engines.vllm.image` kept)."""
    data = absolute_paths(yaml.safe_load(text), base)
    engines = data.setdefault("engines", {})
    engines["vllm"] = {**(engines.get("vllm") or {}), "image_tag": tag}
    return data


def write_retagged(source: Path, tag: str, target: Path) -> Path:
    """`source` with the vLLM image tag `tag`, written to `target`."""
    target.write_text(yaml.safe_dump(retagged(source.read_text(), source.parent, tag), sort_keys=False))
    return target
