"""export -> import round-trips a model minus its host-dependent settings; --write only writes a
file that still validates and never replaces an existing alias."""

from __future__ import annotations

import pytest
import yaml

from aigo_apply.config.engine_kinds import VLLM
from aigo_apply.edit.portable import HOST_FIELDS
from aigo_apply.observe.config_file import load_config

from helpers.cli import run_cli
from helpers.configs import write_config
from helpers.paths import EXAMPLES


def test_export_then_import_round_trips_minus_host_fields(tmp_path):
    exported = tmp_path / "n.baimodel"
    result = run_cli("export", "nemotron-30b", "-f", str(EXAMPLES / "dgx-spark-nemotron.yaml"), "--out", str(exported))
    assert result.returncode == 0, result.stderr
    original = load_config(str(EXAMPLES / "dgx-spark-nemotron.yaml")).data["models"]["nemotron-30b"]
    target = write_config(tmp_path, "version: 1\nproject: other\nrouter: {port: 9000}\n\nmodels: {}\n")
    added = run_cli("import", str(exported), "-f", str(target), "--write")
    assert added.returncode == 0, added.stderr
    imported = load_config(str(target)).data["models"]["nemotron-30b"]
    expected = {k: v for k, v in original.items() if k not in HOST_FIELDS}
    expected["vllm"] = {k: v for k, v in original["vllm"].items() if k not in VLLM.host_settings}
    assert imported == expected
    assert set(original["vllm"]) - set(imported["vllm"]) == {
        "gpu_memory_utilization",
        "tensor_parallel_size",
        "moe_backend",
        "mamba_backend",
    }
    assert "gpus" not in imported and "port" not in imported
    # printing instead of writing gives the same entry
    printed = yaml.safe_load(run_cli("import", str(exported)).stdout)
    assert printed == {"models": {"nemotron-30b": expected}}


def test_import_refuses_an_existing_alias_and_an_invalid_result(tmp_path):
    exported = tmp_path / "q.baimodel"
    run_cli("export", "qwen3-8b", "-f", str(EXAMPLES / "single-gpu.yaml"), "--out", str(exported))
    target = tmp_path / "aigo.yaml"
    target.write_text((EXAMPLES / "two-models-one-gpu.yaml").read_text())
    before = target.read_text()
    over = run_cli("import", str(exported), "-f", str(target), "--write")
    assert over.returncode == 1 and "GPU 0 would be over-committed" in over.stderr and "was not changed" in over.stderr
    assert target.read_text() == before
    renamed = run_cli("import", str(exported), "-f", str(target), "--write", "--as", "chat")
    assert renamed.returncode == 64 and "model 'chat' already exists" in renamed.stderr
    assert target.read_text() == before


def test_import_inserts_inside_the_models_block_when_other_sections_follow(tmp_path):
    exported = tmp_path / "q.baimodel"
    run_cli("export", "qwen3-8b", "-f", str(EXAMPLES / "single-gpu.yaml"), "--out", str(exported))
    target = write_config(
        tmp_path,
        "version: 1\nproject: p\nmodels:\n  a: {source: {path: /m}, context_length: 9, "
        "gpus: none}\n\nrouter: {port: 9001}\n",
    )
    assert run_cli("import", str(exported), "-f", str(target), "--write").returncode == 0
    data = load_config(str(target)).data
    assert list(data["models"]) == ["a", "qwen3-8b"] and data["router"] == {"port": 9001}
    assert target.read_text().rstrip().endswith("router: {port: 9001}")


def test_a_long_value_with_spaces_stays_on_one_line_and_imports_again(tmp_path):
    """PyYAML folds long plain scalars at 80 columns; the loader refuses values written over several
    lines, so an export must never fold one."""
    long = "a chat template note " * 8
    source = write_config(
        tmp_path,
        "version: 1\nproject: src\nmodels:\n  m:\n    source: {path: /srv/m}\n    context_length: 4096\n"
        f'    gpus: none\n    env: {{NOTE: "{long}"}}\n',
        name="src.yaml",
    )
    exported = tmp_path / "m.baimodel"
    assert run_cli("export", "m", "-f", str(source), "--out", str(exported)).returncode == 0
    target = write_config(tmp_path, "version: 1\nproject: other\nmodels: {}\n")
    added = run_cli("import", str(exported), "-f", str(target), "--write")
    assert added.returncode == 0, added.stderr
    assert load_config(str(target)).data["models"]["m"]["env"]["NOTE"] == long


def test_exporting_a_model_from_a_local_path_warns_that_it_is_not_portable(tmp_path):
    source = write_config(
        tmp_path,
        "version: 1\nproject: src\nmodels:\n  m:\n    source: {path: /srv/models/m}\n    context_length: 4096\n"
        "    gpus: none\n    vllm: {speculative: {method: eagle3, num_speculative_tokens: 3, draft: {path: /srv/d}}}\n"
        "  r: {source: {repo: org/r}, context_length: 4096, gpus: none}\n",
        name="src.yaml",
    )
    exported = tmp_path / "m.baimodel"
    result = run_cli("export", "m", "-f", str(source), "--out", str(exported))
    assert result.returncode == 0, result.stderr
    assert (
        "warning: model 'm': source.path is a local path (/srv/models/m), so this definition is not portable"
        in result.stderr
    )
    assert "warning: model 'm': vllm.speculative.draft.path is a local path (/srv/d)" in result.stderr
    assert "# Not portable: source.path is a folder or file on the machine it came from." in exported.read_text()
    from_hub = run_cli("export", "r", "-f", str(source))
    assert from_hub.returncode == 0 and from_hub.stderr == "" and "Not portable" not in from_hub.stdout


def test_import_drops_host_settings_of_a_hand_made_definition_with_a_note(tmp_path):
    definition = tmp_path / "h.baimodel"
    definition.write_text(
        "format: aigo-apply/model/1\nalias: h\nmodel:\n  source: {repo: org/h}\n  context_length: 4096\n"
        "  gpus: [3]\n  port: 9999\n  vllm: {gpu_memory_utilization: 0.95, tensor_parallel_size: 4, max_num_seqs: 8}\n"
    )
    target = write_config(tmp_path, "version: 1\nproject: other\nmodels: {}\n")
    result = run_cli("import", str(definition), "-f", str(target), "--write")
    assert result.returncode == 0, result.stderr
    assert (
        f"note: {definition} sets gpus, port, vllm.gpu_memory_utilization, vllm.tensor_parallel_size, which belong "
        "to each machine: left out" in result.stderr
    )
    assert load_config(str(target)).data["models"]["h"] == {
        "source": {"repo": "org/h"},
        "context_length": 4096,
        "vllm": {"max_num_seqs": 8},
    }
    printed = run_cli("import", str(definition))
    assert yaml.safe_load(printed.stdout)["models"]["h"]["vllm"] == {"max_num_seqs": 8} and "note:" in printed.stderr


def test_import_of_a_missing_definition_names_the_argument_not_the_config_option(tmp_path):
    missing = tmp_path / "nope.baimodel"
    result = run_cli("import", str(missing))
    assert result.returncode == 1
    assert f"{missing}: no such file" in result.stderr
    assert "the first argument of import" in result.stderr and "AIGO_FILE" not in result.stderr


def adapter_source(tmp_path):
    """A file whose model `base` serves a repo adapter and a local one (an existing folder)."""
    (tmp_path / "notes").mkdir()
    return write_config(
        tmp_path,
        "version: 1\nproject: src\nmodels:\n  base:\n    source: {repo: org/base}\n    context_length: 4096\n"
        "    gpus: [0]\n    vllm: {gpu_memory_utilization: 0.5, max_loras: 2, max_lora_rank: 64}\n"
        "    adapters:\n      sql: {source: {repo: org/sql-lora, revision: a1}}\n"
        f"      notes: {{source: {{path: {tmp_path / 'notes'}}}}}\n",
        name="src.yaml",
    )


def test_export_carries_adapters_and_warns_about_a_local_one(tmp_path):
    exported = tmp_path / "b.baimodel"
    result = run_cli("export", "base", "-f", str(adapter_source(tmp_path)), "--out", str(exported))
    assert result.returncode == 0, result.stderr
    notes = tmp_path / "notes"
    assert (
        f"warning: model 'base': adapters.notes.source.path is a local path ({notes}), so this definition is not "
        "portable" in result.stderr
    )
    assert "source.path is a local path" not in result.stderr.replace("adapters.notes.source.path", "")
    text = exported.read_text()
    assert "# Not portable: adapters.notes.source.path is a folder or file on the machine it came from." in text
    model = yaml.safe_load(text)["model"]
    assert model["adapters"] == {
        "sql": {"source": {"repo": "org/sql-lora", "revision": "a1"}},
        "notes": {"source": {"path": str(notes)}},
    }
    assert model["vllm"] == {"max_loras": 2, "max_lora_rank": 64}  # they size the engine: not host settings
    assert "gpus" not in model


def test_import_brings_the_adapters_back_into_a_file_that_validates(tmp_path):
    exported = tmp_path / "b.baimodel"
    run_cli("export", "base", "-f", str(adapter_source(tmp_path)), "--out", str(exported))
    target = write_config(
        tmp_path,
        "version: 1\nproject: other\nmodels:\n  chat: {source: {repo: org/chat}, context_length: 4096, gpus: none}\n",
    )
    result = run_cli("import", str(exported), "-f", str(target), "--write", "--as", "base2")
    assert result.returncode == 0, result.stderr
    assert f"note: adapters.notes.source.path is a local path ({tmp_path / 'notes'})" in result.stderr
    imported = load_config(str(target)).data["models"]["base2"]  # loads: the file validates
    assert set(imported["adapters"]) == {"sql", "notes"}
    assert imported["adapters"]["sql"] == {"source": {"repo": "org/sql-lora", "revision": "a1"}}
    assert imported["vllm"] == {"max_loras": 2, "max_lora_rank": 64}


@pytest.mark.parametrize(
    ("models", "alias", "says"),
    [
        (
            "  sql: {source: {repo: org/x}, context_length: 4096}\n",
            "base",
            "its adapter 'sql' has the alias of model 'sql'",
        ),
        (
            "  x:\n    source: {repo: org/x}\n    context_length: 4096\n    adapters: {Notes: {source: {repo: org/n}}}\n",
            "base",
            "its adapter 'notes' has the alias of adapter 'Notes' of model 'x'",
        ),
        (
            "  x:\n    source: {repo: org/x}\n    context_length: 4096\n    adapters: {b2: {source: {repo: org/n}}}\n",
            "b2",
            "the alias 'b2' is taken by adapter 'b2' of model 'x' there; import it --as another alias",
        ),
    ],
)
def test_import_refuses_an_adapter_alias_the_file_already_has_and_writes_nothing(tmp_path, models, alias, says):
    exported = tmp_path / "b.baimodel"
    run_cli("export", "base", "-f", str(adapter_source(tmp_path)), "--out", str(exported))
    target = write_config(tmp_path, "version: 1\nproject: other\nmodels:\n" + models)
    before = target.read_text()
    result = run_cli("import", str(exported), "-f", str(target), "--write", "--as", alias)
    assert result.returncode == 64, result.stderr
    assert f"model '{alias}' cannot be added to {target}: {says}" in result.stderr
    assert target.read_text() == before


def test_export_and_import_write_number_shaped_texts_as_texts_in_every_yaml_reader(tmp_path):
    """An alias, a revision and env values that YAML 1.2 (an editor, kubectl) or YAML 1.1's types read
    as numbers or bools come out quoted in the exported file and in import's printout."""
    from helpers.yaml_readers import read_alike

    source = write_config(
        tmp_path,
        'version: 1\nproject: lab\nmodels:\n  1e3:\n    source: {repo: a/b, revision: "0o17"}\n'
        '    context_length: 64\n    env: {A: "-.5e3", B: "y", C: "08", D: "1.2.3"}\n',
    )
    exported = tmp_path / "m.baimodel"
    assert run_cli("export", "1e3", "-f", str(source), "--out", str(exported)).returncode == 0
    printed = run_cli("import", str(exported))
    assert printed.returncode == 0, printed.stderr
    for text in (exported.read_text(), printed.stdout):
        assert read_alike(text) == [], text
    model = yaml.safe_load(printed.stdout)["models"]["1e3"]
    assert model["source"]["revision"] == "0o17" and model["env"] == {"A": "-.5e3", "B": "y", "C": "08", "D": "1.2.3"}
