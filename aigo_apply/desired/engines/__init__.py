"""One module per serving engine: how a model's canonical spec becomes a container and a command line.

`render(project, alias, spec)` is the single entry point; it re-checks every value that reaches
a command line, so a hand-edited saved plan cannot smuggle a flag past validation.
"""

from __future__ import annotations

from typing import Any

from aigo_apply.desired.engines import llamacpp, sglang, vllm
from aigo_apply.desired.engines.common import container_name
from aigo_apply.desired.types import ContainerSpec
from aigo_apply.errors import AigoError

ENGINES = {"vllm": vllm, "sglang": sglang, "llama.cpp": llamacpp}
ENGINE_BY_FORMAT = {"safetensors-repo": "vllm", "gguf": "llama.cpp"}
__all__ = ["ENGINES", "ENGINE_BY_FORMAT", "container_name", "engine_of", "render", "weights_format"]


def weights_format(source: Any) -> str:
    """'gguf' for one .gguf file (a local file, or `file` in a repo); else 'safetensors-repo'.
    Decided from the file's text alone, so the plan never depends on what is on disk."""
    if isinstance(source, dict) and ("file" in source or str(source.get("path", "")).endswith(".gguf")):
        return "gguf"
    return "safetensors-repo"


def engine_of(model: Any, defaults: Any) -> str:
    """`engine:` as written, else defaults.engine_by_format for the weights' format, else the built-in.
    Tolerates a file that failed the schema (the cross-field checks call it on such data)."""
    model = model if isinstance(model, dict) else {}
    fmt = weights_format(model.get("source"))
    by_format = defaults.get("engine_by_format") if isinstance(defaults, dict) else None
    chosen = model.get("engine") or (by_format.get(fmt) if isinstance(by_format, dict) else None)
    return chosen if isinstance(chosen, str) and chosen in ENGINES else ENGINE_BY_FORMAT[fmt]


def render(project: str, alias: str, spec: dict[str, Any]) -> ContainerSpec:
    engine = ENGINES.get(spec.get("engine", ""))
    if engine is None:
        raise AigoError(f"model '{alias}': unknown engine {spec.get('engine')!r}; known: {', '.join(ENGINES)}")
    return engine.render(project, alias, spec)
