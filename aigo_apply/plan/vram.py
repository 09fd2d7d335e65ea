"""How much GPU memory one model needs, estimated from facts read before planning: the weights' bytes
(safetensors headers, or the hub's parameter counts), the KV cache per token from config.json, and a
stated overhead. Pure: numbers in, numbers out, so tests can check every figure by hand.

Per GPU, for a model split over `tp` GPUs:
  weights   weight bytes / tp
  kv        bytes per token per GPU x the longest sequence (max_model_len): the engine must hold at
            least one full-length sequence. Standard attention: 2 (K and V) x attention layers x
            ceil(KV heads / tp) x head size x KV dtype bytes. MLA (DeepSeek-style, `kv_lora_rank`): one
            latent of kv_lora_rank + qk_rope_head_dim per layer, the same on every GPU. Sliding-window
            layers hold at most their window. Hybrid Mamba models (Nemotron-H `hybrid_override_pattern`,
            Jamba `attn_layer_period`, `layer_types`): only attention layers have a KV cache; the Mamba
            layers add a fixed state per sequence (SSM state in float32 unless the config names another
            dtype, as vLLM v0.31.0 does for Nemotron-H, plus the convolution state in the model dtype).
  overhead  OVERHEAD_BYTES: CUDA context, activations and CUDA graphs, a round figure, not a measurement.
  LoRA      with adapters (vLLM --enable-lora): the buffers vLLM v0.31.0 allocates at start for max_loras
            adapters of rank max_lora_rank on every linear layer it can adapt (all of them: aigo-apply sets
            no --lora-target-modules), whatever the adapters' own target modules: per layer, A and B of
            q, k, v, o, gate, up and down, column-parallel ones with B split over the GPUs and row-parallel
            ones (o, down) with A split, in the model's dtype. Dense layers only: a mixture of experts'
            expert LoRA buffers are not counted (the notes say so). An estimate, not a measurement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NotRequired, TypedDict

from aigo_apply.json_types import JsonMap, JsonObject, number

GIB = 1024**3
OVERHEAD_BYTES = int(1.5 * GIB)
TIGHT = 0.90  # an estimate above this share of the budget is a tight fit

# Bytes per element of vLLM v0.31.0's --kv-cache-dtype names ("auto": the model's dtype). Quantized
# formats leave out their small per-block scales.
KV_DTYPE_BYTES = {
    "bfloat16": 2,
    "float16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "fp8_ds_mla": 1,
    "fp8_per_token_head": 1,
    "int8_per_token_head": 1,
    "int4_per_token_head": 0.5,
    "nvfp4": 0.5,
    "nvfp4_4over6": 0.5,
    "nvfp4_ds_mla": 0.5,
    "turboquant_3bit_nc": 3 / 8,
    "turboquant_4bit_nc": 0.5,
    "turboquant_k3v4_nc": 7 / 16,
    "turboquant_k8v4": 0.75,
}
MODEL_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4}
ATTENTION_LAYER_TYPES = {"full_attention", "attention", "sliding_attention", "chunked_attention"}
# The sizes config.json gives the estimate: whole numbers, at most these (no model comes near them).
LAYER_KEYS = frozenset({"num_hidden_layers", "n_layer", "num_layers"})
SIZE_KEYS = LAYER_KEYS | {
    "sliding_window", "kv_lora_rank", "qk_rope_head_dim", "num_attention_heads", "num_key_value_heads",
    "num_kv_heads", "head_dim", "hidden_size", "mamba_num_heads", "mamba_head_dim", "ssm_state_size",
    "mamba_d_state", "state_size", "n_groups", "mamba_n_groups", "conv_kernel", "mamba_d_conv", "mamba_expand",
    "attn_layer_period", "attn_layer_offset", "full_attention_interval",
}  # fmt: skip
MAX_LAYERS, MAX_SIZE = 100_000, 2**32


class EstimateDict(TypedDict):
    """An Estimate as the ledger (and the plan's JSON) has it: its fields, then the total."""

    weights: int | None
    kv_cache: int | None
    mamba_state: int
    overhead: int
    kv_bytes_per_token: float | None
    tokens: int
    notes: list[str]
    lora: NotRequired[int]  # models with adapters only
    total: int | None


@dataclass(frozen=True)
class Estimate:
    """Bytes one model needs on each of its GPUs (None where unknown), and how they were found."""

    weights: int | None
    kv_cache: int | None
    mamba_state: int
    overhead: int
    kv_bytes_per_token: float | None
    tokens: int
    notes: tuple[str, ...] = ()
    lora: int = 0  # the LoRA adapters' buffers (models with adapters only)

    @property
    def total(self) -> int | None:
        if self.weights is None or self.kv_cache is None:
            return None
        return self.weights + self.kv_cache + self.mamba_state + self.overhead + self.lora

    def to_dict(self) -> EstimateDict:
        out: EstimateDict = {
            "weights": self.weights,
            "kv_cache": self.kv_cache,
            "mamba_state": self.mamba_state,
            "overhead": self.overhead,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "tokens": self.tokens,
            "notes": list(self.notes),
            "lora": self.lora,
            "total": self.total,
        }
        if not self.lora:  # the ledgers of models without adapters stay as they were
            del out["lora"]
        return out


def text_config(config: JsonMap) -> JsonObject:
    """Multimodal configs keep the language model's numbers under text_config / llm_config. A
    config.json is a model repo's (or a folder's) file: a size that is no whole number in range reads
    as absent (the estimate says what it cannot count), never a traceback or a list of 10**18 layers."""
    for key in ("text_config", "llm_config", "language_config"):
        inner = config.get(key)
        if isinstance(inner, dict) and "num_hidden_layers" in inner and "num_hidden_layers" not in config:
            return _sizes({**config, **inner})
    return _sizes(config)


def _sizes(config: JsonMap) -> JsonObject:
    out = dict(config)
    for key in SIZE_KEYS:
        value, most = out.get(key), MAX_LAYERS if key in LAYER_KEYS else MAX_SIZE
        if key in out and not (type(value) is int and 0 <= value <= most):
            del out[key]
    return out


def model_dtype_bytes(config: JsonMap, dtype_setting: str | None = None) -> int:
    name = (
        dtype_setting
        if dtype_setting and dtype_setting != "auto"
        else (config.get("torch_dtype") or config.get("dtype"))
    )
    return MODEL_DTYPE_BYTES.get(str(name), 2)


def layer_kinds(config: JsonMap) -> tuple[list[str], list[str]]:
    """(kind of each layer: 'attention' | 'sliding' | 'mamba' | 'linear' | 'mlp', notes)."""
    layers = _layers(config)
    pattern = config.get("hybrid_override_pattern")
    if isinstance(pattern, str) and pattern:  # Nemotron-H: M mamba, * attention, - MLP, E MoE
        return [{"M": "mamba", "*": "attention"}.get(ch, "mlp") for ch in pattern], ["Nemotron-H layer pattern"]
    types = config.get("layer_types")
    if isinstance(types, list) and types:
        kinds = []
        for t in types:
            t = str(t)
            kinds.append(
                "sliding"
                if t == "sliding_attention"
                else "attention"
                if t in ATTENTION_LAYER_TYPES
                else "mamba"
                if "mamba" in t
                else "linear"
            )
        return kinds, ["layer_types"]
    period, offset = config.get("attn_layer_period"), config.get("attn_layer_offset")
    if isinstance(period, int) and period > 0 and isinstance(offset, int):  # Jamba
        return ["attention" if i % period == offset else "mamba" for i in range(layers)], ["Jamba attention period"]
    interval = config.get("full_attention_interval")
    if isinstance(interval, int) and interval > 0:  # Qwen3-Next: every Nth layer full attention
        return ["attention" if (i + 1) % interval == 0 else "linear" for i in range(layers)], [
            "linear-attention layers' state not counted"
        ]
    return ["attention"] * layers, []


def mamba_state_bytes(config: JsonMap, mamba_layers: int, tp: int, dtype_bytes: int) -> int:
    """Per-sequence state of the Mamba layers on one GPU (0 when the config lacks the sizes)."""
    if not mamba_layers:
        return 0
    ssm_bytes = MODEL_DTYPE_BYTES.get(str(config.get("mamba_ssm_cache_dtype")), 4)
    heads, head_dim = _size(config, "mamba_num_heads"), _size(config, "mamba_head_dim")
    d_state = _size(config, "ssm_state_size") or _size(config, "mamba_d_state") or _size(config, "state_size")
    if heads and head_dim and d_state:  # Mamba2 (Nemotron-H)
        inner = heads * head_dim
        groups = _size(config, "n_groups") or _size(config, "mamba_n_groups") or 1
        kernel = _size(config, "conv_kernel") or _size(config, "mamba_d_conv") or 4
        ssm = inner * d_state * ssm_bytes
        conv = (inner + 2 * groups * d_state) * (kernel - 1) * dtype_bytes
    elif d_state and (hidden := _size(config, "hidden_size")):  # Mamba1 (Jamba)
        inner = (_size(config, "mamba_expand") or 2) * hidden
        kernel = _size(config, "mamba_d_conv") or 4
        ssm, conv = inner * d_state * ssm_bytes, inner * (kernel - 1) * dtype_bytes
    else:
        return 0
    return int(math.ceil(mamba_layers * (ssm + conv) / tp))


def estimate(
    config: JsonMap | None,
    weight_bytes: int | None,
    max_model_len: int,
    tp: int = 1,
    kv_cache_dtype: str | None = None,
    dtype: str | None = None,
) -> Estimate:
    """The estimate for one model on each of its `tp` GPUs."""
    tp = max(1, tp)
    weights = None if weight_bytes is None else math.ceil(weight_bytes / tp)
    if not config:
        return Estimate(weights, None, 0, OVERHEAD_BYTES, None, max_model_len, ("no config.json: KV cache unknown",))
    config = text_config(config)
    model_bytes = model_dtype_bytes(config, dtype)
    kv_bytes = model_bytes if not kv_cache_dtype or kv_cache_dtype == "auto" else KV_DTYPE_BYTES.get(kv_cache_dtype, 2)
    kinds, notes = layer_kinds(config)
    attention = kinds.count("attention")
    sliding = kinds.count("sliding")
    window = _size(config, "sliding_window")
    per_layer: float
    if rank := _size(config, "kv_lora_rank"):  # MLA: one compressed latent per token and layer, not split by TP
        per_layer = (rank + (_size(config, "qk_rope_head_dim") or 0)) * kv_bytes
        notes = notes + ["MLA latent cache"]
    else:
        heads = _size(config, "num_attention_heads") or 1
        kv_heads = _size(config, "num_key_value_heads") or _size(config, "num_kv_heads") or heads
        head_dim = _size(config, "head_dim") or ((_size(config, "hidden_size") or 0) // heads)
        per_layer = 2 * math.ceil(kv_heads / tp) * head_dim * kv_bytes
    per_token = per_layer * (attention + sliding)
    sliding_tokens = min(window, max_model_len) if window else max_model_len
    kv = math.ceil(per_layer * (attention * max_model_len + sliding * sliding_tokens))
    state = mamba_state_bytes(config, kinds.count("mamba"), tp, model_bytes)
    return Estimate(weights, kv, state, OVERHEAD_BYTES, per_token, max_model_len, tuple(notes))


def lora_bytes(
    config: JsonMap | None, max_loras: int, max_rank: int, tp: int = 1, dtype: str | None = None
) -> tuple[int | None, str]:
    """The LoRA buffers on each GPU (None when config.json lacks the sizes) and a note saying how."""
    if not config:
        return None, "LoRA adapters' memory unknown: no config.json"
    config = text_config(config)
    layers = _layers(config)
    hidden, inter = _size(config, "hidden_size"), config.get("intermediate_size")
    if not layers or not hidden:
        return None, "LoRA adapters' memory unknown: config.json names no layer count or hidden size"
    tp = max(1, tp)
    heads = _size(config, "num_attention_heads") or 1
    kv_heads = _size(config, "num_key_value_heads") or _size(config, "num_kv_heads") or heads
    head_dim = _size(config, "head_dim") or hidden // heads
    q, kv = heads * head_dim, kv_heads * head_dim
    column = [(hidden, q), (hidden, kv), (hidden, kv)]  # (in, out): A is whole, B split over the GPUs
    row = [(q, hidden)]  # A split, B whole
    if isinstance(inter, int) and inter:
        column += [(hidden, inter), (hidden, inter)]
        row.append((inter, hidden))
    per_slot = sum(i + math.ceil(o / tp) for i, o in column) + sum(math.ceil(i / tp) + o for i, o in row)
    total = layers * max_loras * max_rank * per_slot * model_dtype_bytes(config, dtype)
    moe = any(config.get(k) for k in ("num_experts", "n_routed_experts", "num_local_experts"))
    note = (
        f"LoRA adapters ~{gib(total)}: an estimate of vLLM's buffers for {max_loras} adapter(s) of rank up to "
        f"{max_rank} on every attention{' and MLP' if len(column) > 3 else ''} projection of {layers} layers"
        + ("; the experts' LoRA buffers of this mixture of experts are not counted" if moe else "")
    )
    return total, note


def _size(config: JsonMap, key: str) -> int | None:
    """One of SIZE_KEYS of a config text_config checked: a whole number, or None where it has none."""
    return number(config.get(key))


def _layers(config: JsonMap) -> int:
    """The layer count a (checked) config names, 0 where it names none."""
    return _size(config, "num_hidden_layers") or _size(config, "n_layer") or _size(config, "num_layers") or 0


def gib(value: float | None) -> str:
    return "?" if value is None else f"{value / GIB:.1f} GiB"
