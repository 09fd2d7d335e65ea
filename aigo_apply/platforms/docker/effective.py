"""What each engine runs, read from the engine and its container, beside what the file asks, and each
field where they differ with the reason (`status`). A declarative tool is the one that can show
declared against effective: an engine caps a context length, a tag comes to name another image.

From the engine itself: the names it serves and its max model length (GET /v1/models); for vLLM the
KV cache (blocks, block size, tokens) and memory fraction it settled on (its `vllm:cache_config_info`
gauge on GET /metrics, whose labels are its CacheConfig). From the container: the image it runs and
its command line. Each read is bounded by a short timeout; what cannot be read is None, never a guess."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypedDict, TypeVar

from aigo_apply.adapters.engine_http import EngineClient
from aigo_apply.adapters.engine_metrics import fetch, samples
from aigo_apply.desired.engines.common import with_slot
from aigo_apply.desired.types import DesiredModel, EngineAddress
from aigo_apply.observe.containers import ObservedContainer
from aigo_apply.observe.docker_answers import ContainerConfig

TIMEOUT = 1.0
Number = TypeVar("Number", int, float)


class EngineReads(TypedDict, total=False):
    """What an engine says it runs (read_engine): its served names and max model length, and for vLLM
    the KV cache it settled on (cache_config: its cache_config_info labels, each None when not said);
    a key is absent when its read did not answer."""

    served_names: list[str]
    max_model_len: int | None
    kv_cache_blocks: int | None
    block_size: int | None
    kv_cache_tokens: int | None
    gpu_memory_utilization: float | None
    kv_cache_dtype: str | None


class Drift(TypedDict):
    """One field where what runs differs from the file (`status`'s drift)."""

    field: str
    file: object
    effective: object
    why: str


def read_engine(address: EngineAddress | None, engine: str, alias: str) -> EngineReads:
    """What the engine at `address` says it runs: served names, max model length and, for vLLM, its
    cache config; {} when it does not answer."""
    if address is None:
        return {}
    import httpx

    found: EngineReads = {}
    try:
        with EngineClient(address, TIMEOUT) as http:
            cards = http.get("/v1/models").json().get("data", [])
            cards = [c for c in cards if isinstance(c, dict)] if isinstance(cards, list) else []
            found["served_names"] = sorted(str(c.get("id")) for c in cards)
            card = next((c for c in cards if c.get("id") == alias), cards[0] if cards else {})
            length = card.get("max_model_len")
            found["max_model_len"] = length if isinstance(length, int) and not isinstance(length, bool) else None
    except (httpx.HTTPError, OSError, ValueError, AttributeError):
        return found
    if engine == "vllm":
        found.update(cache_config(fetch(address, TIMEOUT) or ""))
    return found


def cache_config(metrics: str) -> EngineReads:
    """The KV cache a vLLM engine settled on, from its cache_config_info labels (engine 0's)."""
    found = samples(metrics, "vllm:cache_config_info")
    if not found:
        return {}
    labels = found[0][0]
    blocks, size = _number(labels.get("num_gpu_blocks"), int), _number(labels.get("block_size"), int)
    return {
        "kv_cache_blocks": blocks,
        "block_size": size,
        "kv_cache_tokens": blocks * size if blocks is not None and size is not None else None,
        "gpu_memory_utilization": _number(labels.get("gpu_memory_utilization"), float),
        "kv_cache_dtype": labels.get("cache_dtype"),
    }


def _number(text: str | None, kind: Callable[[str], Number]) -> Number | None:
    if text is None or text in ("", "None"):
        return None
    try:
        return kind(text)
    except ValueError:
        return None


def compare(
    model: DesiredModel | None,
    container: ObservedContainer | None,
    engine: Mapping[str, object],
    config: ContainerConfig,
    image_now: str | None,
) -> tuple[dict[str, object], list[Drift]]:
    """The model's effective settings, and each field that differs from the file: {field, file,
    effective, why}. Nothing is compared for a model that is not in the file or does not run."""
    effective = dict(engine)
    if container is not None:
        effective["image_id"] = container.image_id or None
        if config.get("cmd"):
            effective["command"] = config["cmd"]
    drift: list[Drift] = []
    if model is None or container is None or container.state != "running":
        return effective, drift

    def differs(field: str, asked: object, runs: object, why: str) -> None:
        drift.append({"field": field, "file": asked, "effective": runs, "why": why})

    made_from = container.spec or {}
    names = engine.get("served_names")
    if isinstance(names, list) and model.alias not in names:  # read_engine's: a list, or absent
        differs("served_names", [model.alias], names, "the engine does not serve the model under its alias")
    asked_len, runs_len = model.spec.get("context_length"), engine.get("max_model_len")
    if isinstance(asked_len, int) and runs_len is not None and runs_len != asked_len:
        differs(
            "max_model_len",
            asked_len,
            runs_len,
            "the container was made before the file changed it (`aigo-apply plan` shows the replace)"
            if made_from.get("context_length") not in (None, asked_len)
            else "the engine runs another context length than it was given (it capped it to the model's "
            "own limit or to the memory left for its KV cache)",
        )
    asked_mem = (model.spec.get("vllm") or {}).get("gpu_memory_utilization")
    runs_mem = engine.get("gpu_memory_utilization")
    if isinstance(asked_mem, int | float) and isinstance(runs_mem, int | float) and abs(runs_mem - asked_mem) > 1e-6:
        differs(
            "gpu_memory_utilization", asked_mem, runs_mem, "the engine runs another memory fraction than the file asks"
        )
    if image_now and container.image_id and image_now != container.image_id:
        differs(
            "image",
            f"{model.container.image} = {image_now[:19]}",
            container.image_id[:19],
            f"the tag {model.container.image} names another image now (pulled or built since the container "
            "was made); `aigo-apply apply` replaces it",
        )
    wanted = list(with_slot(model.container, container.slot).command)
    if config.get("cmd") and config["cmd"] != wanted:
        differs(
            "command",
            wanted,
            config["cmd"],
            "the container runs another command line than the file gives (made from an older file or by "
            "an older aigo-apply); `aigo-apply plan` says whether it is replaced",
        )
    return effective, drift
