"""What an engine does at start and where it keeps what it compiled, as the desired container says:
`vllm.compilation` and `vllm.load_format` rendered as vLLM's own flags (checked again right before a
container is made, as every setting is), and one compile-cache volume per engine image, named from the
file alone so an unchanged file renders the same container run after run."""

from __future__ import annotations

import copy
import re

import pytest

from aigo_apply.desired.engines import render
from aigo_apply.desired.engines.common import CACHE_DIR, cache_volume, legacy_cache_volume
from aigo_apply.errors import UnsafeSetting

from helpers.planner_inputs import desired

START = """
version: 1
project: lab
engines: {vllm: {image: local/engine, image_tag: "1"}}
models:
  m:
    source: {path: /m/m}
    context_length: 4096
    gpus: none
    vllm:
      load_format: runai_streamer
      compilation: {max_cudagraph_capture_size: 8, optimization_level: 1, cudagraph_capture_sizes: [1, 2, 4, 8]}
"""


def test_start_settings_become_vllm_s_own_flags_one_word_per_value(tmp_path):
    command = list(desired(tmp_path, START).models["m"].container.command)
    joined = " ".join(command)
    assert "--load-format runai_streamer" in joined
    assert (
        "--optimization-level 1 --cudagraph-capture-sizes 1 2 4 8 --max-cudagraph-capture-size 8" in joined
    )  # the table's order, whatever order the file wrote
    assert not any(word.startswith(("{", "-O", "--compilation-config")) for word in command)  # no JSON


def test_no_start_setting_no_flag(tmp_path):
    command = " ".join(desired(tmp_path).models["alpha"].container.command)
    for flag in ("--load-format", "--optimization-level", "--cudagraph-capture-sizes", "--max-cudagraph-capture-size"):
        assert flag not in command


@pytest.mark.parametrize(
    "key, value, why",
    [
        ("optimization_level", 7, "is not a level vLLM v0.31.0 has"),
        ("optimization_level", True, "is not a level vLLM v0.31.0 has"),
        ("optimization_level", "1", "is not a level vLLM v0.31.0 has"),
        ("cudagraph_capture_sizes", [1, 0], "is not whole numbers 1-65536"),
        ("cudagraph_capture_sizes", [], "is not whole numbers 1-65536"),
        ("cudagraph_capture_sizes", ["1; rm"], "is not whole numbers 1-65536"),
        ("max_cudagraph_capture_size", 65537, "is not whole numbers 1-65536"),
        ("max_cudagraph_capture_size", False, "is not whole numbers 1-65536"),
        ("mode", 3, "not a setting aigo-apply knows"),
    ],
)
def test_a_hand_edited_start_setting_is_refused_before_a_container_is_made(tmp_path, key, value, why):
    spec = copy.deepcopy(desired(tmp_path, START).models["m"].spec)
    spec["vllm"]["compilation"][key] = value
    with pytest.raises(UnsafeSetting, match=re.escape(f"vllm.compilation.{key}")) as refused:
        render("lab", "m", spec)
    assert why in str(refused.value)


def test_a_hand_edited_load_format_is_refused_before_a_container_is_made(tmp_path):
    spec = copy.deepcopy(desired(tmp_path, START).models["m"].spec)
    spec["vllm"]["load_format"] = "tensorizer"
    with pytest.raises(UnsafeSetting, match="vllm.load_format 'tensorizer' is not a name vLLM v0.31.0 accepts"):
        render("lab", "m", spec)


ENGINES = """
version: 1
project: lab
engines:
  vllm: {image: local/engine, image_tag: "1"}
  sglang: {image_tag: v0.5.6-cu129}
  llama.cpp: {image_tag: server}
models:
  a: {source: {path: /m/a}, context_length: 4096, gpus: none}
  b: {source: {path: /m/b}, context_length: 4096, gpus: none}
  c: {source: {path: /m/c}, context_length: 4096, gpus: none, engine: sglang}
  g: {source: {path: /m/g.gguf}, context_length: 4096, gpus: none}
"""


def caches(d) -> dict[str, list[str]]:
    return {a: [m.source for m in model.container.mounts if m.target == CACHE_DIR] for a, model in d.models.items()}


def test_each_engine_image_has_its_own_cache_volume_and_models_on_one_image_share_it(tmp_path):
    d = desired(tmp_path, ENGINES)
    found = caches(d)
    vllm_image, sglang_image = d.models["a"].container.image, d.models["c"].container.image
    assert found == {
        "a": [cache_volume("lab", vllm_image)],
        "b": [cache_volume("lab", vllm_image)],
        "c": [cache_volume("lab", sglang_image)],
        "g": [],  # llama.cpp keeps no compile cache
    }
    assert cache_volume("lab", vllm_image) != cache_volume("lab", sglang_image)
    assert legacy_cache_volume("lab") not in {v for vs in found.values() for v in vs}


def test_a_new_image_tag_moves_the_model_to_another_volume_and_back_again(tmp_path):
    one = caches(desired(tmp_path, ENGINES))["a"]
    two = caches(desired(tmp_path, ENGINES.replace('image_tag: "1"', 'image_tag: "2"')))["a"]
    assert one != two
    assert caches(desired(tmp_path, ENGINES))["a"] == one  # the name comes from the file alone


def test_the_volume_name_is_the_same_whatever_else_the_file_holds(tmp_path):
    alone = ENGINES.split("  b:")[0]
    assert caches(desired(tmp_path, alone))["a"] == caches(desired(tmp_path, ENGINES))["a"]


@pytest.mark.parametrize("project", ["a", "lab", "p" * 32])
@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.31.0", "registry.example:5000/team/x/vllm:" + "t" * 128])
def test_a_cache_volume_name_is_a_plain_docker_volume_name_of_its_project(project, image):
    name = cache_volume(project, image)
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}", name)
    assert name.startswith(legacy_cache_volume(project) + "-") and len(name) <= 64
