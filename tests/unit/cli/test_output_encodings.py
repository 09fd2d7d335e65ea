"""Standard output and error written in an encoding that cannot carry every character (ascii by
PYTHONIOENCODING, as a C locale without UTF-8 gives; latin-1, as an ISO-8859-1 locale gives) never end
in a UnicodeEncodeError traceback, whatever a name or value holds ("café", "☕"):

- human text (plan, validate, status, errors, log lines, annotations) shows such a character as a
  visible escape (`caf\\xe9`);
- JSON (plan -o json, status -o json, validate -o json, apply's and logs' JSON lines) escapes it as
  `\\u00e9`, and reads back to exactly what a UTF-8 run prints;
- YAML and shell lines (render, export, import), whose values an escape would change, are refused with
  one line that says how to run with UTF-8, and nothing else on standard output; written whole when
  every character fits.

The commands run as the real CLI in a child process."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import textwrap

import pytest

from aigo_apply.cli.ci_output import CommandSafe, lossless
from aigo_apply.cli.reporter import JsonReporter
from aigo_apply.cli.views import JsonView

from helpers.paths import ROOT

VALUE = "café ☕"
NARROW = ["ascii", "latin-1"]


def config(tmp_path, value=VALUE, alias="tiny"):
    path = tmp_path / "aigo.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            version: 1
            project: cafe
            engines:
              vllm: {{image: aigo-stub-engine, image_tag: "1"}}
            models:
              {alias}:
                source: {{path: {ROOT / "examples" / "demo-models" / "tiny-chat"}}}
                context_length: 4096
                gpus: none
                env: {{GREETING: {json.dumps(value)}}}
            """
        ),
        encoding="utf-8",
    )
    return path


def run(*args, encoding, **env):
    """The CLI with its streams written in `encoding`, their bytes read back in it (each must be)."""
    full = {**os.environ, "PYTHONIOENCODING": encoding, "DOCKER_HOST": "unix:///nonexistent.sock", **env}
    full.pop("AIGO_FILE", None)
    done = subprocess.run(
        [sys.executable, "-m", "aigo_apply", *args], capture_output=True, env=full, cwd=ROOT, timeout=60
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(encoding), done.stderr.decode(encoding)
    )


def clean(result):
    text = result.stdout + result.stderr
    assert "Traceback" not in text and "internal error" not in text and "UnicodeEncodeError" not in text, text


@pytest.mark.parametrize("encoding", NARROW)
def test_human_text_shows_what_the_encoding_cannot_carry_as_an_escape(tmp_path, encoding):
    path = config(tmp_path)
    result = run("render", "tiny", "-f", str(path), encoding="utf-8")  # the reference: UTF-8 prints it whole
    assert VALUE in result.stdout
    escaped = VALUE.encode(encoding, "backslashreplace").decode(encoding)
    plan = run("plan", "-f", str(path), encoding=encoding, DOCKER_HOST="")
    clean(plan)
    assert plan.returncode == 0 and escaped in plan.stdout, plan.stdout
    missing = run("validate", "-f", str(tmp_path / "cafés ☕.yaml"), encoding=encoding)
    clean(missing)
    assert missing.returncode == 1 and "caf" in missing.stderr and len(missing.stderr.strip().splitlines()) == 1
    bad = tmp_path / "bad.yaml"
    bad.write_text(path.read_text().replace("context_length: 4096", "context_length: ☕"), encoding="utf-8")
    for output in ("text", "github"):
        invalid = run("validate", "-o", output, "-f", str(bad), encoding=encoding)
        clean(invalid)
        assert invalid.returncode == 1 and "\\u2615" in invalid.stdout + invalid.stderr, (output, invalid)
    status = run("status", "-f", str(path), encoding=encoding)
    clean(status)
    markdown = run("plan", "-o", "markdown", "-f", str(path), encoding=encoding, DOCKER_HOST="")
    clean(markdown)
    assert markdown.returncode == 0 and "caf" in markdown.stdout


@pytest.mark.parametrize("encoding", NARROW)
@pytest.mark.parametrize(
    "command",
    [
        ["render", "tiny", "--as", "docker-run"],
        ["export", "tiny"],
    ],
)
def test_yaml_and_shell_lines_that_do_not_fit_are_refused_with_one_line(tmp_path, encoding, command):
    path = config(tmp_path)
    result = run(*command, "-f", str(path), encoding=encoding)
    clean(result)
    assert result.returncode == 1 and result.stdout == "", result
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("error: standard output is written as ") and "PYTHONIOENCODING=utf-8" in line, line
    fits = config(tmp_path, value="cafe" if encoding == "ascii" else "café")
    written = run(*command, "-f", str(fits), encoding=encoding)
    clean(written)
    assert written.returncode == 0 and ("cafe" if encoding == "ascii" else "café") in written.stdout, written


@pytest.mark.parametrize("encoding", NARROW)
def test_import_prints_its_entry_or_refuses_it_whole(tmp_path, encoding):
    path = config(tmp_path)
    out = tmp_path / "tiny.baimodel"
    exported = run("export", "tiny", "-f", str(path), "--out", str(out), encoding=encoding)
    clean(exported)
    assert exported.returncode == 0, exported.stderr
    imported = run("import", str(out), "-f", str(path), "--as", "other", encoding=encoding)
    clean(imported)
    assert imported.returncode == 1 and imported.stdout == "" and "PYTHONIOENCODING" in imported.stderr


def _unfingerprinted(document: dict) -> dict:
    return {key: value for key, value in document.items() if key != "fingerprint"}


@pytest.mark.parametrize("encoding", NARROW)
def test_json_escapes_in_its_own_grammar_and_reads_back_exactly(tmp_path, encoding):
    """Each JSON output: the documents of -o json (as a UTF-8 run prints them, once read), and the
    JSON lines of apply and logs, written to a stream of that encoding."""
    path = config(tmp_path)
    for command in (["plan", "-o", "json"], ["validate", "-o", "json"], ["plan", "-o", "json", "--detailed-exitcode"]):
        wide = run(*command, "-f", str(path), encoding="utf-8", DOCKER_HOST="")
        narrow = run(*command, "-f", str(path), encoding=encoding, DOCKER_HOST="")
        clean(narrow)
        assert narrow.returncode == wide.returncode, narrow.stderr
        narrow.stdout.encode(encoding)  # all of it fits
        # the same values, whatever else the Docker daemon ran between the two (its fingerprint covers that)
        assert _unfingerprinted(json.loads(narrow.stdout)) == _unfingerprinted(json.loads(wide.stdout))

    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding=encoding, write_through=True)
    assert not lossless(stream)
    reporter = JsonReporter(CommandSafe(stream))
    reporter.event("step", address="model.café", message=f"started {VALUE}")
    line = raw.getvalue().decode(encoding)
    assert json.loads(line)["message"] == f"started {VALUE}" and json.loads(line)["address"] == "model.café"

    raw2 = io.BytesIO()
    guarded = CommandSafe(io.TextIOWrapper(raw2, encoding=encoding, write_through=True))
    with contextlib.redirect_stdout(guarded):
        JsonView().log_line("tiny", f"said {VALUE}", True)
    assert json.loads(raw2.getvalue().decode(encoding))["line"] == f"said {VALUE}"


@pytest.mark.parametrize("encoding", NARROW)
def test_the_guard_writes_what_the_stream_cannot_carry_as_escapes(encoding):
    raw = io.BytesIO()
    guard = CommandSafe(io.TextIOWrapper(raw, encoding=encoding, write_through=True))
    guard.write(f"one {VALUE}\n::two {VALUE}")
    guard.command(f"::error file=a.yaml,line=1::{VALUE}")
    text = raw.getvalue().decode(encoding)
    assert text.startswith("one caf") and "\\u2615" in text and ":\\x3atwo" in text and "::error file=a.yaml" in text
