"""`aigo-apply show PLANFILE` prints a plan `plan --out` saved exactly as `plan` printed it (text,
-o json, -o markdown), reading the file as one nobody reviewed (app/saved_plan.read_plan: the one
bounded reader), and refuses anything else with a message, never a traceback or a wait."""

from __future__ import annotations

import json
import os

import click
import pytest

from aigo_apply.app.saved_plan import save_plan
from aigo_apply.cli.main import main
from aigo_apply.plan.markdown import plan_markdown
from aigo_apply.plan.planner import build_plan
from aigo_apply.plan.text import plan_json, plan_text

from helpers.cli import run_cli
from helpers.planner_inputs import CONFIG, desired, observed


def _plan(tmp_path):
    before = observed(desired(tmp_path))
    changed = CONFIG.replace('image_tag: "1"', 'image_tag: "2"') + (
        "  gamma:\n    source: {path: /m/g}\n    context_length: 2k\n    gpus: none\n    env: {T: {from_env: T}}\n"
    )
    return build_plan(desired(tmp_path, changed), before)


def _show(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(["show", *args])
    out = capsys.readouterr()
    return done.value.code, out.out, out.err


def test_show_prints_a_saved_plan_as_plan_printed_it(tmp_path, capsys):
    plan = _plan(tmp_path)
    saved = tmp_path / "release.plan"
    save_plan(plan, saved)
    code, out, err = _show(capsys, str(saved))
    assert code == 0, err
    assert out == click.unstyle(plan_text(plan)) + "\n"
    assert "# model.gamma will be created" in out and "-/+ model.beta" in out
    code, out, _ = _show(capsys, str(saved), "-o", "json")
    assert code == 0 and json.loads(out) == json.loads(plan_json(plan)) and json.loads(out)["format_version"] == 1
    code, out, _ = _show(capsys, str(saved), "--output", "markdown")
    assert code == 0 and out == plan_markdown(plan).rstrip("\n") + "\n"
    code, out, _ = _show(capsys, str(saved), "--diff")
    assert code == 0 and out == click.unstyle(plan_text(plan, True)) + "\n"


def test_show_through_the_real_command_line(tmp_path):
    plan = _plan(tmp_path)
    saved = tmp_path / "release.plan"
    save_plan(plan, saved)
    done = run_cli("show", str(saved))
    assert done.returncode == 0 and done.stdout == click.unstyle(plan_text(plan)) + "\n", done.stderr
    assert "show PLANFILE" in run_cli("show", "--help").stdout.replace("[OPTIONS] ", "")


def test_show_refuses_what_is_not_a_saved_plan(tmp_path, capsys):
    plan = _plan(tmp_path)
    saved = tmp_path / "release.plan"
    save_plan(plan, saved)
    data = json.loads(saved.read_text())
    data["format_version"] = 2
    edited = tmp_path / "edited.plan"
    edited.write_text(json.dumps(data))
    fifo = tmp_path / "fifo.plan"
    os.mkfifo(fifo)
    cases = {
        str(tmp_path / "aigo.yaml"): "not a JSON plan file",
        str(edited): "format_version",
        str(fifo): "is not a regular file",
        str(tmp_path / "missing.plan"): "cannot read the plan file",
    }
    for path, words in cases.items():
        code, out, err = _show(capsys, path)
        assert code == 1 and out == "" and words in err and "Traceback" not in err, (path, err)
    code, _, err = _show(capsys, str(tmp_path))
    assert code == 64 and "is a directory" in err
