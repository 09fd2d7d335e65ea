"""Rules for a model's start-up settings (`models.ALIAS.vllm.compilation`) that JSON Schema cannot say:
vLLM takes a maximum CUDA-graph size beside the list of sizes only when it is the largest of them, and
refuses the start otherwise ("customized max_cudagraph_capture_size ... should be consistent with the max
value of cudagraph_capture_sizes", in VllmConfig, after the container has started): said here, at the
value, before anything starts. Like the other rules, it skips what failed the schema."""

from __future__ import annotations

from typing import TypeGuard

from aigo_apply.config.engine_choice import engine_of
from aigo_apply.config.finder import Finder
from aigo_apply.json_types import JsonMap, JsonValue


def check(data: JsonMap, models: JsonMap, f: Finder) -> None:
    for alias, model in models.items():
        if not isinstance(model, dict) or engine_of(model, data.get("defaults")) != "vllm":
            continue
        settings = model.get("vllm")
        compilation = settings.get("compilation") if isinstance(settings, dict) else None
        if not isinstance(compilation, dict):
            continue
        sizes, largest = compilation.get("cudagraph_capture_sizes"), compilation.get("max_cudagraph_capture_size")
        whole = [s for s in sizes if _whole(s)] if isinstance(sizes, list) else []
        if not isinstance(sizes, list) or not sizes or len(whole) != len(sizes) or not _whole(largest):
            continue
        if largest != max(whole):
            f.at_value(
                ("models", alias, "vllm", "compilation", "max_cudagraph_capture_size"),
                f"{largest} is not the largest of cudagraph_capture_sizes ({max(whole)}): vLLM refuses the start "
                "unless they agree; leave max_cudagraph_capture_size out (vLLM takes the largest size) or make "
                "them agree",
            )


def _whole(value: JsonValue) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
