"""A key written in vLLM's words gets the key of aigo.yaml that means it: the table of vLLM's flags
(config/vllm_flags.py) is the one the vLLM command line is rendered from, so every flag a rendered
command line holds is in it, and every flag in it, written as a model's key (`--max-model-len:`,
`max_model_len:`) or inside its `vllm:` block, gets "did you mean" the key that writes that flag."""

from __future__ import annotations

import os

import pytest
import yaml

from aigo_apply.config.vllm_flags import FLAG_KEYS, OTHER_FLAGS, flag_words
from aigo_apply.desired.build import build_desired
from aigo_apply.errors import ConfigInvalid
from aigo_apply.observe.config_file import load_config

from helpers.configs import host_context, write_config
from helpers.paths import ROOT

HEAD = "version: 1\nproject: lab\n"
# Every `vllm:` setting (the contract's file), a swap group (sleep mode) and a model with a port.
EVERY = (ROOT / "tests" / "contract" / "every-vllm-setting.yaml").read_text()
MORE = """\
version: 1
project: more
models:
  sleepy: {source: {repo: a/s}, context_length: 4096, gpus: [0], swap_group: g, vllm: {tool_calling: false}}
  ported: {source: {repo: a/p}, context_length: 4096, gpus: [1], port: 19100}
"""
MODEL_KEYS = {"source", "context_length", "port", "on_demand", "adapters", "vllm"}


def _problems(tmp_path, text: str) -> list[str]:
    path = write_config(tmp_path, text)
    with pytest.raises(ConfigInvalid) as info:
        load_config(str(path))
    return [p.format().replace(str(path), "F") for p in info.value.problems]


@pytest.mark.parametrize("text,base", [(EVERY, ROOT / "tests" / "contract"), (MORE, None)])
def test_every_flag_a_rendered_command_line_holds_is_in_the_table(tmp_path, monkeypatch, text, base):
    monkeypatch.setitem(os.environ, "AIGO_STATE_DIR", str(tmp_path / "state"))
    data = yaml.safe_load(text)
    path = (base or tmp_path) / f".aigo-words-{os.getpid()}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    try:
        desired = build_desired(load_config(str(path)), host_context(tmp_path / "store"))
    finally:
        path.unlink()
    written = set()
    for alias, model in desired.models.items():
        if model.spec["engine"] != "vllm":
            continue
        flags = [w for w in model.container.command if w.startswith("--")]
        assert set(flags) <= set(FLAG_KEYS), (alias, set(flags) - set(FLAG_KEYS))
        for flag in flags:  # each flag comes from the key the table names (or from aigo-apply itself)
            key = FLAG_KEYS[flag]
            head, _, setting = key.partition(".")
            if key and head == "vllm" and setting not in ("gpu_memory_utilization", "tool_call_parser", "tool_calling"):
                block = data["models"][alias]["vllm"]
                for part in setting.split("."):  # vllm.compilation.optimization_level: a key of a block
                    assert part in block, (alias, flag, key)
                    block = block[part]
            elif key and head in MODEL_KEYS - {"vllm", "source"}:  # (a swap_group makes a model on demand)
                assert head in data["models"][alias] or (head == "on_demand" and "swap_group" in data["models"][alias])
        written |= set(flags)
    if text is EVERY:
        assert {"--enable-lora", "--speculative-config", "--reasoning-parser", "--uds"} <= written
    else:
        assert {"--enable-sleep-mode", "--port"} <= written


def _model_level_cases() -> list[tuple[str, str]]:
    """(key as written, the key of the file that flag belongs to) for each flag, in its two spellings,
    where the spelling is not itself a key of a model."""
    out = []
    for flag, target in sorted(FLAG_KEYS.items()):
        for written in (flag, flag[2:].replace("-", "_")):
            if written not in MODEL_KEYS | {"gpus", "env"}:
                out.append((written, target))
    return out


@pytest.mark.parametrize("written,target", _model_level_cases())
def test_a_model_key_in_vllm_s_words_names_the_file_s_key(tmp_path, written, target):
    text = HEAD + f"models:\n  a:\n    source: {{repo: org/a}}\n    context_length: 4096\n    {written!r}: 1\n"
    found = _problems(tmp_path, text)
    mine = [p for p in found if f"unknown key '{written}'" in p]
    assert len(mine) == 1, found
    flag = flag_words(written)
    if target:
        assert f"(did you mean '{target}'? vLLM's {flag} is {target} in aigo.yaml)" in mine[0]
    else:
        assert f"aigo-apply writes vLLM's {flag} itself" in mine[0]


@pytest.mark.parametrize("flag", sorted(f for f, t in FLAG_KEYS.items() if t.startswith("vllm.")))
def test_a_flag_written_in_the_vllm_block_names_its_setting(tmp_path, flag):
    text = HEAD + f"models:\n  a:\n    source: {{repo: org/a}}\n    context_length: 4096\n    vllm: {{'{flag}': 1}}\n"
    mine = [p for p in _problems(tmp_path, text) if f"unknown key '{flag}'" in p]
    setting = FLAG_KEYS[flag].removeprefix("vllm.")
    assert len(mine) == 1 and f"(did you mean '{setting}'?" in mine[0], mine


@pytest.mark.parametrize("written", ["max_model_len", "--max-model-len", "Max-Model-Len"])
def test_a_context_length_under_vllm_says_it_belongs_to_the_model(tmp_path, written):
    text = HEAD + f"models:\n  a:\n    source: {{repo: org/a}}\n    context_length: 4096\n    vllm: {{{written}: 8}}\n"
    (found,) = [p for p in _problems(tmp_path, text) if "unknown key" in p]
    assert found.startswith(f"F:7:12: models.a.vllm.{written}: unknown key '{written}' (did you mean 'context_length'")
    assert "at the model's level, not under 'vllm'" in found


def test_an_sglang_model_is_told_its_own_block_and_never_vllm_s(tmp_path):
    text = (
        HEAD
        + "engines: {sglang: {image_tag: v0.5.6-cu129}}\nmodels:\n  s:\n    source: {repo: org/s}\n    engine: sglang\n"
        "    context_length: 4096\n    gpu_memory_utilization: 0.5\n    max_model_len: 8\n    tool_call_parser: hermes\n"
    )
    found = _problems(tmp_path, text)
    assert any(
        "'gpu_memory_utilization' (did you mean 'sglang.gpu_memory_utilization'? the model runs on sglang)" in p
        for p in found
    )
    assert any("'max_model_len' (did you mean 'context_length'?" in p for p in found)
    parser = next(p for p in found if "unknown key 'tool_call_parser'" in p)
    assert "vllm." not in parser  # SGLang has no such setting: the ordinary list of keys


def test_other_misspellings_keep_the_ordinary_hint(tmp_path):
    text = HEAD + "models:\n  a:\n    source: {repo: org/a}\n    context_lenght: 4096\n"
    assert any("unknown key 'context_lenght' (did you mean 'context_length'?)" in p for p in _problems(tmp_path, text))


def test_the_table_names_the_flags_aigo_apply_writes_itself():
    assert OTHER_FLAGS["--served-model-name"] == "" and OTHER_FLAGS["--uds"] == ""
    assert FLAG_KEYS["--max-model-len"] == "context_length"
    assert FLAG_KEYS["--gpu-memory-utilization"] == "vllm.gpu_memory_utilization"
    assert FLAG_KEYS["--tool-call-parser"] == "vllm.tool_call_parser"
