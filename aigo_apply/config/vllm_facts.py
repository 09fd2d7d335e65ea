"""The facts read from real vLLM releases, shipped as data in schemas/ (one vllm-vX.Y.Z.json each,
made by scripts/vllm_facts.py from the installed package).

v0.31.0 is the default release (the built-in image tag) and the schema's own enumerations are copies
of its lists (a test keeps them equal). When `engines.vllm.image_tag` names another release that has a
facts file here (v0.32.0, v0.33.0, v0.34.0), the names a file uses are checked against that release instead:
config/schema.py swaps the enumerations, the vLLM renderer re-checks against the same lists. Code that
needs a name list or a note about a name asks this module rather than hard-coding it.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from aigo_apply.json_types import JsonObject, arr, obj
from aigo_apply.resources import data_dir, schema_data

VLLM_VERSION = "0.31.0"  # the default release: the built-in image tag v0.31.0
FACTS_FILE = f"vllm-v{VLLM_VERSION}.json"
_FACTS_NAME = re.compile(r"vllm-v(\d+\.\d+\.\d+)\.json")
_TAG_RELEASE = re.compile(r"v?(\d+\.\d+\.\d+)(?![\d.])")

# Setting name in aigo.yaml -> key of its name list in the facts file.
ENUM_SETTINGS = {
    "tool_call_parser": "tool_call_parsers",
    "reasoning_parser": "reasoning_parsers",
    "moe_backend": "moe_backends",
    "mamba_backend": "mamba_backends",
    "quantization": "quantization_methods",
    "kv_cache_dtype": "kv_cache_dtypes",
    "dtype": "dtypes",
    "load_format": "load_formats",
}
# A model's `vllm.compilation` keys -> the flag each writes: what vLLM does at start (compile, capture
# CUDA graphs), each a flag of its own in the releases here (no JSON). A release whose `start_flags`
# lack a flag does not know that setting, and a file that sets it is refused naming the release.
COMPILATION_FLAGS = {
    "optimization_level": "--optimization-level",
    "cudagraph_capture_sizes": "--cudagraph-capture-sizes",
    "max_cudagraph_capture_size": "--max-cudagraph-capture-size",
}


@cache
def known_releases() -> tuple[str, ...]:
    """The releases with a facts file here, oldest first."""
    found = [m.group(1) for p in data_dir("schemas").iterdir() if (m := _FACTS_NAME.fullmatch(p.name))]
    return tuple(sorted(found, key=lambda v: tuple(int(x) for x in v.split("."))))


def tag_release(tag: str | None) -> str | None:
    """The release an image tag names (`v0.33.0-cu129` -> 0.33.0), or None (`latest`, `nightly`)."""
    if tag is None:
        return VLLM_VERSION
    found = _TAG_RELEASE.match(tag)
    return found.group(1) if found else None


def checked_release(tag: str | None) -> str:
    """The release whose names a file with this vLLM image tag is checked against: the tag's own when
    its facts are here, else the default v0.31.0 (the plan then warns that the tag is another one)."""
    release = tag_release(tag)
    return release if release in known_releases() else VLLM_VERSION


def config_release(data: object) -> str:
    """The release a config's names are checked against, from its engines.vllm.image_tag (when that
    is text; the schema checks it either way)."""
    engines = data.get("engines") if isinstance(data, dict) else None
    vllm = engines.get("vllm") if isinstance(engines, dict) else None
    tag = vllm.get("image_tag") if isinstance(vllm, dict) else None
    return checked_release(tag if isinstance(tag, str) else None)


def facts(version: str = VLLM_VERSION) -> dict[str, Any]:
    return schema_data(f"vllm-v{version}.json")


def names(setting: str, version: str = VLLM_VERSION) -> list[str]:
    """The names a vLLM release accepts for one `vllm:` setting, e.g. names('moe_backend')."""
    return list(facts(version)[ENUM_SETTINGS[setting]])


def start_flags(version: str = VLLM_VERSION) -> JsonObject:
    """The start-up flags of `vllm.compilation` that a release has (flag -> its facts)."""
    return dict(obj(facts(version).get("start_flags")))


def unknown_compilation(key: str, version: str = VLLM_VERSION) -> str | None:
    """Why vLLM `version` cannot take the `vllm.compilation` setting `key`, or None when it can."""
    flag = COMPILATION_FLAGS.get(key)
    if flag is None or flag in start_flags(version):
        return None
    return f"vLLM v{version} has no {flag}: this setting needs a release that has it (or leave it unset)"


def optimization_levels(version: str = VLLM_VERSION) -> list[int]:
    """The optimization levels (-O) a release accepts: its OptimizationLevel enum."""
    choices = arr(obj(start_flags(version).get("--optimization-level")).get("choices"))
    return [level for level in choices if type(level) is int]  # the facts list whole numbers


def needs_loader_config(version: str = VLLM_VERSION) -> list[str]:
    """Load formats the release has but refuses to load with unless a loader config is given (tensorizer)."""
    return [r["name"] for r in facts(version).get("load_formats_info", {}).get("refused_without_loader_config", [])]


def speculative_methods(version: str = VLLM_VERSION) -> list[str]:
    return list(facts(version)["speculative_methods"])


def methods_needing_draft(version: str = VLLM_VERSION) -> list[str]:
    """Speculative methods the release refuses without a separate draft checkpoint."""
    return list(facts(version)["speculative_info"]["methods_needing_draft"])


def deprecated_mtp_aliases(version: str = VLLM_VERSION) -> list[str]:
    """MTP method names the release still accepts but rewrites to `mtp` with a deprecation warning."""
    return list(facts(version)["speculative_info"]["mtp_aliases_deprecated"])


def deprecated_quantizations(version: str = VLLM_VERSION) -> list[str]:
    """Quantization methods that the release only accepts behind an extra allow flag."""
    return list(facts(version)["quantization_info"]["deprecated_need_allow_flag"])
