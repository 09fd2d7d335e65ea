"""`file` in a source names one GGUF file of a model repo, for llama.cpp: only a model's own source may
carry it. Every other place that takes a source (a LoRA adapter's, a vLLM speculative draft's) is a
whole checkpoint, so `file` there is refused at its line, in every vLLM release the file can name,
instead of validating and being dropped from the command line."""

from __future__ import annotations

import pytest

from aigo_apply.config.vllm_facts import known_releases
from aigo_apply.errors import ConfigInvalid
from aigo_apply.observe.config_file import load_config
from aigo_apply.resources import schema_data

from helpers.configs import write_config

HEAD = "version: 1\nproject: lab\n{engines}models:\n  m:\n    source: {{repo: org/m}}\n    context_length: 4096\n"
# each place, other than a model's own source, that takes a source: the entry that puts one there
PLACES = {
    "adapter": ("    adapters:\n      sql:\n        source: {src}\n", "models.m.adapters.sql.source", "an adapter's"),
    "draft": (
        "    vllm:\n      speculative: {{method: draft_model, num_speculative_tokens: 3, draft: {src}}}\n",
        "models.m.vllm.speculative.draft",
        "a draft's",
    ),
}


def _text(place: str, src: str, release: str) -> str:
    engines = "" if release == "0.31.0" else f"engines:\n  vllm: {{image_tag: v{release}}}\n"
    return HEAD.format(engines=engines) + PLACES[place][0].format(src=src)


def _problems(tmp_path, text: str) -> list[str]:
    path = write_config(tmp_path, text)
    with pytest.raises(ConfigInvalid) as info:
        load_config(str(path))
    return [p.format().replace(str(path), "F") for p in info.value.problems]


def test_every_place_that_takes_a_source_is_one_of_those_tested():
    """A new place that takes a source must say here whether `file` means anything there."""
    found = []

    def walk(node, path):
        if isinstance(node, dict):
            if node.get("$ref") == "#/$defs/source":
                found.append(path)
            for key, value in node.items():
                walk(value, (*path, key))
        elif isinstance(node, list):
            for value in node:
                walk(value, path)

    walk(schema_data("aigo.schema.json"), ())
    model = ("$defs", "model", "properties", "source")
    others = {p[1] if p[1] != "vllmSettings" else "draft" for p in found if p != model}
    assert model in found and others == set(PLACES), found


@pytest.mark.parametrize("release", known_releases())
@pytest.mark.parametrize("place", sorted(PLACES))
def test_a_file_in_an_adapter_or_a_draft_is_refused_at_its_line(tmp_path, place, release):
    text = _text(place, "{repo: org/x, file: x.gguf}", release)
    found = _problems(tmp_path, text)
    where, whose = PLACES[place][1], PLACES[place][2]
    assert len(found) == 1, found
    assert f": {where}: {whose} source is {{repo, revision}} or {{path}}: `file` names one GGUF file" in found[0]
    assert found[0].startswith(f"F:{text.count(chr(10))}:"), found  # the source's own line, the last


@pytest.mark.parametrize("release", known_releases())
@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("src", ["{repo: org/x}", "{repo: org/x, revision: 1a2b3c4}", "{path: /srv/x}"])
def test_a_repo_or_a_folder_there_still_validates(tmp_path, place, release, src):
    path = write_config(tmp_path, _text(place, src, release))
    assert load_config(str(path)).data["models"]["m"]


def test_a_model_s_own_source_keeps_its_gguf_file(tmp_path):
    text = "version: 1\nproject: lab\nengines:\n  llama.cpp: {image_tag: server-cuda}\nmodels:\n  m:\n"
    text += "    source: {repo: org/m-GGUF, file: m-Q4_K_M.gguf}\n"
    path = write_config(tmp_path, text + "    context_length: 4096\n")
    assert load_config(str(path)).data["models"]["m"]["source"]["file"] == "m-Q4_K_M.gguf"
