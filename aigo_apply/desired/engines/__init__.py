"""One module per serving engine: how a model's canonical spec becomes a container and a command line.

`render(project, alias, spec)` is the single entry point; it re-checks every value that reaches
a command line, so a hand-edited saved plan cannot smuggle a flag past validation.
"""

from __future__ import annotations

from typing import Protocol

from aigo_apply.desired.engines import llamacpp, sglang, vllm
from aigo_apply.desired.engines.common import container_name
from aigo_apply.desired.spec import ModelSpec
from aigo_apply.desired.types import ContainerSpec
from aigo_apply.errors import AigoError


class _Engine(Protocol):
    """What the planner needs of an engine module."""

    def render(self, project: str, alias: str, spec: ModelSpec) -> ContainerSpec: ...


ENGINES: dict[str, _Engine] = {"vllm": vllm, "sglang": sglang, "llama.cpp": llamacpp}
__all__ = ["ENGINES", "container_name", "render"]


def render(project: str, alias: str, spec: ModelSpec) -> ContainerSpec:
    engine = ENGINES.get(spec.get("engine", ""))
    if engine is None:
        raise AigoError(f"model '{alias}': unknown engine {spec.get('engine')!r}; known: {', '.join(ENGINES)}")
    return engine.render(project, alias, spec)
