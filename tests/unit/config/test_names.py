"""Names the tool derives never meet, and nothing YAML rewrites passes silently:
reserved container-name endings, keys YAML reads as numbers, booleans, dates or null ("quote it"),
numbers in forms YAML 1.1 reinterprets, and environment values kept exactly as written."""

from __future__ import annotations

import pytest

from aigo_apply.config import names
from aigo_apply.config.doc_path import dotted
from aigo_apply.desired.engines.common import container_name
from aigo_apply.desired.engines.router import router_container
from aigo_apply.errors import ConfigInvalid
from aigo_apply.observe.config_file import load_config
from aigo_apply.platforms.docker.model_steps import BACKUP_SUFFIX

MODEL = "{source: {path: /srv/models/m}, context_length: 4096, gpus: none}"


def problems(tmp_path, text: str) -> list[str]:
    path = tmp_path / "aigo.yaml"
    path.write_text(text)
    try:
        load_config(str(path))
    except ConfigInvalid as exc:
        return [p.format().replace(str(path), "F") for p in exc.problems]
    return []


def with_models(*aliases: str, project: str = "p") -> str:
    return f"version: 1\nproject: {project}\nmodels:\n" + "".join(f"  {a}: {MODEL}\n" for a in aliases)


def test_the_name_rule_knows_the_names_the_tool_really_gives():
    assert names.container_name("p", "m") == container_name("p", "m")
    spec = {"image": "haproxy:3.2", "config_dir": "/s", "sockets_dir": "/t", "bind": "127.0.0.1", "user": "1:1"}
    spec["logs"] = {"max_files": 5, "max_size": "50m"}
    assert router_container("p-x", spec).name == names.container_name("p", "x-" + names.ROUTER_WORD)
    assert names.BACKUP_SUFFIX == BACKUP_SUFFIX


@pytest.mark.parametrize(
    "alias, ending",
    [
        ("router", "-router"),  # this project's router
        ("x-router", "-router"),  # project p-x's router: aigo-p-x-router both
        ("Big-ROUTER", "-router"),
        ("m1-aigo-previous", "-aigo-previous"),  # the copy a replace of m1 keeps
        ("aigo-previous", "-aigo-previous"),
    ],
)
def test_an_alias_cannot_take_a_name_the_tool_keeps(tmp_path, alias, ending):
    found = problems(tmp_path, with_models("m1", alias))
    assert any(f"models.{alias}: alias '{alias}' would name its container" in p and f"'{ending}'" in p for p in found)


def test_a_project_cannot_end_so_that_an_alias_makes_a_kept_name(tmp_path):
    found = problems(tmp_path, with_models("previous", project="p-m1-aigo"))
    assert any("aigo-p-m1-aigo-previous" in p for p in found)


@pytest.mark.parametrize("alias", ["routers", "router-x", "my_router", "cache", "previous"])
def test_names_near_the_reserved_ones_stay_allowed(tmp_path, alias):
    assert not [p for p in problems(tmp_path, with_models(alias)) if "would name its container" in p]


@pytest.mark.parametrize(
    "key, read_as",
    [
        ("0x1A", "the number 26"),
        ("off", "the boolean false"),
        ("Yes", "the boolean true"),
        ("1.10", "the number 1.1"),
        ("2024-01-01", "a date"),
        ("~", "empty (null)"),
        ("null", "empty (null)"),
        ("017", "the number 15"),
    ],
)
def test_keys_yaml_reads_as_something_else_are_refused_with_quote_it(tmp_path, key, read_as):
    found = problems(tmp_path, with_models(key))
    quoted = '"' + key + '"'
    where = dotted(("models", key))
    assert any(f"F:4:3: {where}: YAML reads {key} as {read_as}" in p and f"quote it ({quoted})" in p for p in found)


def test_the_same_keys_quoted_are_names(tmp_path):
    text = with_models('"0x1A"', "'off'", '"1.10"')
    assert not [p for p in problems(tmp_path, text) if "YAML reads" in p]


def test_env_names_are_keys_too(tmp_path):
    text = with_models("m") + "    env: {on: 1}\n"
    text = text.replace(", gpus: none}\n    env: {on: 1}", ", gpus: none, env: {on: '1'}}")
    assert any("models.m.env.on: YAML reads on as the boolean true" in p for p in problems(tmp_path, text))


@pytest.mark.parametrize(
    "written",
    ["0123", "1.10", "off", "yes", "True", "2024-01-01", "1_000", "0x1A", "12:30", "8080", "1e3"],
)
def test_env_values_are_kept_exactly_as_written(tmp_path, written):
    path = tmp_path / "aigo.yaml"
    path.write_text(with_models("m").replace("gpus: none}", f"gpus: none, env: {{A: {written}}}}}"))
    assert load_config(str(path)).data["models"]["m"]["env"]["A"] == written


@pytest.mark.parametrize(
    "field, written, value",
    [
        ("port", "017000", "7680"),  # octal
        ("port", "0x4A38", "19000"),
        ("port", "19_100", "19100"),
        ("ready_timeout", "1:30", "90"),  # base 60
        ("context_length", "0b1000000000000", "4096"),
    ],
)
def test_numbers_yaml_reinterprets_are_refused(tmp_path, field, written, value):
    text = with_models("m").replace("gpus: none}", f"gpus: none, {field}: {written}}}")
    found = problems(tmp_path, text)
    assert any(f"models.m.{field}: YAML reads {written} as the number {value}" in p for p in found), found


@pytest.mark.parametrize(
    "line, expected",
    [
        ("project: 0123", "YAML reads 0123 as the number 83, not as the text written; write the number"),
        ("project: 123", 'YAML reads 123 as 123: quote it ("123") to mean the text'),
        ("project: off", 'YAML reads off as false (true/false): quote it ("off")'),
        ("project: 2024-01-01", 'YAML reads 2024-01-01 as a date; quote it ("2024-01-01")'),
    ],
)
def test_a_string_field_says_what_yaml_read(tmp_path, line, expected):
    text = with_models("m").replace("project: p", line)
    found = problems(tmp_path, text)
    assert any(expected in p for p in found), found


def test_unknown_tags_are_refused(tmp_path):
    text = with_models("m").replace("project: p", "project: !!binary cA==")
    assert any("the YAML tag !!binary is not used in aigo.yaml" in p for p in problems(tmp_path, text))
