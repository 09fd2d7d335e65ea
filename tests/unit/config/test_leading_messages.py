"""Messages that lead to the fix, through validate's real entry (cli/main.py's boundary, as a user
runs it): what users bring from other tools (`gpus: 0` as CUDA_VISIBLE_DEVICES says it, `source:
Qwen/Qwen3-8B` as `vllm serve` takes it, a free-form `extra_args:` or `command:` as charts and compose
take one), a tab in the indentation, and no config file at all (a wheel has no examples/ folder:
`init` writes one)."""

from __future__ import annotations

import json

import pytest

from aigo_apply.cli.main import main

from helpers.configs import write_config

GOOD = """version: 1
project: lab
models:
  qwen:
    source: {repo: Qwen/Qwen3-8B}
    context_length: 32768
"""


def _validate(capsys, *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(["validate", *args])
    out = capsys.readouterr()
    return done.value.code, out.out + out.err


def _problem(tmp_path, capsys, text: str) -> str:
    code, said = _validate(capsys, "-f", str(write_config(tmp_path, text)))
    assert code == 1, said
    return said


@pytest.mark.parametrize(
    ("written", "got", "listed", "which"),
    [
        ("0", "0", "[0]", "GPU 0"),
        ("1", "1", "[1]", "GPU 1"),
        ('"0"', "'0'", "[0]", "GPU 0"),
        ("'3'", "'3'", "[3]", "GPU 3"),
        ('"0,1"', "'0,1'", "[0, 1]", "GPUs 0 and 1"),
        ('"0, 1, 2"', "'0, 1, 2'", "[0, 1, 2]", "GPUs 0, 1 and 2"),
        ('"1 3"', "'1 3'", "[1, 3]", "GPUs 1 and 3"),
        ('"[0,1]"', "'[0,1]'", "[0, 1]", "GPUs 0 and 1"),
    ],
)
def test_gpus_written_as_an_index_or_a_device_list_gets_the_list(tmp_path, capsys, written, got, listed, which):
    said = _problem(tmp_path, capsys, GOOD + f"    gpus: {written}\n")
    assert f"models.qwen.gpus: must be 'all', 'none' or a list of GPU indices (got {got}): " in said
    assert f"write gpus: {listed} for {which}, or gpus: all / none" in said
    assert "quote it" not in said


@pytest.mark.parametrize(("written", "word"), [("ALL", "all"), ("All", "all"), ('" none"', "none"), ("None", "none")])
def test_gpus_all_or_none_in_another_case_gets_the_word(tmp_path, capsys, written, word):
    said = _problem(tmp_path, capsys, GOOD + f"    gpus: {written}\n")
    assert f"models.qwen.gpus: is written '{written.strip(chr(34))}': write gpus: {word}" in said


def test_the_gpus_fix_is_given_only_where_a_list_or_word_was_meant(tmp_path, capsys):
    for written in ("-1", "[0, 0]", "true", "some", '"0-3"', "1.5"):
        said = _problem(tmp_path, capsys, GOOD + f"    gpus: {written}\n")
        assert "must be 'all', 'none' or a list of distinct GPU indices such as [0, 1]" in said
        assert "write gpus:" not in said
    assert "write gpus: [2] for GPU 2" in _problem(tmp_path, capsys, GOOD + "    gpus: 2\n")


SOURCES = [
    ("Qwen/Qwen3-8B", "{repo: Qwen/Qwen3-8B} for a Hugging Face repo"),
    ("meta-llama/Llama-3.1-8B-Instruct", "{repo: meta-llama/Llama-3.1-8B-Instruct} for a Hugging Face repo"),
    ("https://huggingface.co/Qwen/Qwen3-8B", "{repo: Qwen/Qwen3-8B} for a Hugging Face repo"),
    ("hf://Qwen/Qwen3-8B", "{repo: Qwen/Qwen3-8B} for a Hugging Face repo"),
    ("/srv/models/qwen3", "{path: /srv/models/qwen3} for a folder on this host"),
    ("./models/qwen3", "{path: ./models/qwen3} for a folder on this host"),
    ("~/models/qwen3", "{path: ~/models/qwen3} for a folder on this host"),
    ("Qwen3-8B", "{repo: ORG/NAME} for a Hugging Face repo, or {path: /folder} for a folder on this host"),
]


@pytest.mark.parametrize(("written", "fix"), SOURCES)
def test_a_source_written_as_text_gets_the_mapping(tmp_path, capsys, written, fix):
    text = GOOD.replace("source: {repo: Qwen/Qwen3-8B}", f"source: {written}")
    said = _problem(tmp_path, capsys, text)
    assert f"models.qwen.source: takes a mapping, not text (got '{written}'): write source: {fix}" in said
    assert "not both" not in said


@pytest.mark.parametrize(
    ("entry", "where"),
    [
        ("    adapters:\n      sql:\n        source: {text}\n", "models.qwen.adapters.sql.source"),
        (
            "    vllm:\n      speculative: {{method: eagle3, num_speculative_tokens: 3, draft: {text}}}\n",
            "models.qwen.vllm.speculative.draft",
        ),
    ],
)
def test_an_adapter_or_draft_source_written_as_text_gets_the_mapping(tmp_path, capsys, entry, where):
    said = _problem(tmp_path, capsys, GOOD + entry.format(text="org/adapter-x"))
    key = where.rsplit(".", 1)[1]
    assert f"{where}: takes a mapping, not text (got 'org/adapter-x'): write {key}: {{repo: org/adapter-x}}" in said


def test_a_source_mapping_keeps_its_sentence_and_only_text_gets_the_mapping(tmp_path, capsys):
    for written in ("{repo: a/b, path: /x}", "{revision: main}"):
        said = _problem(tmp_path, capsys, GOOD.replace("{repo: Qwen/Qwen3-8B}", written))
        assert "models.qwen.source: needs either `repo`" in said and "takes a mapping" not in said
    said = _problem(tmp_path, capsys, GOOD.replace("{repo: Qwen/Qwen3-8B}", "a/b"))
    assert "models.qwen.source: takes a mapping, not text" in said


FREE_FORM = [
    "extra_args",
    "args",
    "extra_flags",
    "flags",
    "command",
    "cli_args",
    "extraArgs",
    "engine-args",
    "cmd",
    "entrypoint",
    "arguments",
    "vllm_args",
    "extra_cli_args",
    "options",
    "--extra-args",
]


@pytest.mark.parametrize("key", FREE_FORM)
@pytest.mark.parametrize(
    ("block", "where", "allowed"),
    [
        ("    {key}: [--max-num-batched-tokens, '8192']\n", "models.qwen", "context_length"),
        ("    vllm:\n      {key}: --foo\n", "models.qwen.vllm", "tensor_parallel_size"),
        ("    engine: llama.cpp\n    llama.cpp:\n      {key}: --foo\n", 'models.qwen."llama.cpp"', "gpu_layers"),
        ("engines:\n  vllm:\n    {key}: --foo\n", "engines.vllm", "image_tag"),
        ("defaults:\n  {key}: --foo\n", "defaults", "gpu_memory_utilization"),
    ],
)
def test_free_form_flag_keys_are_refused_with_why_and_where_the_settings_are(
    tmp_path, capsys, key, block, where, allowed
):
    entry = block.format(key=key if key.isidentifier() else f'"{key}"')
    said = _problem(tmp_path, capsys, GOOD + entry)
    assert f"{where}.{key}: unknown key '{key}': aigo-apply passes an engine no free-form flags" in said
    assert "checked against the engine's release" in said and "a free-form field would bypass that" in said
    assert "allowed here: " in said and allowed in said.split("allowed here: ")[1]
    assert "docs/configuration.md" in said and "`aigo-apply schema`" in said


def test_other_unknown_keys_keep_their_did_you_mean_and_the_router_its_list(tmp_path, capsys):
    for key, hint in (("contextlength", "did you mean 'context_length'?"), ("gpu", "did you mean 'gpus'?")):
        said = _problem(tmp_path, capsys, GOOD + f"    {key}: 1\n")
        assert hint in said and "free-form" not in said
    said = _problem(tmp_path, capsys, GOOD + "router:\n  extra_args: [--foo]\n")
    assert "router.extra_args: unknown key 'extra_args'; allowed here:" in said and "free-form" not in said
    assert "no free-form flags" in _problem(tmp_path, capsys, GOOD + "    args: [--foo]\n")


def test_free_form_keys_in_json_output(tmp_path, capsys):
    path = write_config(tmp_path, GOOD + "    extra_args: [--enforce-eager]\n")
    with pytest.raises(SystemExit):
        main(["validate", "-f", str(path), "-o", "json"])
    problem = json.loads(capsys.readouterr().out)["problems"][0]
    assert problem["path"] == "models.qwen.extra_args" and "no free-form flags" in problem["message"]


TABS = [
    ("version: 1\nproject: lab\nmodels:\n\tqwen:\n    source: {repo: a/b}\n", 4, 1),
    (GOOD + "\tgpus: all\n", 7, 1),
    (GOOD + "  \tgpus: all\n", 7, 3),
    (GOOD + "\t  gpus: all\n", 7, 1),
    (GOOD.replace("{repo: Qwen/Qwen3-8B}", "\n      repo: a/b\n\t  revision: main"), 7, 1),
    (GOOD.replace("{repo: Qwen/Qwen3-8B}", "\n      repo: a/b\n      \trevision: main"), 7, 7),
]


@pytest.mark.parametrize(("text", "line", "column"), TABS)
def test_a_tab_in_the_indentation_says_so_with_its_line_and_column(tmp_path, capsys, text, line, column):
    said = _problem(tmp_path, capsys, text)
    expected = f"aigo.yaml:{line}:{column}: YAML does not allow tabs for indentation: line {line} column {column}"
    assert expected + "; indent with spaces" in said
    assert "cannot start any token" not in said


def test_a_tab_after_the_indentation_says_to_write_spaces(tmp_path, capsys):
    said = _problem(tmp_path, capsys, "version: 1\nproject: lab\nmodels:\n  - \tqwen\n")
    assert "a tab at line 4 column 5: YAML takes a tab here only inside quotes; write spaces instead" in said
    assert "cannot start any token" not in said


def test_no_config_file_says_init_writes_one(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AIGO_FILE", raising=False)
    code, said = _validate(capsys)
    assert code == 1
    assert said.strip() == (
        "error: aigo.yaml: no aigo.yaml here: `aigo-apply init` writes a starter file (or -f FILE / AIGO_FILE)"
    )
    code, said = _validate(capsys, "-f", "conf/lab.yaml")
    assert code == 1 and "conf/lab.yaml: no such file: `aigo-apply init -f FILE` writes a starter file there" in said
    (tmp_path / "aigo.yaml").write_text("# nothing yet\n")
    code, said = _validate(capsys)
    assert code == 1 and "`aigo-apply init -f FILE --force` writes a starter file in its place" in said
    assert "examples/" not in said
