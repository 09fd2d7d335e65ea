"""A vLLM model's LoRA adapters in its spec and container: --enable-lora, one --lora-modules holding
every adapter as NAME=/adapters/NAME (vLLM 0.31.0 keeps only the last --lora-modules it is given),
--max-loras and --max-lora-rank with their defaults, each adapter mounted read-only from the model
store or its local folder; checked again where the command line is made."""

from __future__ import annotations

from pathlib import Path

import pytest

from aigo_apply.desired.adapters import lora_settings, rank_choice
from aigo_apply.desired.build import build_desired
from aigo_apply.desired.engines import render
from aigo_apply.desired.types import AdapterFiles, AdapterRoute, Mount
from aigo_apply.errors import UnsafeSetting
from aigo_apply.observe.config_file import load_config

from helpers.configs import host_context, write_config

CONFIG = """
version: 1
project: lab
models:
  base:
    source: {{repo: org/base}}
    context_length: 4096
    gpus: none
{vllm}    adapters:
      sql: {{source: {{repo: org/sql-lora, revision: 1a2b3c4}}}}
      local: {{source: {{path: ./local}}}}
  plain:
    source: {{repo: org/plain}}
    context_length: 4096
    gpus: none
"""


def build(tmp_path, vllm="", files=None):
    (tmp_path / "local").mkdir(exist_ok=True)
    config = load_config(str(write_config(tmp_path, CONFIG.format(vllm=vllm))))
    return build_desired(config, host_context(Path("/store")), files)


def files_for(tmp_path, sql=8, local=32):
    return {
        "/store/adapters/org--sql-lora/1a2b3c4": AdapterFiles(sql, ("q_proj", "v_proj"), "org/base"),
        str(tmp_path.resolve() / "local"): AdapterFiles(local, ("q_proj",), "org/base"),
    }


def test_the_command_line_names_every_adapter_under_one_lora_modules_flag(tmp_path):
    model = build(tmp_path, files=files_for(tmp_path)).models["base"]
    command = list(model.container.command)
    start = command.index("--enable-lora")
    assert command[start : start + 8] == [
        "--enable-lora",
        "--lora-modules",
        "local=/adapters/local",
        "sql=/adapters/sql",
        "--max-loras",
        "2",
        "--max-lora-rank",
        "32",
    ]
    assert command.count("--lora-modules") == 1
    assert command[start + 8 :] == ["--uds", "/run/aigo/engine.sock"]  # where it listens comes last


def test_each_adapter_is_mounted_read_only_from_the_store_or_its_folder(tmp_path):
    model = build(tmp_path, files=files_for(tmp_path)).models["base"]
    mounts = [m for m in model.container.mounts if m.target.startswith("/adapters/")]
    assert mounts == [
        Mount(str(tmp_path.resolve() / "local"), "/adapters/local", True),
        Mount("/store/adapters/org--sql-lora/1a2b3c4", "/adapters/sql", True),
    ]
    assert model.spec["adapters"] == {
        "local": {
            "source": {"path": str(tmp_path.resolve() / "local")},
            "adapter_dir": str(tmp_path.resolve() / "local"),
        },
        "sql": {
            "source": {"repo": "org/sql-lora", "revision": "1a2b3c4"},
            "adapter_dir": "/store/adapters/org--sql-lora/1a2b3c4",
        },
    }


def test_a_model_without_adapters_keeps_its_spec_and_command_line(tmp_path):
    desired = build(tmp_path, files=files_for(tmp_path))
    plain = desired.models["plain"]
    assert "adapters" not in plain.spec and "max_loras" not in plain.spec["vllm"]
    assert not any("lora" in word for word in plain.container.command)
    assert desired.router.settings.adapters == (AdapterRoute("local", "base"), AdapterRoute("sql", "base"))


@pytest.mark.parametrize(
    ("ranks", "expected"),
    [((8, 32), 32), ((8, 24), 32), ((4, 1), 8), ((1, 1), 1), ((None, 8), 16), ((None, 64), 64), ((600, 8), 512)],
)
def test_max_lora_rank_defaults_to_the_largest_declared_rank_rounded_up_to_a_choice(tmp_path, ranks, expected):
    model = build(tmp_path, files=files_for(tmp_path, *ranks)).models["base"]
    assert model.spec["vllm"]["max_lora_rank"] == expected
    assert model.spec["vllm"]["max_loras"] == 2
    note = next(n for n in model.notes if n.startswith("max_lora_rank"))
    assert ("is not known" in note) == (None in ranks)


def test_without_the_adapters_files_the_rank_is_vllm_s_default_and_the_plan_says_so(tmp_path):
    model = build(tmp_path).models["base"]
    assert model.spec["vllm"]["max_lora_rank"] == 16
    assert any("the rank of adapter local, sql is not known" in n for n in model.notes)


def test_written_settings_win_and_add_no_note(tmp_path):
    model = build(tmp_path, "    vllm: {max_loras: 1, max_lora_rank: 128}\n", files_for(tmp_path)).models["base"]
    assert (model.spec["vllm"]["max_loras"], model.spec["vllm"]["max_lora_rank"]) == (1, 128)
    assert not any(n.startswith("max_lora_rank") for n in model.notes)
    assert model.container.command[model.container.command.index("--max-lora-rank") + 1] == "128"


def test_rank_choices_are_vllm_s():
    assert [rank_choice(r) for r in (1, 2, 8, 9, 300, 320, 321, 512, 513)] == [1, 8, 8, 16, 320, 320, 512, 512, None]
    settings, notes = lora_settings({}, {"a": {"adapter_dir": "/x"}}, {"/x": AdapterFiles(rank=16)})
    assert settings == {"max_lora_rank": 16, "max_loras": 1}
    assert notes == ("max_lora_rank 16: the largest rank the adapters declare is 16",)


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda s: s["adapters"].update({"a=b": {"adapter_dir": "/x"}}), "refusing the adapter name 'a=b'"),
        (lambda s: s["adapters"].update({"x,y": {"adapter_dir": "/x"}}), "refusing the adapter name 'x,y'"),
        (lambda s: s["vllm"].update(max_lora_rank=24), "vllm.max_lora_rank 24 is not a choice"),
        (lambda s: s["vllm"].update(max_lora_rank=True), "vllm.max_lora_rank True is not a choice"),
        (lambda s: s["vllm"].update(max_loras=0), "vllm.max_loras 0 is not 1-64"),
        (lambda s: s["vllm"].pop("max_loras"), "vllm.max_loras None is not 1-64"),
    ],
)
def test_a_hand_edited_spec_cannot_put_an_unchecked_adapter_on_the_command_line(tmp_path, edit, words):
    spec = build(tmp_path, files=files_for(tmp_path)).models["base"].spec
    spec = {**spec, "vllm": dict(spec["vllm"]), "adapters": {k: dict(v) for k, v in spec["adapters"].items()}}
    edit(spec)
    with pytest.raises(UnsafeSetting, match=words):
        render("lab", "base", spec)
