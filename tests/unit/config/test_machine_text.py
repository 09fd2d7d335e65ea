"""config/machine_text: each machine format reads back exactly what it was given (json.loads,
yaml.safe_load, a POSIX `sh`), whatever the text holds, and no line of it is a CI runner's workflow
command, so cli/ci_output's guard passes it through untouched."""

from __future__ import annotations

import io
import json
import re
import subprocess

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from aigo_apply.cli.ci_output import CommandSafe
from aigo_apply.config.machine_text import is_command, json_text, shell_word, yaml_comment, yaml_text

from helpers.yaml_readers import CORE_12, YAML_11, read_alike

HOSTILE = [
    "##[group]", "##[error]x", "::error::", "::add-mask::v", " ::x", "\t::y", "a\n::b", "a\r::b", "a\r\n  ::c",
    "\u2028::d", "\x85::e", "\n", "\r", "\u2028", "\u2029", "\x85", "\x1b[31m", "\u202e", "\xa0", "\t", "'", '"',
    "$(id)", "`id`", "~", "~/x", "\\", "\\n", "#", "##", "[", ":", "-", "- x", "? k", "{a: 1}", "[1]", "&a", "*a",
    "!!python/object", "%TAG", "yes", "no", "null", "0x10", "1e3", "", " ", "é", "\U0001f600", "\U000e0001", "\x00",
]  # fmt: skip
TEXT = st.lists(st.sampled_from(HOSTILE) | st.text(max_size=6), min_size=1, max_size=6).map("".join)
LINES = re.compile(r"\r\n|\r|\n")


def _no_command(text: str) -> None:
    """No line is a workflow command, and the guard leaves the text as it is."""
    for line in LINES.split(text):
        assert not is_command(line), (line, text)
    out = io.StringIO()
    CommandSafe(out).write(text)
    assert out.getvalue() == text


def test_is_command_knows_both_forms():
    for line in ("::error::x", "  ::warning file=a::b", "\t::add-mask::s", "x ##[group]y", "##[endgroup]"):
        assert is_command(line)
    for line in ("a::b", ": :x", "#[x", "# #[x", "x"):
        assert not is_command(line)


@given(st.dictionaries(TEXT, TEXT | st.lists(TEXT, max_size=3) | st.integers(), max_size=4), st.booleans())
def test_json_reads_back_exactly_and_commands_nothing(data, ascii):
    for indent in (None, 2):
        text = json_text(data, indent=indent, ascii=ascii)
        assert json.loads(text) == data
        _no_command(text)
        if not ascii:
            assert text.replace("\n", "").isprintable()  # nothing a terminal would act on
        assert "\n" not in text or indent


@given(st.dictionaries(TEXT, TEXT | st.dictionaries(TEXT, TEXT, max_size=2) | st.lists(TEXT, max_size=3), max_size=4))
def test_yaml_reads_back_exactly_and_commands_nothing(data):
    text = yaml_text(data)
    assert yaml.safe_load(text) == data
    _no_command(text)
    assert text.replace("\n", "").isprintable()


# texts some YAML reader takes for a number, bool, null or date: each rule of both specs, and near misses
SPEC_SHAPED = st.one_of(*(st.from_regex(rule, fullmatch=True) for _, rule in CORE_12 + YAML_11))
NUMBER_LIKE = st.text(alphabet="0123456789._+-eExXoObB:~yYnNaft", min_size=1, max_size=8)


@settings(max_examples=400)
@given(st.dictionaries(SPEC_SHAPED | NUMBER_LIKE | TEXT, SPEC_SHAPED | NUMBER_LIKE | st.lists(NUMBER_LIKE, max_size=3)))
def test_yaml_text_reads_as_text_in_yaml_1_1_and_1_2_too(data):
    """kubectl (go-yaml), editors and ruamel read YAML 1.2's core schema, where `1e3`, `-.5e3` and `0o17`
    are numbers; other YAML 1.1 readers take `y` and `n` for bools: every text aigo-apply writes plain
    is a text in each of them, so keys and values read back as the same strings wherever they go."""
    text = yaml_text(data)
    assert yaml.safe_load(text) == data
    assert read_alike(text) == [], text


def test_yaml_text_quotes_what_kubectl_reads_as_a_number():
    values = ["1e3", "0o17", "1e-3", "-.5e3", "2e308", "+.5", "08", "1_000", "0x_1F", "y", "N", "2024-1-2", ".inf"]
    text = yaml_text({v: v for v in values})
    assert all(f"'{v}': '{v}'" in text for v in values), text
    plain = {"image": "v0.31.0", "alias": "qwen3-8b", "bind": "127.0.0.1", "n": 1}
    assert yaml_text(plain) == "image: v0.31.0\nalias: qwen3-8b\nbind: 127.0.0.1\n'n': 1\n"


def test_yaml_writes_files_as_blocks_and_hostile_text_double_quoted():
    text = yaml_text({"haproxy.cfg": "global\n  daemon\n", "one": "{}\n", "note": "##[group]x", "k": "::error::y"})
    assert "haproxy.cfg: |\n  global\n    daemon\n" in text and "one: |\n  {}\n" in text
    assert 'note: "##\\x5bgroup]x"' in text and 'k: "::error::y"' in text
    assert yaml.safe_load(text)["note"] == "##[group]x"


@given(TEXT)
def test_a_yaml_comment_stays_one_line_and_commands_nothing(text):
    comment = "# " + yaml_comment(text) + "\n"
    assert yaml.safe_load("a: 1\n" + comment) == {"a": 1}
    _no_command(comment)


@settings(max_examples=60)
@given(st.lists(TEXT, min_size=1, max_size=8))
def test_shell_words_read_back_exactly_and_command_nothing(words):
    words = [w.replace("\x00", "") for w in words]  # no argument of a process can hold NUL
    line = "printf '%s\\0' " + " ".join(shell_word(w) for w in words)
    _no_command(line)
    assert line.replace("\n", "").replace("\t", "").isprintable()
    done = subprocess.run(["sh", "-c", line], capture_output=True, check=True)
    assert done.stdout.decode("utf-8", "surrogateescape").split("\x00")[:-1] == words


def test_shell_words_stay_bare_when_nothing_in_them_is_special():
    assert [shell_word(w) for w in ("a", "/models/m", "--max-model-len", "k=v:w,x")] == [
        "a", "/models/m", "--max-model-len", "k=v:w,x"
    ]  # fmt: skip
    assert shell_word("::x") == "'::x'" and shell_word("##[x") == "'##''[x'" and shell_word("") == "''"
