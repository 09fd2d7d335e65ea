"""The `vllm serve` command lines aigo-apply renders for `image_tag: v0.34.0`, checked by the real vLLM
0.34.0 (.venv-vllm-0.34.0, scripts/setup-vllm-overlay): its own parser and pre-load checks
(scripts/vllm_contract.py), as tests/contract/test_vllm_command_lines.py does for 0.31.0. Every vLLM model
of every config with a golden file (each example, every-vllm-setting.yaml) is rendered again with that tag,
with a swap group's two on-demand models beside them, and must be accepted, with the memory budget and
each boolean read as written (0.34.0 takes all of the GPU's memory when --gpu-memory-utilization is unset,
and spells the negative booleans --disable-*, keeping --no-enable-* as hidden aliases); each kind of value
the schema refuses with that tag is refused by 0.34.0 too, unless the 0.31.0 table says we are stricter on
purpose. One vLLM start checks every line here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from test_vllm_command_lines import EVERY_SETTING, REFUSALS, config_of, config_text, rendered, with_flags

from aigo_apply.config.engine_choice import engine_of
from aigo_apply.errors import ConfigInvalid
from aigo_apply.observe.config_file import load_config

from helpers.paths import GOLDEN
from helpers.retag import write_retagged

TAG = "v0.34.0"
RELEASE = "0.34.0"
ENGINES = f"engines: {{vllm: {{image_tag: {TAG}}}}}\n"
# No golden config has an on-demand model: these two add the sleep-mode line (--enable-sleep-mode, with
# which 0.34.0 registers its /checkpoint/* routes).
SWAP_GROUP = """\
version: 1
project: contract
models:
  coder: {source: {repo: Qwen/Qwen3-8B}, context_length: 8192, gpus: [0], swap_group: g, vllm: {gpu_memory_utilization: 0.8}}
  chat: {source: {repo: Qwen/Qwen3-4B}, context_length: 8192, gpus: [0], swap_group: g}
"""


def vllm_configs() -> list[Path]:
    """The configs of the golden files that have a vLLM model."""
    found = []
    for golden in sorted(GOLDEN.glob("*.json")):
        data = yaml.safe_load(config_of(golden).read_text())
        if any(engine_of(m, data.get("defaults")) == "vllm" for m in data["models"].values()):
            found.append(config_of(golden))
    return found


@pytest.fixture(scope="module")
def lines(tmp_path_factory) -> dict[str, list[str]]:
    """case id -> the `vllm serve` arguments aigo-apply renders with the v0.34.0 tag."""
    out = {}
    for config in vllm_configs():
        path = write_retagged(config, TAG, tmp_path_factory.mktemp(config.stem) / "aigo.yaml")
        data = yaml.safe_load(path.read_text())
        for alias, command in rendered(path).items():
            if engine_of(data["models"][alias], data.get("defaults")) == "vllm":
                out[f"{config.stem}:{alias}"] = command
    swap = tmp_path_factory.mktemp("swap-group") / "aigo.yaml"
    swap.write_text(SWAP_GROUP + ENGINES)
    out |= {f"swap-group:{alias}": command for alias, command in rendered(swap).items()}
    return out


@pytest.fixture(scope="module")
def base_command(tmp_path_factory) -> list[str]:
    path = tmp_path_factory.mktemp("base") / "aigo.yaml"
    path.write_text(config_text(None) + ENGINES)
    return rendered(path)["m"]


@pytest.fixture(scope="module")
def verdicts(vllm034_verdicts, lines, base_command) -> dict[str, dict]:
    """vLLM 0.34.0's verdict on every command line of this module, from one start, by case id."""
    cases = dict(lines)
    cases["(refusal base)"] = base_command
    cases |= {r.case: with_flags(base_command, r.flags) for r in REFUSALS}
    return dict(zip(cases, vllm034_verdicts(list(cases.values())), strict=True))


def test_every_config_with_a_vllm_model_is_rendered(lines):
    assert {case.split(":")[0] for case in lines} >= {"every-vllm-setting", "single-gpu", "two-models-one-gpu"}
    assert any(case.startswith(f"{EVERY_SETTING.stem}:") for case in lines)


def test_vllm_034_accepts_every_rendered_command_line(lines, verdicts):
    refused = {case: f"{v['stage']}: {v['error']}" for case in lines if not (v := verdicts[case])["accepted"]}
    assert not refused, f"vLLM {RELEASE} refuses: {json.dumps(refused, indent=1)}"


def test_vllm_034_reads_the_memory_budget_and_every_boolean_as_written(lines, verdicts):
    """The fraction arrives as itself (never None: unset, 0.34.0 takes all free memory), and each
    `--x` is true and `--no-x` false (0.34.0 lists `--disable-*`; `--no-enable-*` stays accepted)."""
    for case, command in lines.items():
        parsed = verdicts[case]["parsed"]
        budget = command[command.index("--gpu-memory-utilization") + 1]
        assert parsed["--gpu-memory-utilization"] == float(budget), case
        for option in command:
            if option in (
                "--enable-prefix-caching",
                "--trust-remote-code",
                "--enforce-eager",
                "--enable-lora",
                "--enable-sleep-mode",
            ):
                assert parsed[option] is True, (case, option)
            if option.startswith("--no-"):
                assert parsed[option] is False, (case, option)
    every = [c for case, c in lines.items() if case.startswith(f"{EVERY_SETTING.stem}:")]
    assert "--no-enable-prefix-caching" in [o for c in every for o in c]  # the hidden alias is exercised


def test_vllm_034_takes_the_on_demand_models_sleep_mode(lines, verdicts):
    for case in ("swap-group:coder", "swap-group:chat"):
        assert "--enable-sleep-mode" in lines[case]
        assert verdicts[case]["parsed"]["--enable-sleep-mode"] is True, verdicts[case]


def test_vllm_034_parses_every_adapter_of_the_rendered_line(lines, verdicts):
    assert verdicts[f"{EVERY_SETTING.stem}:lora"]["lora_modules"] == [
        ["local.v2", "/adapters/local.v2"],
        ["sql-helper", "/adapters/sql-helper"],
    ]


def test_vllm_034_reads_every_start_setting_as_written(verdicts):
    parsed = {alias: verdicts[f"{EVERY_SETTING.stem}:{alias}"]["parsed"] for alias in ("drafted", "mtp", "plain")}
    assert parsed["mtp"]["--optimization-level"] == "1" and parsed["mtp"]["--cudagraph-capture-sizes"] == [1, 2, 4, 8]
    assert parsed["mtp"]["--max-cudagraph-capture-size"] == 8
    assert (
        parsed["plain"]["--load-format"] == "runai_streamer" and parsed["drafted"]["--load-format"] == "fastsafetensors"
    )


def test_vllm_034_accepts_the_refusals_base(verdicts):
    assert verdicts["(refusal base)"]["accepted"], verdicts["(refusal base)"]


@pytest.mark.parametrize("refusal", REFUSALS, ids=[r.case for r in REFUSALS])
def test_schema_refusal_with_the_034_tag_is_vllms_or_documented_as_stricter(refusal, verdicts, tmp_path):
    path = tmp_path / "aigo.yaml"
    path.write_text(config_text(refusal) + ENGINES)
    with pytest.raises(ConfigInvalid):
        load_config(str(path))
    verdict = verdicts[refusal.case]
    if refusal.stricter is None:
        assert not verdict["accepted"], f"vLLM {RELEASE} accepts {refusal.flags}; we refuse it without saying why"
    else:
        assert verdict["accepted"], f"vLLM {RELEASE} refuses {refusal.flags} too: {verdict['error']}"
