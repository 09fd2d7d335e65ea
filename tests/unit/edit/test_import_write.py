"""`aigo-apply import DEF --write` keeps what it copies and what it adds to: the definition's env values
exactly as their text (`3.10` stays 3.10, `On` stays On, written in quotes YAML needs so that the file
reads them back as the same strings), every comment of the target file (the one on `models: {}  # ...`
too), and the file's line ends (CRLF stays CRLF)."""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from aigo_apply.edit.portable import add_to_file, read_definition
from aigo_apply.errors import AigoError
from aigo_apply.observe.config_file import load_config

from helpers.cli import run_cli

# Texts YAML 1.1 (PyYAML, the project's reader) or 1.2 (editors) reads as something else when plain.
RETYPED = [
    "3.10", "1.0", "On", "off", "Yes", "no", "y", "n", "true", "False", "0x10", "0o17",
    "08", "012", "1e3", "1_000", "+1", "-0", ".inf", "-.Inf", ".nan", "1:30", "190:20:30", "2024-01-01",
    "2001-12-14t21:59:43.10-05:00", "=", "<<",
]  # fmt: skip
PLAIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._+-]|:(?!\Z))*\Z")  # what a person writes without quotes

DEFINITION_HEAD = "format: aigo-apply/model/1\nalias: chat\nmodel:\n  source: {repo: org/m}\n  context_length: 4096\n"


def _plain(text: str) -> bool:
    return PLAIN.match(text) is not None and yaml.safe_load(text) is not None  # (`null` is no value at all)


def _definition(folder: Path, env: dict[str, str]) -> Path:
    """A hand-made definition: each env value plain where a person could write it so, else in JSON's
    double quotes (which YAML reads as the same text)."""
    lines = "".join(f"    {k}: {v if _plain(v) else json.dumps(v)}\n" for k, v in env.items())
    path = folder / "chat.baimodel"
    path.write_text(DEFINITION_HEAD + "  env:\n" + lines, encoding="utf-8")
    return path


def _import(folder: Path, target_text: str | bytes, env: dict[str, str]) -> tuple[bytes, dict]:
    target = folder / "aigo.yaml"
    target.write_bytes(target_text if isinstance(target_text, bytes) else target_text.encode())
    name, model, _ = read_definition(str(_definition(folder, env)), None, str(target))
    add_to_file(str(target), name, model)
    return target.read_bytes(), model


TARGET = "version: 1\nproject: lab\nmodels:\n  base:\n    source: {repo: org/base}\n    context_length: 4096\n    gpus: none\n"


@pytest.mark.parametrize("text", RETYPED)
def test_an_env_value_yaml_would_retype_is_imported_and_written_as_its_text(tmp_path, text):
    written, model = _import(tmp_path, TARGET, {"VALUE": text})
    assert model["env"] == {"VALUE": text}
    assert load_config(str(tmp_path / "aigo.yaml")).data["models"]["chat"]["env"] == {"VALUE": text}
    # quoted where YAML needs it: even a plain YAML reader, which has no rule for env values, reads the text
    assert yaml.safe_load(written)["models"]["chat"]["env"] == {"VALUE": text}


_TEXT = st.one_of(
    st.sampled_from(RETYPED),
    st.text(alphabet="0123456789.eExXoO+-_:abnNyYtTfF~ #'\"!&*%@", min_size=1, max_size=10).filter(
        lambda t: t == t.strip() and not t.startswith("#")
    ),
)


@settings(max_examples=60, deadline=None)
@given(env=st.dictionaries(st.sampled_from(["A", "B_X", "PY_VER", "FLAG"]), _TEXT, min_size=1, max_size=4))
def test_after_write_the_file_reads_back_exactly_the_imported_values(env):
    with tempfile.TemporaryDirectory() as folder:
        written, model = _import(Path(folder), TARGET, env)
        assert model["env"] == env  # the definition's values as their text
        data = load_config(str(Path(folder) / "aigo.yaml")).data
        assert data["models"]["chat"] == model  # and the file gives them back, every one the same
        assert written.startswith(TARGET.encode())  # what the file had is kept before the entry
        assert yaml.safe_load(written)["models"]["chat"]["env"] == env


COMMENTED = """\
# top of the file
version: 1   # the format
project: lab

models: {}   # my models go here, one per alias

# the router, below the models
router:
  port: 9000   # the endpoint
# end of file
"""

COMMENTED_BLOCK = """\
# top of the file
version: 1
project: lab
models:   # every model
  # the base model
  base:
    source: {repo: org/base}   # from the Hub
    context_length: 4096
    gpus: none
    # after base's settings

# heading the router
router:
  port: 9000
"""


def _comments(text: str) -> Counter[str]:
    return Counter(m.group(0) for m in re.finditer(r"#[^\r\n]*", text))


@pytest.mark.parametrize("original", [COMMENTED, COMMENTED_BLOCK], ids=["empty-models", "block-models"])
@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["LF", "CRLF"])
def test_every_comment_and_the_line_ends_of_the_file_are_kept(tmp_path, original, newline):
    written, model = _import(tmp_path, original.replace("\n", newline).encode(), {"PY": "3.10"})
    text = written.decode()
    assert _comments(text) == _comments(original)
    if newline == "\r\n":
        assert text.count("\n") == text.count("\r\n") and "\r\r" not in text  # every line ends CRLF
    else:
        assert "\r" not in text
    lines = text.split(newline)
    # the comment heading the router still heads it, and the entry sits inside models:
    heading = next(i for i, line in enumerate(lines) if line.startswith(("# heading", "# the router")))
    assert lines[heading + 1] == "router:"
    assert lines.index("  chat:") < heading
    data = load_config(str(tmp_path / "aigo.yaml")).data
    assert data["models"]["chat"] == model and data["router"] == {"port": 9000}


def test_the_comment_on_an_empty_models_mapping_stays_on_its_line(tmp_path):
    written, _ = _import(tmp_path, COMMENTED, {"PY": "3.10"})
    lines = written.decode().splitlines()
    at = lines.index("models:   # my models go here, one per alias")
    assert lines[at + 1 : at + 3] == ["  chat:", "    source:"]


@pytest.mark.parametrize("end", ["", "   "])
def test_a_last_line_without_a_line_end_stays_so(tmp_path, end):
    original = "version: 1\r\nproject: lab\r\nmodels: {}" + end + "\r\n# last, no line end"
    written, _ = _import(tmp_path, original, {"PY": "On"})
    text = written.decode()
    assert text.endswith("\r\n# last, no line end") and text.startswith("version: 1\r\nproject: lab\r\nmodels:\r\n")
    assert "\n" not in text.replace("\r\n", "")


def test_a_models_flow_mapping_with_entries_is_refused_and_nothing_is_written(tmp_path):
    original = (
        "version: 1\nproject: lab\nmodels: {base: {source: {repo: org/base}, context_length: 4096, gpus: none}}\n"
    )
    target = tmp_path / "aigo.yaml"
    with pytest.raises(AigoError) as refused:
        _import(tmp_path, original, {"PY": "3.10"})
    assert str(refused.value) == (
        f"{target}:3: `models:` is written as a {{...}} mapping, and import --write adds a model as a block below "
        "it; write `models:` in block style (one alias per line), or add the entry by hand"
    )
    assert target.read_text() == original


def test_the_command_keeps_crlf_comments_and_text_values(tmp_path):
    target = tmp_path / "aigo.yaml"
    target.write_bytes(COMMENTED.replace("\n", "\r\n").encode())
    definition = _definition(tmp_path, {"APP_VERSION": "3.10", "FEATURE": "On", "WHEN": "2024-01-01"})
    result = run_cli("import", str(definition), "-f", str(target), "--write")
    assert result.returncode == 0, result.stderr
    text = target.read_bytes().decode()
    assert "models:   # my models go here, one per alias\r\n  chat:\r\n" in text
    assert "      APP_VERSION: '3.10'\r\n      FEATURE: 'On'\r\n      WHEN: '2024-01-01'\r\n" in text
    env = load_config(str(target)).data["models"]["chat"]["env"]
    assert env == {"APP_VERSION": "3.10", "FEATURE": "On", "WHEN": "2024-01-01"}
