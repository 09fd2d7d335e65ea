"""`adapters:` under a model: validation errors at their path and line, an alias unique across every
model and adapter of the file (a clash names both places), vLLM only, and the adapter settings only
with adapters."""

from __future__ import annotations

import pytest

from aigo_apply.errors import ConfigInvalid
from aigo_apply.observe.config_file import load_config

from helpers.configs import write_config


def problems(tmp_path, text):
    path = write_config(tmp_path, text)
    with pytest.raises(ConfigInvalid) as info:
        load_config(str(path))
    return [p.format().replace(str(path), "F") for p in info.value.problems]


def test_a_valid_file_with_adapters_loads(tmp_path):
    (tmp_path / "sql").mkdir()
    path = write_config(
        tmp_path,
        """
        version: 1
        project: lab
        models:
          base:
            source: {repo: org/base}
            context_length: 4096
            vllm: {max_loras: 1, max_lora_rank: 64}
            adapters:
              sql-helper: {source: {repo: org/sql-lora, revision: 1a2b3c4}}
              local: {source: {path: ./sql}}
        """,
    )
    assert set(load_config(str(path)).data["models"]["base"]["adapters"]) == {"sql-helper", "local"}


def test_an_adapter_alias_that_is_a_model_s_is_refused_naming_both_places(tmp_path):
    found = problems(
        tmp_path,
        """
        version: 1
        project: lab
        models:
          base:
            source: {repo: org/base}
            context_length: 4096
            adapters:
              other: {source: {repo: org/a}}
              Base: {source: {repo: org/b}}
          other:
            source: {repo: org/other}
            context_length: 4096
            gpus: none
        """,
    )
    assert found == [
        "F:8:7: models.base.adapters.other: adapter 'other' is also the alias of the model at models.other; "
        "clients send either as `model`, so every model and adapter needs a name of its own: rename one",
        "F:9:7: models.base.adapters.Base: adapter 'Base' differs only in case from 'base', the alias of the "
        "model at models.base; clients send either as `model`, so every model and adapter needs a name of its "
        "own: rename one",
    ]


def test_two_models_adapters_with_one_alias_are_refused_at_the_second(tmp_path):
    found = problems(
        tmp_path,
        """
        version: 1
        project: lab
        models:
          a:
            source: {repo: org/a}
            context_length: 4096
            gpus: [0]
            adapters: {sql: {source: {repo: org/sql-a}}}
          b:
            source: {repo: org/b}
            context_length: 4096
            gpus: [1]
            adapters: {sql: {source: {repo: org/sql-b}}}
        """,
    )
    assert found == [
        "F:13:16: models.b.adapters.sql: adapter 'sql' is also the alias of the adapter at models.a.adapters.sql; "
        "clients send either as `model`, so every model and adapter needs a name of its own: rename one"
    ]


def test_unsafe_names_sources_and_ranks_are_refused_at_their_lines(tmp_path):
    found = problems(
        tmp_path,
        """
        version: 1
        project: lab
        models:
          base:
            source: {repo: org/base}
            context_length: 4096
            vllm: {max_lora_rank: 24, max_loras: 0}
            adapters:
              "a=b": {source: {repo: org/a}}
              gguf: {source: {repo: org/a, file: x.gguf}}
              none: {}
        """,
    )
    assert found == [
        "F:7:27: models.base.vllm.max_lora_rank: 24 is not one of 1, 8, 16, 32, 64, 128, 256, 320, 512",
        "F:7:42: models.base.vllm.max_loras: must be at least 1, not 0",
        "F:9:7: models.base.adapters.\"a=b\": adapter alias 'a=b' is not a safe name: use 1-64 letters, digits, "
        "'.', '_' or '-', starting with a letter or digit (clients send it as `model`)",
        "F:10:22: models.base.adapters.gguf.source: an adapter's source is {repo, revision} or {path}: `file` "
        "names one GGUF file of a model repo (got a mapping)",
        "F:11:7: models.base.adapters.none: missing required key 'source'",
    ]


@pytest.mark.parametrize(
    ("engine", "source", "words"),
    [
        ("sglang", "{repo: org/base}", "its OpenAI API serves an adapter only to a request whose model is 'BASE:NAME'"),
        ("llama.cpp", "{repo: org/base-GGUF, file: base.gguf}", "llama-server takes GGUF LoRA files (--lora)"),
    ],
)
def test_other_engines_refuse_adapters_with_the_reason(tmp_path, engine, source, words):
    found = problems(
        tmp_path,
        f"""
        version: 1
        project: lab
        engines: {{sglang: {{image_tag: v0.5.6}}, llama.cpp: {{image_tag: server}}}}
        models:
          base:
            engine: {engine}
            source: {source}
            context_length: 4096
            adapters: {{sql: {{source: {{repo: org/sql}}}}}}
        """,
    )
    assert len(found) == 1 and found[0].startswith("F:9:5: models.base.adapters: ") and words in found[0]


def test_adapter_settings_without_adapters_are_refused(tmp_path):
    found = problems(
        tmp_path,
        """
        version: 1
        project: lab
        models:
          base:
            source: {repo: org/base}
            context_length: 4096
            vllm: {max_loras: 2}
        """,
    )
    assert found == [
        "F:7:12: models.base.vllm.max_loras: max_loras sizes the engine's room for LoRA adapters, and this model "
        "has none; add adapters: or remove it"
    ]


def test_a_cluster_file_serves_adapters_and_holds_a_local_one_to_the_node_local_rules(tmp_path):
    text = """
        version: 1
        project: lab
        platform: kubernetes
        models:
          base:
            source: {repo: org/base}
            context_length: 4096
            adapters: {sql: {source: {repo: org/sql}}}
        """
    assert set(load_config(str(write_config(tmp_path, text))).data["models"]["base"]["adapters"]) == {"sql"}
    (tmp_path / "notes").mkdir()
    found = problems(tmp_path, text.replace("{sql: {source: {repo: org/sql}}}", "{notes: {source: {path: ./notes}}}"))
    assert len(found) == 1 and found[0].startswith(
        "F:8:39: models.base.adapters.notes.source.path: a local path is a "
    ), found


def test_a_local_adapter_path_follows_the_mount_rules(tmp_path):
    found = problems(
        tmp_path,
        """
        version: 1
        project: lab
        models:
          base:
            source: {repo: org/base}
            context_length: 4096
            adapters: {etc: {source: {path: /etc}}}
        """,
    )
    assert len(found) == 1 and found[0].startswith("F:7:37: models.base.adapters.etc.source.path: '/etc' is "), found


def test_an_on_demand_model_refuses_adapters_until_the_router_wakes_it_for_them(tmp_path):
    found = problems(
        tmp_path,
        """
        version: 1
        project: lab
        models:
          base:
            source: {repo: org/base}
            context_length: 4096
            on_demand: true
            adapters: {sql: {source: {repo: org/sql}}}
        """,
    )
    assert found == [
        "F:8:5: models.base.adapters: an on-demand model cannot serve adapters yet: the router wakes a sleeping "
        "engine for its model's own alias only, so a request naming an adapter would reach it asleep; remove "
        "on_demand/swap_group or adapters"
    ]
