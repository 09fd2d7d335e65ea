"""vLLM's command-line flags and the key of aigo.yaml that writes each: one table, which the vLLM
command line is rendered from (desired/engines/vllm.py takes its setting flags from here, and its
last check refuses any flag this table does not name) and which `validate` reads to answer a key
written in vLLM's words: a model's `max_model_len:` or `--max-model-len:` gets "did you mean
'context_length'?", its `gpu_memory_utilization:` "did you mean 'vllm.gpu_memory_utilization'?".
Model cards give `vllm serve` flags; users copy them. Pure."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from aigo_apply.config.env_names import SLEEP_MODE_FLAG
from aigo_apply.config.vllm_facts import COMPILATION_FLAGS


class DraftSettings(TypedDict, total=False):
    """A speculative draft model: {repo, revision} or {path}, like a model's source without `file`;
    `model_dir`, its host folder, only in a canonical spec (desired/build.speculative_spec)."""

    repo: str
    revision: str
    path: str
    model_dir: str


class SpeculativeSettings(TypedDict):
    method: str
    num_speculative_tokens: NotRequired[int]
    draft: NotRequired[DraftSettings]


class CompilationSettings(TypedDict, total=False):
    optimization_level: int
    cudagraph_capture_sizes: list[int]
    max_cudagraph_capture_size: int


class VllmSettings(TypedDict, total=False):
    """A model's `vllm:` settings, as the file writes them (config/document.ModelEntry) and as its canonical
    spec holds them (desired/spec.ModelSpec: defaults filled, a draft's folder added): the keys of the
    schema's vllmSettings, each rendered to its flag by the tables below. A new setting is a key here and
    a row below (and the schema's). The name lists (parsers, backends, quantization, ...) are a vLLM
    release's (config/vllm_facts.py), so they are plain strings here."""

    tool_calling: bool
    tool_call_parser: str
    reasoning_parser: str
    moe_backend: str
    mamba_backend: str
    quantization: str
    kv_cache_dtype: str
    dtype: str
    tensor_parallel_size: int
    gpu_memory_utilization: float
    max_num_seqs: int
    load_format: str
    enable_prefix_caching: bool
    trust_remote_code: bool
    enforce_eager: bool
    compilation: CompilationSettings
    max_loras: int
    max_lora_rank: int
    speculative: SpeculativeSettings


# Settings of a model's `vllm:` block that map to a flag taking a value, in command-line order.
VALUE_FLAGS = (
    ("reasoning_parser", "--reasoning-parser"),
    ("moe_backend", "--moe-backend"),
    ("mamba_backend", "--mamba-backend"),
    ("tensor_parallel_size", "--tensor-parallel-size"),
    ("quantization", "--quantization"),
    ("kv_cache_dtype", "--kv-cache-dtype"),
    ("dtype", "--dtype"),
    ("max_num_seqs", "--max-num-seqs"),
    ("load_format", "--load-format"),
)
# Boolean settings: true -> --flag, false -> --no-flag (vLLM's BooleanOptionalAction).
BOOL_FLAGS = (
    ("enable_prefix_caching", "--enable-prefix-caching"),
    ("trust_remote_code", "--trust-remote-code"),
    ("enforce_eager", "--enforce-eager"),
)
# The other flags aigo-apply writes, each with the key of the model's entry it comes from (dotted
# below `models.ALIAS`; "" for one aigo-apply sets itself, which no key writes).
OTHER_FLAGS = {
    "--model": "source",  # vLLM's positional model (or --model): the folder of `source`
    "--served-model-name": "",  # the alias: the model's key under `models:`
    "--max-model-len": "context_length",
    "--gpu-memory-utilization": "vllm.gpu_memory_utilization",
    "--enable-auto-tool-choice": "vllm.tool_calling",
    "--tool-call-parser": "vllm.tool_call_parser",
    "--speculative-config": "vllm.speculative",
    SLEEP_MODE_FLAG: "on_demand",
    "--enable-lora": "adapters",
    "--lora-modules": "adapters",
    "--max-loras": "vllm.max_loras",
    "--max-lora-rank": "vllm.max_lora_rank",
    "--port": "port",
    "--uds": "",  # the engine's Unix socket, in a folder of the project's state
    # what vLLM does at start: the keys of a model's `vllm.compilation` block, one flag each
    **{flag: f"vllm.compilation.{key}" for key, flag in COMPILATION_FLAGS.items()},
}
# Every flag the table knows -> the key that writes it.
FLAG_KEYS: dict[str, str] = {
    **{flag: f"vllm.{key}" for key, flag in VALUE_FLAGS + BOOL_FLAGS},
    **{"--no-" + flag[2:]: f"vllm.{key}" for key, flag in BOOL_FLAGS},
    **OTHER_FLAGS,
}


def flag_words(key: str) -> str:
    """A key as vLLM's flag would read it: `--Max-Model-Len`, `max_model_len` -> `--max-model-len`."""
    return "--" + key.strip().lstrip("-").lower().replace("_", "-")


def renamed(path: tuple[Any, ...], key: Any) -> tuple[str, str] | None:
    """(the key of the file meant, vLLM's flag) for an unknown `key` at `path` written in vLLM's words:
    a flag or its setting's name, at a model's level or in its `vllm:` block (`max_model_len`,
    `--gpu-memory-utilization`, a model-level `tool_call_parser`). The key is dotted below the model
    ("context_length", "vllm.gpu_memory_utilization"), "" for a flag aigo-apply writes itself; None
    when `key` is not one of vLLM's words there."""
    if not isinstance(key, str) or not 2 <= len(path) <= 3 or path[0] != "models":
        return None
    if len(path) == 3 and path[2] != "vllm":
        return None
    flag = flag_words(key)
    if flag in FLAG_KEYS:
        target = FLAG_KEYS[flag]
        return None if len(path) == 3 and target == f"vllm.{key}" else (target, flag)
    return None
