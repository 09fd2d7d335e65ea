"""A message that embeds a path or a value from outside stays on its line, whatever that holds: a
folder named `real<LF>::error::dir` behind a `source.path` or `defaults.models_dir` link printed a raw
line feed in validate's and plan's text and Markdown (a second line, the runner's `::error` command
defanged but the line still ours to fake). Now:

- each problem of a file is one line (errors.Problem.format shows the message's and the path's line
  breaks as `\\x0a`), in every format that prints problems as text;
- the error boundary prints each line of an error as one line, so a line break any message embeds is
  shown, never acted on; an error with more to say than one line (the problems an edit would give the
  file: errors.Problems) says it as lines of its own;
- apply's step lines show a line break in a message the same way.

The commands run as the real CLI in a child process."""

from __future__ import annotations

import io
import textwrap

import pytest

from aigo_apply.errors import AigoError, Problem, Problems

from helpers.cli import run_cli

ODD = "real\n::error::dir"


@pytest.fixture
def odd_links(tmp_path):
    (tmp_path / ODD).mkdir()
    (tmp_path / "plainlink").symlink_to(ODD)
    store = tmp_path / "store\n::warning::x"
    store.mkdir()
    (tmp_path / "storelink").symlink_to(store.name)
    return tmp_path


CONFIGS = {
    "source.path": """\
        version: 1
        project: lines
        models:
          m:
            source: {path: plainlink}
            context_length: 4096
            gpus: none
        """,
    "defaults.models_dir": """\
        version: 1
        project: lines
        defaults: {models_dir: storelink}
        models:
          m:
            source: {repo: org/x}
            context_length: 4096
            gpus: none
        """,
}
COMMANDS = [
    ["validate"],
    ["validate", "-o", "github"],
    ["plan"],
    ["plan", "-o", "markdown"],
    ["render", "m"],
    ["status"],
]


def assert_no_line_of_its_own(text: str) -> None:
    """No output line begins with what the odd name holds after its line feed, and the name shows
    its line feed as an escape (or, in an annotation, as the runner's %0A)."""
    for line in text.splitlines():
        if line.startswith("::error file="):  # validate -o github's own annotation
            continue
        assert not line.lstrip().startswith((":", "\\x3aerror", "\\x3awarning")), text
    assert "\\x0a" in text or "%0A" in text, text


@pytest.mark.parametrize("where", sorted(CONFIGS))
def test_a_line_feed_in_a_path_from_the_host_stays_on_its_line(odd_links, where):
    path = odd_links / "aigo.yaml"
    path.write_text(textwrap.dedent(CONFIGS[where]))
    for command in COMMANDS:
        result = run_cli(*command, "-f", str(path), env={"DOCKER_HOST": "unix:///nonexistent.sock"})
        assert result.returncode == 1, (command, result.stderr)
        assert_no_line_of_its_own(result.stdout + result.stderr)
        if command[-1] != "github":
            problems = [x for x in result.stderr.splitlines() if x.startswith(str(path))]
            assert len(problems) == 1 and where in problems[0], (command, result.stderr)


@pytest.mark.parametrize("text", ["a\nb", "a\r\nb", "a\u2028b", "a\x85b", "a\x1b[2Jb"])
def test_each_problem_is_one_line_whatever_its_message_and_path_hold(text):
    line = Problem(3, 4, f"models.{text}", f"holds {text}", f"/srv/{text}.yaml").format()
    assert len(line.splitlines()) == 1 and line.isprintable(), line


def test_the_boundary_prints_every_line_of_an_error_as_one_line(monkeypatch, capsys):
    from aigo_apply.cli import main as entry

    def failing(**_):
        raise AigoError("cannot use /srv/x\n::error::injected")

    monkeypatch.setattr(entry.cli, "main", failing)
    assert entry._run(["validate"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == ["error: cannot use /srv/x\\x0a::error::injected"], err

    def listing(**_):
        raise Problems("the file would not validate, so it was not changed:", ["a.yaml:1:1: one", "a.yaml:2:1: t\nwo"])

    monkeypatch.setattr(entry.cli, "main", listing)
    assert entry._run(["validate"]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "error: the file would not validate, so it was not changed:",
        "  a.yaml:1:1: one",
        "  a.yaml:2:1: t\\x0awo",
    ], lines


def test_a_step_line_of_apply_shows_a_line_feed_of_its_message(monkeypatch):
    from aigo_apply.cli.reporter import TextReporter

    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    TextReporter().event("step", address="model.m", message="mounted /srv/real\n::error::dir", outcome="failed")
    assert out.getvalue().count("\n") == 1 and "\\x0a::error::dir" in out.getvalue(), out.getvalue()


def test_what_apply_and_watch_say_stays_on_its_line_after_its_own_blank_lines(capsys):
    """`say` (watch's "could not update the router: ERROR", apply's failed list): a line break inside
    the message is shown; the blank lines a message opens with (apply's summary) are kept."""
    from aigo_apply.cli.reporter import JsonReporter, TextReporter

    TextReporter().say("model.m: could not update the router: /srv/x\n::error::y")
    TextReporter().say("\nApply interrupted: 1 created.", err=True)
    JsonReporter().say("model.m: could not update the router: /srv/x\n::error::y", err=True)
    out, err = capsys.readouterr()
    assert out == "model.m: could not update the router: /srv/x\\x0a::error::y\n", out
    assert err == "\nApply interrupted: 1 created.\nmodel.m: could not update the router: /srv/x\\x0a::error::y\n", err
