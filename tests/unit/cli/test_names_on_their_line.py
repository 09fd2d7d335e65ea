"""A name from outside is shown on its line in text for people: a line break (LF, CR, a Unicode line
separator) in a file name given on the command line, a key of aigo.lock, or a name Docker, a cluster,
a download marker or an engine's log reports never starts a line of its own, whatever command prints
it (errors.shown_path and plan.text.printable escape it as `\\x0a`); and no line is a workflow command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aigo_apply.config.machine_text import is_command

from helpers.fake_docker import FakeEngine
from helpers.output import LINES, cli, printed

PIECES = ["##[group]", "::error::", " ::x", "'", '"', "$(id)", "`id`", "~", "\\", "\xa0", "\t"]
PIECES += ["\n", "\r", "\u2028", "\x85", "\x1b[2J", "\u202e", "\x00"]
HOSTILE_TEXT = st.lists(st.sampled_from(PIECES) | st.text(alphabet="abc019 .-/", max_size=4), min_size=1, max_size=5)
HOSTILE_TEXT = HOSTILE_TEXT.map("".join)

FORGED = "FORGED"
GOOD = "version: 1\nproject: lab\nmodels:\n  m: {source: {repo: org/m}, context_length: 4096, gpus: none}\n"
BAD = GOOD.replace("gpus: none", "gpus: sometimes")
COMMANDS = [
    ("validate", "-f", "F"), ("validate", "F", "G"), ("fmt", "--check", "F"), ("fmt", "F"), ("export", "m", "-f", "F"),
    ("render", "m", "-f", "F"), ("render", "m", "--as", "kubernetes", "-f", "F"), ("image", "tag", "vllm", "v9", "-f", "F"),
    ("schema", "--write", "-f", "F"), ("plan", "-o", "markdown", "-f", "F"), ("validate", "-f", "NOPE"),
    ("import", "D", "-f", "F"), ("export", "m", "-f", "F", "--out", "OUT"), ("init", "-f", "NEW"),
]  # fmt: skip


@pytest.mark.parametrize("content", [GOOD, BAD, None], ids=["valid", "invalid", "missing"])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
@pytest.mark.parametrize("cut", ["\n", "\r", "\u2028"], ids=repr)
def test_a_line_break_in_a_file_name_never_starts_a_line(tmp_path, monkeypatch, content, command, cut):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AIGO_FILE", raising=False)
    names = {k: f"{k.lower()}{cut}{FORGED} {k}.yaml" for k in ("F", "G", "NOPE", "OUT", "NEW")}
    names["D"] = f"d{cut}{FORGED}.baimodel"
    if content is not None:
        Path(names["F"]).write_text(content)
        Path(names["G"]).write_text(content)
        Path(names["D"]).write_text("format: 1\nalias: m2\nmodel: {source: {repo: org/m2}, context_length: 4096}\n")
    _, out, err = cli(*[names.get(a, a) for a in command])
    for line in LINES.split(out + err) + (out + err).split("\u2028") + (out + err).split("\x85"):
        assert not line.lstrip().startswith(FORGED), (line, out + err)


@pytest.mark.parametrize("section", ["images", "models"])
@pytest.mark.parametrize("cut", ["\n", "\r", "\u2028"], ids=repr)
def test_a_line_break_in_a_lock_key_never_starts_a_line(tmp_path, monkeypatch, section, cut):
    engine = FakeEngine(tmp_path / "docker.sock")  # plan reads Docker's three lists, then aigo.lock
    try:
        monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'docker.sock'}")
        monkeypatch.setenv("AIGO_STATE_DIR", str(tmp_path / "state"))
        monkeypatch.delenv("AIGO_FILE", raising=False)
        (tmp_path / "aigo.yaml").write_text(GOOD)
        lock = {"version": 1, "project": "lab", "images": {}, "models": {}, section: {f"x{cut}{FORGED}": "damaged"}}
        (tmp_path / "aigo.lock").write_text(json.dumps(lock))
        code, out, err = cli("plan", "-f", str(tmp_path / "aigo.yaml"))
    finally:
        engine.close()
    assert code == 1 and "aigo.lock" in err and f"{section}.x" in err, err
    for line in LINES.split(out + err) + (out + err).split("\u2028"):
        assert not line.lstrip().startswith(FORGED), (line, out + err)


@settings(max_examples=40, deadline=None)
@given(HOSTILE_TEXT)
def test_every_text_view_shows_a_name_on_its_line(text):
    """The text views of status, readiness, models list, image inspect, logs, bench and apply's lines:
    a name holding a line break never starts a line, and no line is a workflow command."""
    from aigo_apply.cli.views import TextView
    from aigo_apply.plan.host_checks import Check
    from aigo_apply.platforms.views import Readiness

    name = text + "\n" + FORGED
    image = {
        "engine": "vllm",
        "image_reference": name,
        "default_tag": name,
        "tag_overridden": True,
        "tag": name,
        "present": True,
        "id": name,
        "repo_digests": [name],
    }
    row = {"repo": name, "revision": name, "commit": name, "bytes": 1, "files": 1, "used_by": [name], "folder": name}
    view = TextView()
    shows = [
        lambda: view.status({"models": [{"name": name}]}, lambda r: "model " + r["models"][0]["name"]),
        lambda: view.readiness(
            Readiness(
                "lab",
                "vllm",
                {"image_reference": name, "tag_overridden": False},
                (Check("docker.engine", "warning", name, name),),
                [],
            )
        ),
        lambda: view.image(image),
        lambda: view.stored_models([row, {**row, "invalid": name}, {**row, "missing": True}]),
        lambda: view.log_line(name, name, prefixed=True),
        lambda: view.bench({"project": name, "models": [{"model": name, "error": name}]}),
        lambda: view.event("step", address=name, message="started"),  # (a message is the program's own lines)
        lambda: view.event("log_tail", address=name, lines=[name, name]),
    ]
    for show in shows:
        out, err = printed(show)
        for line in LINES.split(out + err):
            assert not is_command(line) and not line.lstrip().startswith(FORGED), (line, out + err)
