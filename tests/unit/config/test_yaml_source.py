"""Reading the file: positions, duplicate keys, and one-line errors for files that are not usable YAML."""

from __future__ import annotations

import pytest

from aigo_apply.config.yaml_source import MAX_NODES, comments, load
from aigo_apply.errors import ConfigFileError


def test_marks_point_at_keys_and_values(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("version: 1\nmodels:\n  x:\n    context_length: 10\n")
    src = load(path)
    assert src.data == {"version": 1, "models": {"x": {"context_length": 10}}}
    assert src.marks.of_key(("models", "x", "context_length")) == (4, 5)
    assert src.marks.of_value(("models", "x", "context_length")) == (4, 21)
    assert src.marks.of_key(("models", "x", "nope")) == (3, 3)  # nearest written ancestor


def test_duplicate_keys_are_problems_with_both_lines(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("version: 1\nproject: a\nproject: b\n")
    src = load(path)
    assert [p.format() for p in src.problems] == [
        f"{path}:3:1: project: duplicate key 'project' (first written on line 2); keep only one"
    ]


@pytest.mark.parametrize(
    "content, expected",
    [
        (b"", "is empty"),
        (b"# only a comment\n\n", "is empty"),
        (b"version: 1\nproject: [\n", "YAML syntax error"),
        (b"version: 1\n\xff\xfe bad\n", "is not valid UTF-8 (byte 0xff)"),
        (b"a: *nothing\n", "YAML syntax error"),
        (b"? [a, b]\n: 1\n", "mapping key must be a plain value"),
    ],
)
def test_unusable_files_give_one_clear_line(tmp_path, content, expected):
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigFileError) as info:
        load(path)
    assert expected in str(info.value)
    assert str(info.value).startswith(str(path))


def test_line_of_syntax_error_and_non_utf8(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"version: 1\nmodels:\n  x: [1, 2\n")
    with pytest.raises(ConfigFileError) as info:
        load(path)
    assert info.value.line is not None and info.value.line >= 3
    path.write_bytes(b"version: 1\nproject: caf\xe9\n")
    with pytest.raises(ConfigFileError) as info:
        load(path)
    assert info.value.line == 2


def test_missing_directory_and_unreadable(tmp_path):
    with pytest.raises(ConfigFileError, match="no such file"):
        load(tmp_path / "nope.yaml")
    with pytest.raises(ConfigFileError, match="is a directory"):
        load(tmp_path)


def test_alias_bomb_stops_early(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigFileError, match=f"more than {MAX_NODES} YAML nodes"):
        load(path)


def test_huge_file_refused(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("# " + "x" * (1024 * 1024 + 10) + "\nversion: 1\n")
    with pytest.raises(ConfigFileError, match="the limit for aigo.yaml files"):
        load(path)


COMMENTED = """# a header
version: 1  # after a value
project: 'a # in quotes' # after quotes
models:
  m: {source: {repo: "o/r#x"}}   # after a flow mapping
  n:
    - a#b
    - c  #  spaced
    # indented, alone
url: https://example.com/#anchor
"""


def test_comments_are_found_where_yaml_reads_them_and_nowhere_else():
    found = list(comments(COMMENTED))
    assert found == [
        (1, 1, " a header"),
        (2, 13, " after a value"),
        (3, 26, " after quotes"),
        (5, 34, " after a flow mapping"),
        (8, 10, "  spaced"),
        (9, 5, " indented, alone"),
    ]
    lines = COMMENTED.splitlines()
    for line, column, text in found:  # each is exactly the rest of its line after a `#`
        assert lines[line - 1][column - 1 :] == "#" + text
