#!/usr/bin/env python3
"""Rebuild schemas/vllm-v0.31.0.json from the installed vLLM package's live registries and enums.

Runs inside a vLLM venv (scripts/setup-vllm-venv for v0.31.0): `.venv-vllm/bin/python scripts/vllm_facts.py`
prints the rebuilt file of the installed release (schemas/vllm-vX.Y.Z.json); `--write` replaces it.
For another release, run it with a venv holding that release (the facts of v0.32.0 and v0.33.0 were
made so, with the CPU torch 2.13.0 and, for v0.33.0, `pip install --no-deps` over v0.32.0's
dependencies: the parser and registries import without the torch it pins; v0.34.0's with
.venv-vllm-0.34.0, scripts/setup-vllm-overlay's overlay on .venv-vllm, which CI builds too). Every name list, count, declared order, default,
choice list and alias in the file is read from the running package (the parser registries, the
Literal types and enums behind the flags, the `vllm serve` parser's own actions, vllm.envs); the
prose around them (meanings, source paths, error wording) is carried over from the committed file.
tests/contract/test_facts_file.py asserts that the committed file equals this output.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, get_args

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")

ROOT = Path(__file__).resolve().parent.parent
FACTS = ROOT / "schemas" / "vllm-v0.31.0.json"
sys.path.insert(0, str(ROOT / "scripts"))
from vllm_contract import serve_parser, use_cpu_platform  # noqa: E402


def same_class_aliases(lazy: dict[str, tuple[str, str]]) -> dict[str, list[str]]:
    """Class name -> the registered names that load it, for classes registered under several names."""
    by_class: dict[str, list[str]] = {}
    for name, (_module, cls) in lazy.items():
        by_class.setdefault(cls, []).append(name)
    return {cls: sorted(names) for cls, names in sorted(by_class.items()) if len(names) > 1}


def parser_registries(facts: dict[str, Any]) -> None:
    """Tool-call and reasoning parser names, exactly as validate_api_server_args accepts them."""
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    for key, manager in (("tool_call_parsers", ToolParserManager), ("reasoning_parsers", ReasoningParserManager)):
        names = list(manager.list_registered())
        facts[key] = names
        info = facts[key + "_info"]
        info["count"] = len(names)
        info["aliases_same_class"] = same_class_aliases(manager.lazy_parsers)
        if "not_built_in" in info:
            info["not_built_in"] = [n for n in info["not_built_in"] if n not in names]


def literal_list(facts: dict[str, Any], key: str, info_key: str, literal: Any) -> None:
    """A sorted name list, its count and declared order from a Literal type."""
    declared = list(get_args(literal))
    facts[key] = sorted(declared)
    info = facts[info_key]
    if "count" in info:
        info["count"] = len(declared)
    if "declared_order" in info:
        info["declared_order"] = declared


def engine_enums(facts: dict[str, Any]) -> None:
    """MoE and Mamba backends, KV-cache and model dtypes: the Literals and enums behind the flags."""
    from vllm.config.cache import CacheDType
    from vllm.config.kernel import MoEBackend
    from vllm.config.mamba import MambaBackendEnum
    from vllm.config.model import ModelDType

    literal_list(facts, "moe_backends", "moe_backends_info", MoEBackend)
    literal_list(facts, "kv_cache_dtypes", "kv_cache_dtypes_info", CacheDType)
    literal_list(facts, "dtypes", "dtypes_info", ModelDType)
    facts["mamba_backends"] = [e.value for e in MambaBackendEnum]


def speculative(facts: dict[str, Any]) -> None:
    """Speculative methods, the deprecated MTP aliases and SpeculativeConfig's keys."""
    from vllm.config.speculative import MTPModelTypes, SpeculativeConfig, SpeculativeMethod

    literal_list(facts, "speculative_methods", "speculative_info", SpeculativeMethod)
    info = facts["speculative_info"]
    info["mtp_aliases_deprecated"] = [m for m in get_args(MTPModelTypes) if m != "mtp"]
    internal = set(info["internal_keys_not_for_users"])
    info["all_keys"] = [k for k in SpeculativeConfig.__pydantic_fields__ if k not in internal]
    info["internal_keys_not_for_users"] = [k for k in SpeculativeConfig.__pydantic_fields__ if k in internal]
    info["methods_needing_draft"] = methods_needing_draft(SpeculativeConfig, facts["speculative_methods"])


def methods_needing_draft(config_class: Any, methods: list[str]) -> list[str]:
    """The methods SpeculativeConfig refuses without a draft `model`: each is tried with a token
    count and a stand-in target model. The others (MTP, n-gram, suffix, ...) take their draft from
    the target or need none; they get past the draft check and fail later on the stand-in, which
    is not what is asked here."""
    from types import SimpleNamespace

    needing = []
    for method in methods:
        target = SimpleNamespace(model="/target", model_weights=None, quantization=None)
        try:
            config_class(method=method, num_speculative_tokens=2, target_model_config=target)
        except Exception as exc:  # only the draft check's own messages count
            if "without speculative model" in str(exc) or "requires 'model'" in str(exc):
                needing.append(method)
    return needing


def quantization(facts: dict[str, Any]) -> None:
    """Quantization methods, those behind an allow flag, and the online shorthands."""
    from vllm.config.quantization import _ONLINE_SHORTHANDS
    from vllm.model_executor.layers import quantization as q

    literal_list(facts, "quantization_methods", "quantization_info", q.QuantizationMethods)
    info = facts["quantization_info"]
    info["deprecated_need_allow_flag"] = list(q.DEPRECATED_QUANTIZATION_METHODS)
    info["online_shorthands"] = list(_ONLINE_SHORTHANDS)


def load_formats(facts: dict[str, Any]) -> None:
    """The weight load formats (the Literal behind --load-format; get_model_loader refuses any other
    name when the model loads), less those whose loader refuses to be made without a loader config,
    and which loader packages the wheel requires, with or without an extra."""
    import re
    from importlib.metadata import requires

    from packaging.requirements import Requirement
    from vllm.config.load import LoadConfig
    from vllm.model_executor.model_loader import LoadFormats, get_model_loader

    literal_list(facts, "load_formats", "load_formats_info", LoadFormats)
    info = facts["load_formats_info"]
    refused = []  # a loader that needs --model-loader-extra-config, which aigo.yaml cannot give
    for name in facts["load_formats"]:
        try:
            get_model_loader(LoadConfig(load_format=name))
        except ImportError:  # a package this venv lacks and an image may have: the image decides
            pass
        except Exception as exc:
            refused.append({"name": name, "error": f"{type(exc).__name__}: {exc}"})
    facts["load_formats"] = [n for n in facts["load_formats"] if n not in {r["name"] for r in refused}]
    info["count"] = len(facts["load_formats"])
    info["refused_without_loader_config"] = refused
    wanted = {"fastsafetensors", "runai-model-streamer", "instanttensor", "tensorizer"}
    always, extras = set(), {}
    for line in requires("vllm") or []:
        requirement = Requirement(line)
        name = requirement.name.lower()
        if name not in wanted:
            continue
        extra = re.search(r"extra == ['\"]([^'\"]+)['\"]", str(requirement.marker or ""))
        if extra:
            extras[name] = extra.group(1)
        else:
            always.add(name)
    info["packages_required"] = sorted(always)
    info["packages_in_extras"] = dict(sorted(extras.items()))


def start_flags(facts: dict[str, Any], actions: dict[str, Any]) -> None:
    """The start-up flags aigo-apply writes for `vllm.compilation`: those this release's parser has
    (the others are dropped from the table), with their defaults and, for -O, the levels."""
    from vllm.config.vllm import OptimizationLevel

    table = facts["start_flags"]
    for flag in list(table):
        if flag not in actions:
            del table[flag]
            continue
        table[flag]["default"] = plain(actions[flag].default)
        table[flag]["nargs"] = actions[flag].nargs
    if "--optimization-level" in table:
        table["--optimization-level"]["choices"] = [int(level) for level in OptimizationLevel]


def flag_actions() -> dict[str, Any]:
    """Every option string of `vllm serve` -> its argparse action."""
    parser = serve_parser()
    serve = next(a for a in parser._actions if a.dest == "subparser").choices["serve"]
    return {option: action for action in serve._actions for option in action.option_strings}


def flag_facts(facts: dict[str, Any]) -> None:
    """Defaults, aliases and argparse choices of the flags the file describes, from the parser itself."""
    actions = flag_actions()
    for table in (facts["flags"], facts["extra_flags_hybrid_moe"]):
        for flag, entry in table.items():
            if flag.startswith("--"):
                describe_flag(entry, flag, actions[flag])
    for key, info_key in (
        ("--moe-backend", "moe_backends_info"),
        ("--kv-cache-dtype", "kv_cache_dtypes_info"),
        ("--dtype", "dtypes_info"),
        ("--mamba-backend", "mamba_backends_info"),
        ("--quantization", "quantization_info"),
        ("--load-format", "load_formats_info"),
    ):
        facts[info_key]["argparse_choices"] = actions[key].choices is not None
        facts[info_key]["default"] = plain(actions[key].default)
    facts["mamba_cache_dtypes"]["default"] = actions["--mamba-cache-dtype"].default
    facts["mamba_cache_dtypes"]["choices"] = list(actions["--mamba-cache-dtype"].choices)
    facts["flags"]["--mamba-backend"]["choices"] = facts["mamba_backends"]  # an enum, not argparse choices
    for flag, entry in facts["mamba_backends_info"]["related_flags"].items():
        describe_flag(entry, flag, actions[flag])
    start_flags(facts, actions)


def describe_flag(entry: dict[str, Any], flag: str, action: Any) -> None:
    """Overwrite the default, the aliases and a literal choice list with the action's own (if it has one)."""
    if "default" in entry:
        entry["default"] = plain(action.default)
    if "aliases" in entry:
        entry["aliases"] = [o for o in action.option_strings if o != flag]
    if isinstance(entry.get("choices"), list) and action.choices is not None:
        entry["choices"] = [c for c in action.choices if c is not None]  # None: the flag may be left unset


def plain(value: Any) -> Any:
    """A default as JSON: enum members by value, anything else as is."""
    return getattr(value, "value", value)


def environment(facts: dict[str, Any]) -> None:
    """The VLLM_* variables vllm.envs knows (anything else logs "Unknown vLLM environment variable")."""
    import vllm.envs

    names = sorted(n for n in vllm.envs.environment_variables if n.startswith("VLLM_"))
    facts["env"]["known_vllm_env_vars"] = names
    facts["env"]["known_vllm_env_vars_count"] = len(names)


def rebuild(committed: dict[str, Any]) -> dict[str, Any]:
    """The committed facts with every live-readable value replaced by what the package reports."""
    import vllm

    facts = json.loads(json.dumps(committed))
    facts["version"] = vllm.__version__
    parser_registries(facts)
    engine_enums(facts)
    speculative(facts)
    quantization(facts)
    load_formats(facts)
    flag_facts(facts)
    environment(facts)
    return facts


def render(facts: dict[str, Any]) -> str:
    """The file's exact text: two-space indent, UTF-8 kept, trailing newline."""
    return json.dumps(facts, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    """Print the rebuilt file of the installed release, or write it with --write. A release without a
    committed file yet starts from v0.31.0's, whose prose it carries (marked in `prose_from`)."""
    import vllm

    use_cpu_platform()
    target = ROOT / "schemas" / f"vllm-v{vllm.__version__}.json"
    base = json.loads((target if target.exists() else FACTS).read_text())
    if not target.exists():
        base["prose_from"] = (
            f"meanings, source paths and error wording are v{json.loads(FACTS.read_text())['version']}'s; "
            "every name list, count, default, choice and alias is read from this release"
        )
    text = render(rebuild(base))
    if "--write" in argv:
        target.write_text(text)
        print(f"wrote {target.relative_to(ROOT)}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
