"""Each engine kind aigo-apply runs, declared once: one `EngineKind` record per engine and the registry
`ENGINES` (name -> record, in the order messages and choices list them). Every per-engine table and
`if engine == ...` question asks a record instead of naming an engine.

The records live in `config/`, the lowest layer, because the config rules need them (which engines
exist, the built-in engine per weights format, whether an engine serves adapters or sleeps and the
sentence that refuses them, which tag to suggest) and `config/` may import nothing else of the
package. What is code, not data, stays with its layer and is keyed by the record's name: how an
engine's command line renders is `desired/engines/<module>.py` (its `render`), registered in
`desired/engines/__init__.py`. A new engine kind is its record here, its renderer there, and its
settings block in `schemas/aigo.schema.json`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from aigo_apply.config.document import Engine, WeightsFormat


@dataclass(frozen=True)
class EngineKind:
    """One engine kind: everything aigo-apply knows of it that is data."""

    name: Engine  # its key under `models.ALIAS`, `engines:` and `engine:`
    image: str  # the image's repository
    default_tag: str | None  # the built-in tag; None: the file must name one (engines.NAME.image_tag)
    tag_example: str  # a tag messages suggest when the file names none
    container_port: int  # where it listens inside its container (when not on a socket)
    serves_on_socket: bool  # it can listen on a Unix socket only the router reaches (else on a port, 127.0.0.1)
    weights_format: WeightsFormat  # what it serves (config/engine_choice.py)
    settings_def: str  # its settings block in the schema's $defs
    host_settings: tuple[str, ...]  # settings that depend on the machine's GPUs (left out of an export)
    memory_model: Literal["fraction", "layers"]  # a fraction of each GPU's memory, or the layers it offloads
    adapters_refusal: str | None  # None: it serves LoRA adapters; else the sentence that refuses them
    sleep_refusal: str | None  # None: it has a sleep mode aigo-apply drives; else the sentence that refuses it
    running_metric: str  # the gauge of requests running (the router's stall watch, the drain)
    waiting_metric: str  # the gauge of requests admitted but not yet running (the drain)
    tokens_metric: str  # the counter of generated tokens (the router's stall watch)
    cuda_of_plain_tag: int | None  # the CUDA major of a tag naming none (`-cu129`); None: unknown
    cuda12_tag: str | None  # the tag advised when the driver is too old for its CUDA 13 image; None: none known
    driver_check: str  # the id of the readiness check of its image against the NVIDIA driver

    @property
    def adapters(self) -> bool:
        return self.adapters_refusal is None

    @property
    def sleeps(self) -> bool:
        return self.sleep_refusal is None

    @property
    def fraction(self) -> bool:
        """It takes a fraction of each GPU's memory (gpu_memory_utilization), counted by the GPU ledger."""
        return self.memory_model == "fraction"

    def image_cuda(self, tag: str) -> int | None:
        """The CUDA major version an image is built for: named by its tag (`-cu129`, `-cu130`), else
        the engine's rule for tags that name none (vLLM's release tags: CUDA 13 since v0.31.0)."""
        named = tag_cuda(tag)
        return named if named is not None else self.cuda_of_plain_tag


def tag_cuda(tag: str) -> int | None:
    """The CUDA major version an image tag names (`-cu129`: 12), else None."""
    named = re.search(r"cu(1[0-9])\d", tag)
    return int(named.group(1)) if named else None


def in_layers(engine: object) -> bool:
    """The engine places layers on the GPUs (llama.cpp), not a fraction of each GPU's memory; False for
    a name that is no engine kind."""
    kind = ENGINES.get(engine) if isinstance(engine, str) else None
    return kind is not None and kind.memory_model == "layers"


VLLM = EngineKind(
    name="vllm",
    image="vllm/vllm-openai",
    default_tag="v0.31.0",
    tag_example="v0.31.0",
    container_port=8000,
    serves_on_socket=True,
    weights_format="safetensors-repo",
    settings_def="vllmSettings",
    host_settings=("gpu_memory_utilization", "tensor_parallel_size", "moe_backend", "mamba_backend"),
    memory_model="fraction",
    adapters_refusal=None,
    sleep_refusal=None,
    running_metric="vllm:num_requests_running",
    waiting_metric="vllm:num_requests_waiting",
    tokens_metric="vllm:generation_tokens_total",
    cuda_of_plain_tag=13,
    cuda12_tag="v0.31.0-cu129",  # the built-in release, built for CUDA 12
    driver_check="nvidia.driver",  # the first engine's id, from before engines had a choice
)
SGLANG = EngineKind(
    name="sglang",
    image="lmsysorg/sglang",
    default_tag=None,
    tag_example="v0.5.6-cu129",
    container_port=30000,
    serves_on_socket=False,
    weights_format="safetensors-repo",
    settings_def="sglangSettings",
    host_settings=("gpu_memory_utilization", "tensor_parallel_size"),
    memory_model="fraction",
    adapters_refusal=(
        "SGLang models cannot serve adapters here: SGLang 0.5.6's parser takes --enable-lora and "
        "--lora-paths NAME=PATH, but its OpenAI API serves an adapter only to a request whose model is "
        "'BASE:NAME' (serving_base._parse_model_parameter) and answers one naming the adapter alone with the "
        "base model, and the router does not rewrite request bodies; serve the base with engine: vllm, or remove adapters"
    ),
    sleep_refusal=(
        "SGLang models cannot be on demand yet: aigo-apply drives vLLM's sleep mode only (SGLang's "
        "equivalent, /release_memory_occupation with --enable-memory-saver, is not verified against its "
        "image); remove on_demand/swap_group or serve the model with engine: vllm"
    ),
    running_metric="sglang:num_running_reqs",
    waiting_metric="sglang:num_queue_reqs",
    tokens_metric="sglang:generation_tokens_total",
    cuda_of_plain_tag=None,
    cuda12_tag=None,
    driver_check="nvidia.driver.sglang",
)
LLAMACPP = EngineKind(
    name="llama.cpp",
    image="ghcr.io/ggml-org/llama.cpp",  # tags: server-cuda, server-cuda-bNNNN, ...
    default_tag=None,
    tag_example="server-cuda",
    container_port=8080,
    serves_on_socket=False,
    weights_format="gguf",
    settings_def="llamaCppSettings",
    host_settings=("gpu_layers", "tensor_parallel_size"),
    memory_model="layers",
    adapters_refusal=(
        "llama.cpp models cannot serve adapters here: llama-server takes GGUF LoRA files (--lora), not the "
        "peft safetensors adapters this key names, and serves them under the base model's name; "
        "serve a safetensors base with engine: vllm, or remove adapters"
    ),
    sleep_refusal=(
        "llama.cpp models cannot be on demand: llama-server has no sleep mode, and stopping and starting its "
        "container on a request would give the router Docker's socket (root on this host); remove "
        "on_demand/swap_group (it stays loaded), or serve a safetensors checkpoint with engine: vllm"
    ),
    running_metric="llamacpp:requests_processing",
    waiting_metric="llamacpp:requests_deferred",
    tokens_metric="llamacpp:tokens_predicted_total",
    cuda_of_plain_tag=None,
    cuda12_tag=None,
    driver_check="nvidia.driver.llama.cpp",
)

ENGINES: dict[str, EngineKind] = {kind.name: kind for kind in (VLLM, SGLANG, LLAMACPP)}
ENGINE_NAMES = tuple(ENGINES)
DEFAULT_ENGINE = VLLM.name  # a spec without `engine` (from before engines had a choice) ran vLLM
# The built-in engine for a weights format: the first kind that serves it.
ENGINE_BY_FORMAT = {
    fmt: next(k.name for k in ENGINES.values() if k.weights_format == fmt) for fmt in ("safetensors-repo", "gguf")
}
