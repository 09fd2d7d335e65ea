"""The command line's own inputs and everything it prints, against a hostile user or file:
- text from the command line, a config, Docker or a saved plan is shown with every control and
  format character escaped (no escape sequence, BEL, backspace, CR, bidi override reaches the
  terminal), in errors, in the plan's text and in JSON lines;
- `plan --out FILE` never writes through a symbolic link or into a FIFO or device, and replaces
  the file atomically (mode 0644, or the file's own);
- `-f ''`, an empty PLANFILE or --out, a --target that is no alias and an unknown
  --ignore-readiness id are usage errors (64), never silently something else;
- the readiness check ids --ignore-readiness accepts are exactly the ones the code makes."""

from __future__ import annotations

import ast
import json
import os
import re
import stat
from pathlib import Path

import pytest

import aigo_apply
from aigo_apply.cli.reporter import JsonReporter, TextReporter
from aigo_apply.errors import UsageProblem
from aigo_apply.plan.plan_file import READINESS_CHECK_IDS
from aigo_apply.plan.planner import build_plan
from aigo_apply.plan.text import plan_text, printable, shown
from aigo_apply.plan.types import Action, Blocker, Change, Plan

from helpers.configs import write_config
from helpers.planner_inputs import CONFIG, desired, observed, running

HOSTILE = [
    "\x1b[2J\x1b[H",  # clear the screen
    "\x1b]0;owned\x07",  # set the window title, BEL
    "ok\rfake",  # carriage return over the line
    "abc\b\b\bxyz",  # backspaces
    "\u202eevil\u202c",  # bidi override
    "\x9b31m",  # C1 CSI
    "a\nerror: all fine",  # a forged line
    "\ud800",  # lone surrogate: cannot even be encoded
    "\x00\x7f\u2028\u200b\ufeff",
]
SGR = re.compile(r"\x1b\[[0-9;]*m")


def _clean(text: str, sgr: bool = False) -> bool:
    """Nothing a terminal acts on but newlines (and, with `sgr`, this program's colour codes)."""
    return all(c.isprintable() or c == "\n" for c in (SGR.sub("", text) if sgr else text))


def _main(capsys, *args):
    from aigo_apply.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out = capsys.readouterr()
    return exit_info.value.code, out.out, out.err


@pytest.fixture
def config(tmp_path):
    return write_config(tmp_path, CONFIG)


@pytest.fixture
def planned(tmp_path, monkeypatch):
    """`plan` without Docker: make_plan returns a real plan and records the request it got."""
    import aigo_apply.platforms.docker.planning

    d = desired(tmp_path)
    seen = observed(d, running(d)[:1], downloaded=False)
    requests = []

    def make_plan(platform, request=None):
        requests.append(request)
        return build_plan(d, seen, None, request)

    monkeypatch.setattr(aigo_apply.platforms.docker.planning, "make_plan", make_plan)
    return requests


# --- escapes -------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", HOSTILE)
def test_printable_escapes_every_control_and_format_character(text):
    out = printable(text, keep="")
    assert out.isprintable() and out.encode("utf-8")
    assert printable("plain text, ünïcode, 中文 😀") == "plain text, ünïcode, 中文 😀"
    assert shown(text) == repr(text) and shown("aigo.yaml") == "aigo.yaml"


def test_only_our_own_colour_codes_pass():
    assert printable("\x1b[1mbold\x1b[0m\x1b]8;;http://x\x1b\\", colours=True) == (
        "\x1b[1mbold\x1b[0m\\x1b]8;;http://x\\x1b\\"
    )


@pytest.mark.parametrize("text", HOSTILE)
def test_a_plan_shows_untrusted_text_escaped(tmp_path, capsys, text):
    plan = Plan(
        text,
        f"/srv/{text}.yaml",
        "sha256:" + "0" * 64,
        (
            Action(
                f"model.{text}",
                "create",
                (f"because {text}",),
                (Change(text, text, {"k": text}, "recreate"),),
                container=text,
                notes=(text,),
                diff=f"+{text}\n-{text}",
            ),
            Action(f"model.{text}", "noop", (), model=text, notes=(text,)),
        ),
        (Blocker(text, text, text, text),),
        (text,),
    )
    rendered = plan_text(plan, show_diff=True)
    assert _clean(rendered, sgr=True), repr(rendered)
    assert "error: all fine" not in rendered.split("\n")  # no forged line of its own
    TextReporter().show_plan(plan)
    assert _clean(capsys.readouterr().out, sgr=True)
    no_changes = plan_text(Plan(text, text, "sha256:" + "0" * 64, (plan.actions[1],)))
    assert _clean(no_changes, sgr=True), repr(no_changes)


@pytest.mark.parametrize("text", HOSTILE)
def test_json_lines_carry_untrusted_text_as_escapes(text):
    import io

    stream = io.StringIO()
    JsonReporter(stream).event("step", address=text, message=text, nested={text: [text]})
    line = stream.getvalue()
    assert line.endswith("\n") and line[:-1].isprintable(), repr(line)
    record = json.loads(line)
    assert record["address"] == text and record["nested"] == {text: [text]}


@pytest.mark.parametrize("text", HOSTILE)
def test_reporter_lines_escape_engine_logs_and_names(capsys, text):
    reporter = TextReporter()
    reporter.event("step", address=f"model.{text}", message=text, outcome="failed")
    reporter.event("log_tail", address="model.a", lines=[text, text])
    reporter.event("waiting", address="model.a", elapsed=3, stage="loading", log=text)
    reporter.say(text, err=True, head="Apply failed: ", colour="red")
    out = capsys.readouterr()
    assert _clean(out.out, sgr=True) and _clean(out.err, sgr=True), (out.out, out.err)


@pytest.mark.parametrize("text", HOSTILE[:6])
def test_errors_quote_command_line_text_escaped(config, capsys, text):
    code, _, err = _main(capsys, "render", f"x{text}", "-f", str(config))
    assert code == 64 and "no model " in err and _clean(err), repr(err)
    code, _, err = _main(capsys, "validate", "-f", f"/nonexistent/{text}.yaml")
    assert code == 1 and "no such file" in err and _clean(err), repr(err)
    code, _, err = _main(capsys, "apply", f"/nonexistent/{text}.json")
    assert code == 1 and "cannot read the plan file" in err and _clean(err), repr(err)
    code, _, err = _main(capsys, f"{text}nope")
    assert code == 64 and "No such command" in err and _clean(err), repr(err)


def test_the_error_boundary_escapes_any_message(capsys, planned, monkeypatch, config):
    """A message made anywhere (here the planner's --target refusal) cannot reach the terminal raw."""
    import aigo_apply.platforms.docker.planning

    def refuse(platform, request=None):
        raise UsageProblem("--target x: no model '\x1b[2J\x07' in \u202eaigo.yaml")

    monkeypatch.setattr(aigo_apply.platforms.docker.planning, "make_plan", refuse)
    code, _, err = _main(capsys, "plan", "-f", str(config))
    assert code == 64 and "\\x1b[2J\\x07" in err and "\\u202e" in err and _clean(err), repr(err)


def test_a_saved_plan_s_strings_are_refused_or_shown_escaped(tmp_path, capsys, monkeypatch):
    import aigo_apply.platforms.docker.platform
    from aigo_apply.app.saved_plan import save_plan

    monkeypatch.setattr(aigo_apply.platforms.docker.platform, "_docker", lambda: pytest.fail("Docker was reached"))
    d = desired(tmp_path)
    path = tmp_path / "plan.json"
    save_plan(build_plan(d, observed(d, running(d)[:1], downloaded=False)), path)
    original = path.read_text()
    for key, value in (("project", "\x1b[2J"), ("config_file", "/tmp/\x1b[2J.yaml"), ("fingerprint", "\x07")):
        data = json.loads(original)
        data[key] = value
        path.write_text(json.dumps(data))
        code, _, err = _main(capsys, "apply", str(path))
        assert code == 1 and f"{key} is the string" in err and _clean(err), repr(err)
    data = json.loads(original)
    data["config_file"] = "/srv/\u202eaigo.yaml"
    path.write_text(json.dumps(data))
    code, _, err = _main(capsys, "apply", str(path))
    assert code == 1 and "\\u202e" in err and _clean(err), repr(err)


# --- options ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command", [["validate"], ["plan"], ["apply"], ["status"], ["render", "a"], ["destroy"], ["readiness"], ["watch"]]
)
def test_an_empty_config_path_is_a_usage_error(capsys, command, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    write_config(tmp_path, CONFIG)  # ./aigo.yaml exists: an empty -f must not quietly mean it
    code, out, err = _main(capsys, *command, "-f", "")
    assert code == 64 and "Invalid value for '-f' / '--file': is empty" in err, err
    code, out, err = _main(capsys, *command, "-f", "aigo\x00.yaml")
    assert code == 64 and "holds a NUL character" in err, err


def test_an_empty_planfile_or_out_is_a_usage_error(capsys, planned, config):
    code, _, err = _main(capsys, "apply", "")
    assert code == 64 and "is empty" in err, err
    code, _, err = _main(capsys, "plan", "-f", str(config), "--out", "")
    assert code == 64 and "is empty" in err and planned == [], err


@pytest.mark.parametrize("value", ["\x1b[31mred", "a\nb", "../x", "", "-x", "a b", "x" * 65, "ａ"])
@pytest.mark.parametrize("option", ["--target", "--replace"])
@pytest.mark.parametrize("command", ["plan", "apply"])
def test_a_target_or_replace_that_is_no_alias_is_a_usage_error(capsys, planned, config, command, option, value):
    code, _, err = _main(capsys, command, "-f", str(config), f"{option}={value}")
    assert code == 64 and "is not a model alias" in err and _clean(err), repr(err)
    assert planned == []


@pytest.mark.parametrize("value", ["everything", "nvidia", "conflict.port", "gpu.fit ", "\x1b[2J", ""])
@pytest.mark.parametrize("command", ["plan", "apply"])
def test_an_unknown_readiness_id_is_refused_with_the_known_ones(capsys, planned, config, command, value):
    code, _, err = _main(capsys, command, "-f", str(config), "--ignore-readiness", value)
    assert code == 64 and "is not a readiness check id; the ids are docker.engine, " in err, err
    assert "gpu.fit" in err and _clean(err) and planned == []


def test_a_known_readiness_id_is_accepted(capsys, planned, config):
    code, _, err = _main(capsys, "plan", "-f", str(config), "--ignore-readiness", "gpu.fit", "--target", "beta")
    assert code == 0, err
    assert planned[0].ignore == frozenset({"gpu.fit"}) and planned[0].target == frozenset({"beta"})


def _check_ids_in_code() -> tuple[set[str], set[str]]:
    """(ids given to Check(...) as strings or module constants, prefixes of ids built with f-strings)."""
    fixed, prefixes = set(), set()
    for path in Path(aigo_apply.__file__).parent.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = {
            t.id: node.value.value
            for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            for t in node.targets
            if isinstance(t, ast.Name)
        }
        for node in ast.walk(tree):
            name = getattr(node, "func", None)
            if not (isinstance(node, ast.Call) and getattr(name, "id", getattr(name, "attr", None)) == "Check"):
                continue
            first = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "id"), None)
            if isinstance(first, ast.Constant):
                fixed.add(first.value)
            elif isinstance(first, ast.Name) and first.id in constants:
                fixed.add(constants[first.id])
            elif isinstance(first, ast.Name):  # a variable: the ids it can hold are assigned in the function
                for assign in ast.walk(tree):
                    if isinstance(assign, ast.Assign) and any(getattr(t, "id", "") == first.id for t in assign.targets):
                        for value in ast.walk(assign.value):
                            text = getattr(value, "value", None)
                            if (
                                isinstance(value, ast.Constant)
                                and isinstance(text, str)
                                and "." in text
                                and not text.endswith(".")
                            ):
                                fixed.add(value.value)
                            if isinstance(value, ast.JoinedStr) and isinstance(value.values[0], ast.Constant):
                                prefixes.add(value.values[0].value)
            elif isinstance(first, ast.JoinedStr) and isinstance(first.values[0], ast.Constant):
                prefixes.add(first.values[0].value)
    return fixed, prefixes


def test_the_known_readiness_ids_are_the_ones_the_code_makes():
    fixed, prefixes = _check_ids_in_code()
    assert fixed, "no Check(...) found"
    assert fixed <= set(READINESS_CHECK_IDS), fixed - set(READINESS_CHECK_IDS)
    made = fixed | {i for i in READINESS_CHECK_IDS if any(i.startswith(p) for p in prefixes)}
    assert set(READINESS_CHECK_IDS) <= made, set(READINESS_CHECK_IDS) - made
    assert "nvidia.driver.sglang" in READINESS_CHECK_IDS and "nvidia.driver.vllm" not in READINESS_CHECK_IDS


# --- plan --out -----------------------------------------------------------------------------------


def _plan_out(capsys, config, out):
    return _main(capsys, "plan", "-f", str(config), "--out", str(out))


def test_out_writes_a_new_plan_0644_atomically(capsys, planned, config, tmp_path):
    out = tmp_path / "saved" / "plan.json"
    out.parent.mkdir()
    code, stdout, err = _plan_out(capsys, config, out)
    assert code == 0 and f"Saved the plan to {out}" in stdout, err
    assert stat.S_IMODE(out.stat().st_mode) == 0o644 and json.loads(out.read_text())["format_version"] == 1
    assert sorted(p.name for p in out.parent.iterdir()) == ["plan.json"]  # no temporary file left


def test_out_replaces_a_file_and_keeps_its_mode(capsys, planned, config, tmp_path):
    out = tmp_path / "plan.json"
    out.write_text("old")
    out.chmod(0o600)
    twin = tmp_path / "twin.json"
    os.link(out, twin)  # a hard link is not written through: the file is replaced, not rewritten
    code, _, err = _plan_out(capsys, config, out)
    assert code == 0, err
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and json.loads(out.read_text())["project"] == "lab"
    assert twin.read_text() == "old"


def test_out_never_writes_through_a_symbolic_link(capsys, planned, config, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    link = tmp_path / "plan.json"
    link.symlink_to(victim)
    code, _, err = _plan_out(capsys, config, link)
    assert code == 1 and "is a symbolic link (it points to " in err and "never writes through one" in err, err
    assert victim.read_text() == "keep me" and link.is_symlink()
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "created-elsewhere")
    code, _, err = _plan_out(capsys, config, dangling)
    assert code == 1 and "is a symbolic link" in err
    assert not (tmp_path / "created-elsewhere").exists()


def test_out_refuses_a_fifo_or_device_without_blocking(capsys, planned, config, tmp_path):
    fifo = tmp_path / "plan.fifo"
    os.mkfifo(fifo)
    code, _, err = _plan_out(capsys, config, fifo)
    assert code == 1 and "is a FIFO (named pipe), not a regular file" in err and "choose a file's path" in err, err
    code, _, err = _plan_out(capsys, config, "/dev/null")
    assert code == 1 and "is a device, not a regular file" in err, err
    assert Path("/dev/null").is_char_device()


def test_out_in_a_missing_folder_is_a_clear_error(capsys, planned, config, tmp_path):
    code, _, err = _plan_out(capsys, config, tmp_path / "no" / "plan.json")
    assert code == 1 and "cannot write the plan file: No such file or directory" in err, err
    assert "Traceback" not in err


def test_a_plan_for_a_config_name_a_plan_file_refuses_is_not_saved(capsys, planned, config, tmp_path, monkeypatch):
    """apply PLANFILE would refuse it (config_file must be printable): refused when saving, with the fix."""
    import dataclasses

    import aigo_apply.platforms.docker.planning

    make = aigo_apply.platforms.docker.planning.make_plan
    monkeypatch.setattr(
        aigo_apply.platforms.docker.planning,
        "make_plan",
        lambda *a, **k: dataclasses.replace(make(*a, **k), config_file=str(tmp_path / "a\x1b[2J.yaml")),
    )
    out = tmp_path / "plan.json"
    code, stdout, err = _plan_out(capsys, config, out)
    assert code == 1 and "holds characters a saved plan refuses; rename the file" in err, err
    assert not out.exists() and _clean(err) and _clean(stdout, sgr=True)
