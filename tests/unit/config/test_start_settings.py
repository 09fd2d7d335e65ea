"""Less to do at start, as ordinary per-model settings: `vllm.compilation` (the optimization level,
the CUDA-graph capture sizes and their largest) and `vllm.load_format`, validated against the vLLM
release the image tag names (its facts file), each refusal at its line and naming the release."""

from __future__ import annotations

import pytest

from aigo_apply.config import schema as schema_module
from aigo_apply.config import vllm_facts
from aigo_apply.config.schema import release_schema, schema
from aigo_apply.config.vllm_facts import COMPILATION_FLAGS, facts, known_releases, optimization_levels
from aigo_apply.errors import ConfigInvalid
from aigo_apply.observe.config_file import load_config

from helpers.configs import write_config


def text(settings: str, tag: str | None = None) -> str:
    engines = f"engines: {{vllm: {{image_tag: {tag}}}}}\n" if tag else ""
    return (
        f"version: 1\nproject: lab\n{engines}models:\n  m:\n    source: {{repo: org/m}}\n    context_length: 4096\n"
        f"    gpus: [0]\n    vllm:\n{settings}"
    )


def problems(tmp_path, settings: str, tag: str | None = None) -> list[str]:
    try:
        load_config(str(write_config(tmp_path, text(settings, tag))))
    except ConfigInvalid as exc:
        return [f"{p.line}: {p.path}: {p.message}" for p in exc.problems]
    return []


EVERY = """      load_format: fastsafetensors
      compilation:
        optimization_level: 1
        cudagraph_capture_sizes: [1, 2, 4, 8]
        max_cudagraph_capture_size: 8
"""


@pytest.mark.parametrize("release", known_releases())
def test_every_start_setting_validates_with_each_release_that_has_it(tmp_path, release):
    assert problems(tmp_path, EVERY, f"v{release}") == []
    assert set(facts(release)["start_flags"]) == set(COMPILATION_FLAGS.values())  # all four have every flag
    for fmt in facts(release)["load_formats"]:
        assert problems(tmp_path, f"      load_format: {fmt}\n", f"v{release}") == [], fmt


def test_the_schema_lists_the_default_release_s_levels_and_formats():
    props = schema()["$defs"]["vllmSettings"]["properties"]
    assert props["compilation"]["properties"]["optimization_level"]["enum"] == optimization_levels() == [0, 1, 2, 3]
    assert props["load_format"]["enum"] == facts()["load_formats"]
    assert set(props["compilation"]["properties"]) == set(COMPILATION_FLAGS)


REFUSED = {
    "a level the release lacks": (
        "      compilation: {optimization_level: 4}\n",
        "models.m.vllm.compilation.optimization_level: 4 is not an optimization level vLLM v0.31.0 has",
    ),
    "a level written as vLLM's -O spelling": (
        "      compilation: {optimization_level: O1}\n",
        "models.m.vllm.compilation.optimization_level: 'O1' is not an optimization level vLLM v0.31.0 has",
    ),
    "a size of none": (
        "      compilation: {cudagraph_capture_sizes: [1, 0]}\n",
        "models.m.vllm.compilation.cudagraph_capture_sizes[1]: must be at least 1, not 0",
    ),
    "no sizes at all": ("      compilation: {cudagraph_capture_sizes: []}\n", "cudagraph_capture_sizes"),
    "sizes as one number": (
        "      compilation: {cudagraph_capture_sizes: 8}\n",
        "models.m.vllm.compilation.cudagraph_capture_sizes: must be a list, not 8",
    ),
    "a fractional size": ("      compilation: {max_cudagraph_capture_size: 8.5}\n", "must be an integer"),
    "a JSON blob": (
        "      compilation: '{\"level\": 3}'\n",
        "models.m.vllm.compilation: must be a mapping",
    ),
    "a key vLLM has but aigo-apply does not write": (
        "      compilation: {mode: 3}\n",
        "models.m.vllm.compilation.mode: unknown key 'mode'",
    ),
    "an empty block": ("      compilation: {}\n", "an empty compilation block sets nothing"),
    "a maximum that is not the largest size": (
        "      compilation: {cudagraph_capture_sizes: [1, 2, 4], max_cudagraph_capture_size: 8}\n",
        "models.m.vllm.compilation.max_cudagraph_capture_size: 8 is not the largest of cudagraph_capture_sizes (4)",
    ),
    "a load format vLLM does not have": (
        "      load_format: fast\n",
        "models.m.vllm.load_format: 'fast' is not a load_format that vLLM v0.31.0 knows",
    ),
    "a load format vLLM loads only with a loader config": (
        "      load_format: tensorizer\n",
        "vLLM v0.31.0 cannot load with 'tensorizer' unless --model-loader-extra-config",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_start_setting_vllm_would_refuse_is_refused_at_its_line(tmp_path, case):
    settings, expected = REFUSED[case]
    found = problems(tmp_path, settings)
    assert any(expected in p for p in found), found
    assert all(p.startswith("9: ") for p in found), found  # the setting's own line


def test_the_largest_size_written_beside_its_sizes_is_accepted(tmp_path):
    assert (
        problems(tmp_path, "      compilation: {cudagraph_capture_sizes: [4, 1, 2], max_cudagraph_capture_size: 4}\n")
        == []
    )


def test_a_setting_a_release_has_no_flag_for_is_refused_naming_that_release(tmp_path, monkeypatch):
    """A release whose facts lack a start flag (none of v0.31.0-v0.34.0 does): the setting is refused
    with that release's name, and the same file with the default release validates."""
    lacking = {
        "0.32.0": {k: v for k, v in facts("0.32.0")["start_flags"].items() if k != "--max-cudagraph-capture-size"}
    }
    monkeypatch.setattr(
        vllm_facts, "start_flags", lambda version="0.31.0": lacking.get(version, facts(version)["start_flags"])
    )
    schema_module._validator.cache_clear()
    try:
        found = problems(tmp_path, "      compilation: {max_cudagraph_capture_size: 8}\n", "v0.32.0")
        assert any(
            "models.m.vllm.compilation.max_cudagraph_capture_size: vLLM v0.32.0 has no --max-cudagraph-capture-size"
            in p
            for p in found
        ), found
        assert problems(tmp_path, "      compilation: {max_cudagraph_capture_size: 8}\n", "v0.31.0") == []
        assert (
            "not"
            in release_schema("0.32.0")["$defs"]["vllmSettings"]["properties"]["compilation"]["properties"][
                "max_cudagraph_capture_size"
            ]
        )
    finally:
        schema_module._validator.cache_clear()
