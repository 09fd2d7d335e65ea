"""CI output: `plan -o markdown` lets no autolink form (`www.`, `http(s)://`, e-mail,
@mentions, #refs) in any value or blocker line; no line the command line prints is a GitHub Actions
workflow command (`::` after white space at a line's start, or `##[` anywhere) except the annotations
`validate -o github` builds, whatever file name or value a line starts with (a path shows as
`./::...`); and `fmt` on a valid file it cannot keep says which line, never "please report it"."""

from __future__ import annotations

import html
import io
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import aigo_apply
from aigo_apply.cli.ci_output import CommandSafe
from aigo_apply.edit.fmt import format_text
from aigo_apply.errors import AigoError, shown_path
from aigo_apply.observe.config_file import load_config
from aigo_apply.plan.markdown import md, plan_markdown
from aigo_apply.plan.types import Action, Blocker, Change, Plan

AUTOLINKS = re.compile(r"(?i)\bwww\.|[a-z][a-z0-9+.-]*://|[A-Za-z0-9._%+-]@[A-Za-z0-9]|@[A-Za-z0-9]|#[0-9]")
COMMAND_LINE = re.compile(r"[ \t\f\v]*::")
ANNOTATION = re.compile(r"::error file=[^,]*(,line=\d+(,col=\d+)?)?,title=aigo-apply validate::[^\r\n]*")
LINKY = ["www.evil.example/x", "https://evil.example/p?q=1", "http://x.y", "ftp://files", "mail me@example.com",
         "@octocat", "fixes #12", "WWW.Upper.Case", "xmpp:me@host.org", "mailto:a@b.co"]  # fmt: skip


def _rendered(markdown: str) -> str:
    """The text GitHub would see once it has read the character references (what it autolinks)."""
    return html.unescape(re.sub(r"<[^>]+>", " ", markdown)).replace("\u200b", "\u2063")


@given(st.lists(st.sampled_from(LINKY) | st.text(max_size=20), min_size=1, max_size=4).map(" ".join))
def test_markdown_text_never_holds_an_autolink(text):
    shown = _rendered(md(text)).replace("\u2063", "")
    assert shown.replace(" ", "") == re.sub(r"\s", "", shown)  # one line
    assert not AUTOLINKS.search(_rendered(md(text)).replace("\u2063", "\x00"))


def test_a_plan_in_markdown_has_no_autolink_in_values_reasons_notes_warnings_or_blockers():
    plan = Plan(
        "lab",
        "aigo.yaml",
        "sha256:" + "0" * 64,
        (
            Action(
                "model.m",
                "recreate",
                ("env changed: see https://evil.example/a",),
                (Change("env.URL", "www.old.example/x", "http://new.example", "recreate"),),
                notes=("mail ops@example.com about #7",),
            ),
        ),
        blockers=(Blocker("router.open", "reach www.example.org now", "ask @admin or https://help.example"),),
        warnings=("see www.docs.example",),
    )
    text = plan_markdown(plan)
    assert not AUTOLINKS.search(_rendered(text).replace("\u2063", "\x00")), text
    assert "www" in text and "evil" in text and "example" in text  # still readable


@given(
    st.lists(st.text(alphabet=" \t\r\n:#[ab", max_size=12), max_size=8),
)
def test_no_written_line_is_a_workflow_command_however_the_text_is_cut(chunks):
    out = io.StringIO()
    guard = CommandSafe(out)
    for chunk in chunks:
        guard.write(chunk)
    written = out.getvalue()
    for line in re.split(r"\r\n|\r|\n", written):
        assert not COMMAND_LINE.match(line) and "##[" not in line, repr(written)
    joined = "".join(chunks)
    lines = re.split(r"\r\n|\r|\n", joined)
    if not any(COMMAND_LINE.match(line) or "##[" in line for line in lines):
        assert written == joined  # nothing else is touched


def test_the_guard_keeps_its_own_annotations_only():
    out = io.StringIO()
    guard = CommandSafe(out)
    guard.write("half a line")
    guard.command("::error file=a.yaml,line=1,col=2,title=aigo-apply validate::models.m: bad")
    with pytest.raises(AigoError):
        guard.command("::add-mask::x")
    assert out.getvalue() == "half a line\n::error file=a.yaml,line=1,col=2,title=aigo-apply validate::models.m: bad\n"
    assert shown_path("::x.yaml") == "./::x.yaml" and shown_path(" ::x") == "./ ::x" and shown_path("a::b") == "a::b"


def _main(capsys, *args: str) -> tuple[int, str]:
    from aigo_apply.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out = capsys.readouterr()
    return int(exit_info.value.code or 0), out.out + "\n" + out.err


GOOD = "version: 1\nproject: lab\nmodels:\n  m: {source: {repo: org/m}, context_length: 4096, gpus: none}\n"
BAD = GOOD.replace("gpus: none", "gpus: sometimes")
NAMES = ["::warning file=x::pwned.yaml", " ::notice::lead.yaml", "::stop-commands::t.yaml", "##[error]old.yaml"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    "command",
    [
        ("validate", "F"), ("validate", "-o", "github", "F"), ("validate", "-o", "github", "F", "G"),
        ("validate", "F", "G"), ("fmt", "--check", "F"), ("fmt", "F"), ("schema", "--write", "-f", "F"),
        ("plan", "-f", "F", "-o", "markdown"), ("export", "m", "-f", "F"), ("image", "tag", "vllm", "v9", "-f", "F"),
        ("validate", "NOPE"), ("render", "m", "-f", "F"),
    ],
)  # fmt: skip
def test_no_command_prints_a_workflow_command_whatever_the_file_is_called(tmp_path, capsys, monkeypatch, name, command):
    monkeypatch.chdir(tmp_path)
    Path(name).write_text(BAD)
    Path("::good.yaml").write_text(GOOD.replace("gpus: none", "gpus: none\n    env: {A: '::set-output name=x::1'}"))
    args = [{"F": name, "G": "::good.yaml", "NOPE": "::missing.yaml"}.get(a, a) for a in command]
    code, out = _main(capsys, *args)
    assert "Traceback" not in out
    for line in re.split(r"\r\n|\r|\n", out):
        if ANNOTATION.fullmatch(line):
            continue  # ours: the runner reads it as that one command (the `::` form is tried first)
        assert not COMMAND_LINE.match(line) and "##[" not in line, (line, out)
    if "github" in command:
        assert any(ANNOTATION.fullmatch(line) for line in out.splitlines()), out


def test_a_path_at_the_start_of_a_line_is_shown_as_a_relative_path(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("::x.yaml").write_text(BAD)
    Path("::ok.yaml").write_text(GOOD)
    _, out = _main(capsys, "validate", "::x.yaml", "::ok.yaml")
    assert "./::x.yaml:4:" in out and "./::ok.yaml: valid" in out


# -- fmt: what it cannot keep, at its line ----------------------------------------------------------

UNKEPT = [
    ("version: 1\t# v\nproject: lab\nmodels:\n  m: {source: {repo: org/m}, context_length: 4096, gpus: none}\n", ":1:"),
    ("version: 1\nproject: lab\nmodels:\n  m:\n    source: {repo: org/m}\n    context_length: 4096\n"
     "    gpus: [\n      0, # first\n      1]\n", ":8:"),
    ("version: 1\nproject: lab\nmodels:\n  m:\n    source: {repo: org/m, # where\n      revision: main}\n"
     "    context_length: 4096\n    gpus: none\n", ":5:"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "line"), UNKEPT)
def test_fmt_names_the_line_it_cannot_keep(tmp_path, text, line):
    path = tmp_path / "aigo.yaml"
    path.write_text(text)
    config = load_config(str(path))  # valid
    with pytest.raises(AigoError) as caught:
        format_text(text, config.data, "F", config.marks)
    message = str(caught.value)
    assert message.startswith("F" + line) and "nothing was written" in message, message
    assert "report" not in message.lower()


def test_no_fmt_message_asks_to_report_it():
    edit = Path(aigo_apply.__file__).parent / "edit"
    for module in ("fmt.py", "fmt_refusal.py", "fmt_comments.py"):
        assert "report it" not in (edit / module).read_text().lower(), module
