"""The facts read from the real vLLM v0.31.0 release, shipped as data in schemas/.

The schema's enumerations are copies of these lists (a test keeps them equal); code that needs a
name list or a note about a name asks this module rather than hard-coding it.
"""

from __future__ import annotations

from typing import Any

from aigo_apply.resources import schema_data

VLLM_VERSION = "0.31.0"
FACTS_FILE = f"vllm-v{VLLM_VERSION}.json"

# Setting name in aigo.yaml -> key of its name list in the facts file.
ENUM_SETTINGS = {
    "tool_call_parser": "tool_call_parsers",
    "reasoning_parser": "reasoning_parsers",
    "moe_backend": "moe_backends",
    "mamba_backend": "mamba_backends",
    "quantization": "quantization_methods",
    "kv_cache_dtype": "kv_cache_dtypes",
    "dtype": "dtypes",
}


def facts() -> dict[str, Any]:
    return schema_data(FACTS_FILE)


def names(setting: str) -> list[str]:
    """The names vLLM v0.31.0 accepts for one `vllm:` setting, e.g. names('moe_backend')."""
    return list(facts()[ENUM_SETTINGS[setting]])


def speculative_methods() -> list[str]:
    return list(facts()["speculative_methods"])


def deprecated_mtp_aliases() -> list[str]:
    """MTP method names v0.31.0 still accepts but rewrites to `mtp` with a deprecation warning."""
    return list(facts()["speculative_info"]["mtp_aliases_deprecated"])


def deprecated_quantizations() -> list[str]:
    """Quantization methods that v0.31.0 only accepts behind an extra allow flag."""
    return list(facts()["quantization_info"]["deprecated_need_allow_flag"])
