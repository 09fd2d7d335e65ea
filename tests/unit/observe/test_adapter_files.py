"""What an adapter's folder holds, read as vLLM 0.31.0 loads it: adapter_config.json's rank, target
modules and base model, and safetensors weights; every other folder says why in words, never raises."""

from __future__ import annotations

import json

import pytest

from aigo_apply.desired.types import AdapterFiles
from aigo_apply.observe.adapter_files import adapter_files, read_adapter


def adapter(folder, config=None, weights=True):
    folder.mkdir(parents=True, exist_ok=True)
    if config is not None:
        text = config if isinstance(config, str) else json.dumps(config)
        (folder / "adapter_config.json").write_text(text)
    if weights:
        (folder / "adapter_model.safetensors").write_bytes(b"\x08\0\0\0\0\0\0\0{}      ")
    return folder


PEFT = {"r": 8, "lora_alpha": 16, "target_modules": ["v_proj", "q_proj"], "base_model_name_or_path": "org/base"}


def test_a_peft_adapter_reads_as_its_rank_modules_and_base(tmp_path):
    assert read_adapter(adapter(tmp_path / "a", PEFT)) == AdapterFiles(8, ("q_proj", "v_proj"), "org/base")
    one = {**PEFT, "target_modules": "all-linear", "base_model_name_or_path": ""}
    assert read_adapter(adapter(tmp_path / "b", one)) == AdapterFiles(8, ("all-linear",), None)


@pytest.mark.parametrize(
    ("config", "weights", "words"),
    [
        (None, True, "holds no adapter_config.json, so it is not a LoRA adapter"),
        ("{not json", True, "adapter_config.json is not JSON"),
        ("[1]", True, "adapter_config.json is not a JSON object"),
        ({**PEFT, "r": 0}, True, "declares no rank vLLM can load (r: 0"),
        ({**PEFT, "r": "8"}, True, "declares no rank vLLM can load (r: '8'"),
        ({**PEFT, "r": True}, True, "declares no rank vLLM can load (r: True"),
        (PEFT, False, "holds no .safetensors weights"),
    ],
)
def test_a_folder_vllm_cannot_load_says_why(tmp_path, config, weights, words):
    found = read_adapter(adapter(tmp_path / "a", config, weights))
    assert found.problem is not None and words in found.problem


def test_missing_files_and_large_configs_say_why(tmp_path):
    assert "does not exist on this machine" in str(read_adapter(tmp_path / "none").problem)
    (tmp_path / "file").write_text("x")
    assert "is a file; an adapter is a folder" in str(read_adapter(tmp_path / "file").problem)
    big = adapter(tmp_path / "big", " " * (1024 * 1024 + 1))
    assert "is larger than" in str(read_adapter(big).problem)
    assert set(adapter_files([str(tmp_path / "none"), str(big)])) == {str(tmp_path / "none"), str(big)}
