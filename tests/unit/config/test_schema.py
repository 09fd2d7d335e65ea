"""The schema is valid draft 2020-12, and its vLLM enumerations are exactly the facts file's lists."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from aigo_apply.config.schema import schema
from aigo_apply.config.units import parse_token_count
from aigo_apply.config.vllm_facts import ENUM_SETTINGS, facts

from helpers.paths import ROOT


def test_schema_is_valid_draft_2020_12():
    Draft202012Validator.check_schema(schema())
    assert schema()["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize("setting", sorted(ENUM_SETTINGS))
def test_enumerations_match_the_vllm_facts(setting):
    enum = schema()["$defs"]["vllmSettings"]["properties"][setting]["enum"]
    assert enum == facts()[ENUM_SETTINGS[setting]]
    assert len(enum) == facts().get(ENUM_SETTINGS[setting] + "_info", {}).get("count", len(enum))


def test_speculative_methods_match_the_vllm_facts():
    enum = schema()["$defs"]["vllmSettings"]["properties"]["speculative"]["properties"]["method"]["enum"]
    assert enum == facts()["speculative_methods"] and len(enum) == facts()["speculative_info"]["count"]


# Where schemas/vllm-v0.31.0.json (rebuilt from the installed vLLM 0.31.0 by scripts/vllm_facts.py)
# corrects the hand-read shared reference: each entry is (path, what the shared copy says, what vLLM
# itself says). Any other difference fails, so a drift in either file is seen.
MISSING = object()  # a fact the shared reference does not have
CORRECTIONS_TO_SHARED = [
    # the start-up settings (vllm.compilation, vllm.load_format), read from vLLM 0.31.0 after the reference was
    (("load_formats",), MISSING, facts()["load_formats"]),
    (("load_formats_info",), MISSING, facts()["load_formats_info"]),
    (("start_flags",), MISSING, facts()["start_flags"]),
    (
        ("speculative_info", "methods_needing_draft"),
        MISSING,
        ["custom_class", "dflash", "draft_model", "eagle", "eagle3", "medusa", "mlp_speculator"],
    ),
    (
        ("mamba_backends_info", "related_flags", "--mamba-ssu-algorithm", "choices"),
        ["auto", "simple", "vertical", "horizontal"],
        ["auto", "horizontal", "simple", "vertical"],  # vLLM sorts the choices it prints
    ),
    (
        ("extra_flags_hybrid_moe", "--enable-expert-parallel", "aliases"),
        ["-ep"],
        ["--no-enable-expert-parallel", "-ep"],  # a BooleanOptionalAction also makes the --no- form
    ),
    (
        ("quantization_info", "online_shorthands"),
        [
            "fp8_per_tensor",
            "fp8_per_block",
            "fp8_per_channel",
            "int8_per_channel_weight_only",
            "nvfp4_per_token",
            "mxfp8",
        ],
        [
            "fp8_per_tensor",
            "fp8_per_block",
            "fp8_per_channel",
            "mxfp8",
            "mxfp4",
            "int8_per_channel_weight_only",
            "nvfp4_per_token",
        ],
    ),
]


def test_methods_that_need_a_draft_require_one_in_the_schema():
    spec = schema()["$defs"]["vllmSettings"]["properties"]["speculative"]
    assert spec["if"]["properties"]["method"]["enum"] == facts()["speculative_info"]["methods_needing_draft"]
    assert spec["then"] == {"required": ["draft"]}


def test_facts_copy_matches_the_shared_reference_when_present():
    shared_file = ROOT.parent / "shared" / "reference" / "vllm-v0.31.0.json"
    if not shared_file.exists():
        pytest.skip("no shared/ reference beside this checkout")
    shared = json.loads(shared_file.read_text())
    for path, said, corrected in CORRECTIONS_TO_SHARED:
        node = shared
        for key in path[:-1]:
            node = node[key]
        assert node.get(path[-1], MISSING) == said, f"the shared reference changed at {path}: drop the correction"
        node[path[-1]] = corrected
    assert shared == facts()


def test_every_schema_property_has_a_description_or_reference():
    missing = []

    def walk(node, path):
        if isinstance(node, dict):
            for key, sub in node.get("properties", {}).items():
                if not ({"description", "$ref"} & set(sub)):
                    missing.append(".".join(path + [key]))
                walk(sub, path + [key])
            for key, sub in node.get("$defs", {}).items():
                walk(sub, path + [key])

    walk(schema(), [])
    assert missing == []


@pytest.mark.parametrize("written, tokens", sorted(facts()["flags"]["--max-model-len"]["examples"].items()))
def test_context_length_parses_like_vllm(written, tokens):
    if tokens == -1:
        with pytest.raises(ValueError, match="aigo-apply needs the number"):
            parse_token_count(written)
    else:
        assert parse_token_count(written) == tokens
