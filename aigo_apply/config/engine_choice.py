"""Which engine serves a model: `engine:` as written, else `defaults.engine_by_format` for the
weights' format, else the built-in choice. Decided from the file's text alone, so validation and
the desired state agree and the plan never depends on what is on disk."""

from __future__ import annotations

from collections.abc import Mapping

from aigo_apply.config.document import Engine, WeightsFormat
from aigo_apply.config.engine_kinds import ENGINE_BY_FORMAT, ENGINE_NAMES, ENGINES

__all__ = ["ENGINE_BY_FORMAT", "ENGINE_NAMES", "engine_of", "weights_format"]


def weights_format(source: object) -> WeightsFormat:
    """'gguf' for one .gguf file (a local file, or `file` in a repo); else 'safetensors-repo'.
    Decided from the file's text alone, so the plan never depends on what is on disk."""
    if isinstance(source, dict) and ("file" in source or str(source.get("path", "")).endswith(".gguf")):
        return "gguf"
    return "safetensors-repo"


def engine_of(model: object, defaults: object) -> Engine:
    """`engine:` as written, else defaults.engine_by_format for the weights' format, else the built-in.
    Tolerates a file that failed the schema (the cross-field checks call it on such data)."""
    entry: Mapping[str, object] = model if isinstance(model, dict) else {}
    fmt = weights_format(entry.get("source"))
    by_format = defaults.get("engine_by_format") if isinstance(defaults, dict) else None
    chosen = entry.get("engine") or (by_format.get(fmt) if isinstance(by_format, dict) else None)
    return next((kind.name for kind in ENGINES.values() if kind.name == chosen), ENGINE_BY_FORMAT[fmt])
