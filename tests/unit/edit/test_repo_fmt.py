"""`aigo-apply fmt`: the canonical layout (the key order of docs/configuration.md's reference, two-space
indent, comments kept beside their keys, quotes exactly where a YAML reader would read another value), idempotent and meaning-
preserving (a hypothesis property), `--check` with a diff and exit 1, refusal of invalid files,
symlinks and non-regular files (nothing written), atomic replacement keeping the file mode."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from aigo_apply.config.yaml_source import load
from aigo_apply.edit.fmt import comments, format_text, key_order
from aigo_apply.observe.config_file import load_config

from helpers.paths import EXAMPLES, ROOT

BOOT = "import sys; from aigo_apply.cli import repo_commands; from aigo_apply.cli.main import main; main(sys.argv[1:])"


def aigo(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The real CLI in a child process, with the repo commands loaded (also before cli/main imports them)."""
    env = {k: v for k, v in os.environ.items() if k != "AIGO_FILE"}
    return subprocess.run(
        [sys.executable, "-c", BOOT, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=60
    )


def data_of(path: Path):
    return load(path).data


def fmt(tmp_path: Path, text: str, name: str = "aigo.yaml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return format_text(text, load_config(str(path)).data, str(path))


MESSY = """\
# header line

project: lab     # the project
version: 1
models:
    # about chat
    chat:
        # about vllm
        vllm:
            # dtype first
            dtype: auto
            tool_calling: off   # no tools
        gpus:
            - 0   # gpu zero
            - 1
        # the source
        source: {repo: "a/b", revision: 'main'}
        env:
            ZED: "0123"
            ONE: 8000
            DATE: 2024-01-01
            NUL: "null"
            EXP: 1e3
            "OFF": "off"
            PLAIN: 'hello'
        context_length: 4096
    "1e3":
        source: {path: /srv/models/x}
        gpus: none
        context_length: 100
router:
    port: 8000
    # bind it
    bind: 127.0.0.1

# the end
"""

CANONICAL = """\
# header line

version: 1
project: lab     # the project
router:
  port: 8000
  # bind it
  bind: 127.0.0.1
models:
  # about chat
  chat:
    # the source
    source: {repo: a/b, revision: main}
    context_length: 4096
    gpus:
      - 0         # gpu zero
      - 1
    # about vllm
    vllm:
      tool_calling: false       # no tools
      # dtype first
      dtype: auto
    env:
      ZED: "0123"
      ONE: "8000"
      DATE: "2024-01-01"
      NUL: "null"
      EXP: "1e3"
      "OFF": "off"
      PLAIN: hello
  "1e3":
    source: {path: /srv/models/x}
    context_length: 100
    gpus: none

# the end
"""


def test_messy_file_becomes_the_canonical_layout_with_every_comment_beside_its_key(tmp_path):
    out = fmt(tmp_path, MESSY)
    assert out == CANONICAL
    assert fmt(tmp_path, out, "again.yaml") == out  # idempotent
    (tmp_path / "out.yaml").write_text(out)
    assert data_of(tmp_path / "out.yaml") == data_of(tmp_path / "aigo.yaml")
    assert Counter(comments(out)) == Counter(comments(MESSY))


def test_texts_yaml_1_2_reads_as_numbers_keep_their_quotes(tmp_path):
    """YAML 1.2's core schema (an editor's reader) takes `.5e3` and `-.5e3` for floats, which
    ruamel.yaml's own resolver does not, and YAML 1.1's types `y` for a bool: fmt keeps them quoted,
    and every plain scalar it writes reads the same in YAML 1.1 and 1.2."""
    from helpers.yaml_readers import read_alike

    values = [".5e3", "-.5e3", "+.5e3", ".0e0", "1e3", "0o17", "y", "N"]
    env = "".join(f'      V{n}: "{v}"\n' for n, v in enumerate(values))
    out = fmt(tmp_path, CANONICAL.replace('      ZED: "0123"\n', '      ZED: "0123"\n' + env))
    assert all(f'V{n}: "{v}"' in out for n, v in enumerate(values)), out
    assert read_alike(out) == []


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_examples_format_to_a_fixed_point_with_the_same_meaning(example, tmp_path):
    text = (EXAMPLES / example).read_text()
    out = fmt(tmp_path, text)
    assert fmt(tmp_path, out, "again.yaml") == out
    (tmp_path / "out.yaml").write_text(out)
    assert data_of(tmp_path / "out.yaml") == data_of(tmp_path / "aigo.yaml")
    assert Counter(comments(out)) == Counter(comments(text))


def test_every_example_is_already_formatted():
    """`fmt --check` passes on every config in examples/, as a config repo's pre-commit hook would run
    it (a key moved in the layout must move in the examples too). examples/ci/ holds a GitHub workflow,
    not a config."""
    configs = sorted(
        str(p.relative_to(ROOT)) for p in EXAMPLES.rglob("*.y*ml") if "ci" not in p.relative_to(EXAMPLES).parts
    )
    assert "examples/demo.yaml" in configs and len(configs) >= 7, configs
    check = aigo("fmt", "--check", *configs, cwd=ROOT)
    assert check.returncode == 0, check.stdout + check.stderr


def test_crlf_and_byte_order_mark_are_kept(tmp_path):
    text = "\ufeffproject: lab\r\nversion: 1\r\nmodels:\r\n  m:\r\n    context_length: 8\r\n    source: {repo: a/b}\r\n"
    out = fmt(tmp_path, text)
    assert (
        out
        == "\ufeffversion: 1\r\nproject: lab\r\nmodels:\r\n  m:\r\n    source: {repo: a/b}\r\n    context_length: 8\r\n"
    )


def _reference_order() -> dict[tuple[str, ...], tuple[list[str], tuple[str, ...]]]:
    """Key order per mapping in the reference block of docs/configuration.md (commented alternatives
    aside), beside fmt's order for that mapping."""
    page = (ROOT / "docs" / "configuration.md").read_text()
    block = page.split("```yaml\n# aigo.yaml: reference\n", 1)[1].split("```", 1)[0]
    found: dict[tuple[str, ...], tuple[list[str], tuple[str, ...]]] = {}

    def walk(node, path):
        if isinstance(node, dict):
            pattern = tuple(
                "*" if len(path) >= 1 and path[0] in ("models",) and i == 1 else p for i, p in enumerate(path)
            )
            order = key_order(path)
            if order is not None:
                keys, _ = found.setdefault(pattern, ([], order))
                keys += [k for k in node if k not in keys]
            for key, value in node.items():
                walk(value, path + (str(key),))

    walk(YAML(typ="safe").load(block), ())
    return found


def test_fmt_order_follows_the_configuration_reference():
    """fmt's order is the schema's (tests/unit/edit/test_fmt_schema_order.py); the page shows it."""
    found = _reference_order()
    assert len(found) > 10
    for pattern, (keys, order) in found.items():
        table = [k for k in order if k in keys]
        assert table == keys, f"{pattern}: reference order {keys}, fmt order {table}"


# -- the property -------------------------------------------------------------------------------------

TRICKY = ["off", "ON", "yes", "0123", "1e3", "8000", "1.5", "null", "~", "2024-01-01", "1:30", "0x1A", "a b",
          "#x", "a: b", "- x", "*star", "hello", "", "true", "-1", ".5", "3.10", "@at", "%p", "!bang", "it's"]  # fmt: skip
WORDS = st.text(alphabet="abcdefghij -:#'", min_size=0, max_size=12)


@st.composite
def config_files(draw):
    """A valid aigo.yaml written in arbitrary order, indentation, quoting and comments."""
    width = draw(st.sampled_from([2, 3, 4]))
    out: list[str] = []

    def note(depth: int) -> None:
        for _ in range(draw(st.integers(0, 2))):
            out.append(" " * (depth * width) + draw(st.sampled_from(["", "# " + draw(WORDS)])))

    def eol() -> str:
        return draw(st.sampled_from(["", "  # " + draw(WORDS)]))

    def scalar(value, env: bool = False) -> str:
        if not isinstance(value, str) or draw(st.booleans()):
            return json.dumps(value)
        if re.fullmatch(r"[a-z][a-z0-9/_.-]*", value) and yaml.safe_load(value) == value:
            return value  # plain, and YAML reads it as this text
        if env and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.:_-]*", value) and yaml.safe_load(value) is not None:
            return value  # an env value is read as the text written (`0123`, `off`, `1e3`)
        return json.dumps(value)

    def emit(entries, depth: int) -> None:
        entries = draw(st.permutations(entries))
        for key, value in entries:
            note(depth)
            pad = " " * (depth * width)
            name = json.dumps(key) if not re.fullmatch(r"[a-z][a-z_]*", key) else key
            if isinstance(value, list) and value and isinstance(value[0], tuple):
                if draw(st.booleans()) and depth > 1:
                    inner = ", ".join(f"{json.dumps(k)}: {scalar(v)}" for k, v in value)
                    out.append(f"{pad}{name}: {{{inner}}}{eol()}")
                else:
                    out.append(f"{pad}{name}:{eol()}")
                    emit(value, depth + 1)
            else:
                out.append(f"{pad}{name}: {scalar(value, env=bool(re.fullmatch('V[0-9]', key)))}{eol()}")

    models = []
    for n in range(draw(st.integers(1, 3))):
        alias = draw(st.sampled_from(["chat", "1e3", "m.v2", "0123", "x_y"])) + str(n)
        env = [(f"V{k}", draw(st.sampled_from(TRICKY))) for k in range(draw(st.integers(0, 4)))]
        model = [("source", [("repo", "org/m"), ("revision", "main")]), ("context_length", 4096), ("gpus", "none")]
        model += [("vllm", [("dtype", "auto"), ("tool_calling", draw(st.booleans()))])]
        model += [("env", env)] if env else []
        model += [("port", 20100 + n)] if draw(st.booleans()) else []
        models.append((alias, model))
    top = [("version", 1), ("project", "lab"), ("models", models)]
    top += [("router", [("port", 8000), ("bind", "127.0.0.1")])] if draw(st.booleans()) else []
    top += [("defaults", [("gpu_memory_utilization", 0.9)])] if draw(st.booleans()) else []
    note(0)
    emit(top, 0)
    note(0)
    return "\n".join(out) + "\n"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=config_files())
def test_property_fmt_is_idempotent_and_keeps_meaning_and_comments(text, tmp_path):
    path = tmp_path / "aigo.yaml"
    path.write_text(text)
    data = load_config(str(path)).data
    once = format_text(text, data, str(path))
    path.write_text(once)
    assert load_config(str(path)).data == data  # the formatted file validates and means the same
    assert format_text(once, load(path).data, str(path)) == once
    assert Counter(comments(once)) == Counter(comments(text))
    assert all(len(line) - len(line.lstrip(" ")) in range(0, 40, 2) for line in once.splitlines())


# -- the command ----------------------------------------------------------------------------------------


def test_check_prints_a_diff_and_exits_1_then_fmt_rewrites_keeping_the_mode(tmp_path):
    path = tmp_path / "aigo.yaml"
    path.write_text(MESSY)
    path.chmod(0o640)
    check = aigo("fmt", "--check", cwd=tmp_path)
    assert check.returncode == 1, check.stderr
    assert "--- aigo.yaml (as written)" in check.stdout and "+version: 1" in check.stdout
    assert "not formatted" in check.stderr and path.read_text() == MESSY
    done = aigo("fmt", "aigo.yaml", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "formatted aigo.yaml"
    assert path.read_text() == CANONICAL and oct(path.stat().st_mode & 0o777) == "0o640"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["aigo.yaml"]  # no temporary file left behind
    clean = aigo("fmt", "--check", "aigo.yaml", cwd=tmp_path)
    assert (clean.returncode, clean.stdout, clean.stderr) == (0, "", "")


def test_an_invalid_file_is_refused_with_its_problems_and_left_alone(tmp_path):
    bad = "project: lab\nversion: 1\nmodels:\n    m:\n        source: {repo: a/b}\n        gpus: sometimes\n"
    good = "version: 1\nproject: ok\nmodels:\n  m:\n    source: {repo: a/b}\n    context_length: 8\n"
    (tmp_path / "aigo.yaml").write_text(bad)
    (tmp_path / "aigo-ok.yaml").write_text(good.replace("version: 1\nproject: ok", "project: ok\nversion: 1"))
    result = aigo("fmt", "aigo.yaml", "aigo-ok.yaml", cwd=tmp_path)
    assert result.returncode == 1
    assert "aigo.yaml:6:" in result.stderr and "models.m.gpus" in result.stderr and "Traceback" not in result.stderr
    assert (tmp_path / "aigo.yaml").read_text() == bad
    assert (tmp_path / "aigo-ok.yaml").read_text() == good  # the other file is still formatted


def test_symlinks_and_non_regular_files_are_refused_without_reading_or_writing(tmp_path):
    real = tmp_path / "real.yaml"
    real.write_text(MESSY)
    (tmp_path / "link.yaml").symlink_to(real)
    os.mkfifo(tmp_path / "fifo.yaml")
    (tmp_path / "dir.yaml").mkdir()
    for name, words in (("link.yaml", "symbolic link"), ("fifo.yaml", "not a regular file"), ("dir.yaml", "directory")):
        result = aigo("fmt", name, cwd=tmp_path)
        assert result.returncode == 1 and words in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert real.read_text() == MESSY and (tmp_path / "link.yaml").is_symlink()


def test_usage_errors(tmp_path):
    assert aigo("fmt", "", cwd=tmp_path).returncode == 64
    missing = aigo("fmt", cwd=tmp_path)
    assert missing.returncode == 1 and "aigo.yaml: no such file" in missing.stderr


def test_a_comment_inside_a_flow_mapping_is_refused_not_lost(tmp_path):
    text = "version: 1\nproject: lab\nmodels:\n  m:\n    context_length: 8\n    source: {repo: a/b,  # inline\n      revision: main}\n"
    path = tmp_path / "aigo.yaml"
    path.write_text(text)
    result = aigo("fmt", "aigo.yaml", cwd=tmp_path)
    assert result.returncode in (0, 1) and "Traceback" not in result.stderr
    assert "# inline" in path.read_text()
