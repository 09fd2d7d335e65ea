"""Output for reviews: `validate -o github` annotations (workflow commands that untrusted text cannot
end or add to) and `plan -o markdown` (a compact summary with the changes folded in <details>, every
name and reason inert as Markdown and HTML)."""

from __future__ import annotations

import re

from aigo_apply.config.annotations import command, escape_data, escape_property, file_error_line, problem_lines
from aigo_apply.errors import ConfigFileError, ConfigInvalid, Problem
from aigo_apply.observe.config_file import load_config
from aigo_apply.plan.markdown import MAX_CHARS, md, plan_markdown
from aigo_apply.plan.planner import build_plan
from aigo_apply.plan.types import Action, Blocker, Change, Plan

from helpers.planner_inputs import CONFIG, desired, observed

# -- validate -o github ---------------------------------------------------------------------------------


def test_escaping_follows_githubs_rules():
    assert escape_data("100% done\r\nnext") == "100%25 done%0D%0Anext"
    assert escape_property("a,b:c%\n") == "a%2Cb%3Ac%25%0A"
    assert escape_data("bell\x07 esc\x1b rtl\u202e") == "bell\\u0007 esc\\u001b rtl\\u202e"


def test_each_problem_is_an_error_on_its_line_and_column(tmp_path):
    path = tmp_path / "aigo.yaml"
    path.write_text(
        "version: 1\nproject: lab\nmodels:\n  m:\n    source: {repo: a/b}\n    context_length: 8\n    gpus: sometimes\n"
    )
    try:
        load_config(str(path))
    except ConfigInvalid as exc:
        lines = problem_lines(str(path), exc.problems)
    assert len(lines) == 1
    assert re.fullmatch(
        rf"::error file={re.escape(str(path))},line=7,col=\d+,title=aigo-apply validate::models\.m\.gpus: .+", lines[0]
    )


def test_untrusted_text_cannot_end_the_command_or_start_another():
    hostile = Problem(3, 4, "models.x", "bad value 'a\n::error file=evil::owned,%0A'", "dir,with:odd.yaml")
    (line,) = problem_lines("ignored", [hostile])
    assert "\n" not in line and "\r" not in line  # the runner reads commands only at the start of a line
    assert line.startswith("::error file=dir%2Cwith%3Aodd.yaml,line=3,col=4,title=aigo-apply validate::")
    assert line.endswith("bad value 'a%0A::error file=evil::owned,%250A'")


def test_a_file_that_is_not_yaml_gets_one_annotation():
    line = file_error_line(ConfigFileError("a.yaml", "YAML syntax error: found x", 5, 2))
    assert line == "::error file=a.yaml,line=5,col=2,title=aigo-apply validate::YAML syntax error: found x"
    assert file_error_line(ConfigFileError("a.yaml", "no such file")) == (
        "::error file=a.yaml,title=aigo-apply validate::no such file"
    )
    assert command("warning", "m", "f") == "::warning file=f,title=aigo-apply validate::m"


# -- plan -o markdown -----------------------------------------------------------------------------------


def test_markdown_has_the_summary_and_the_changes_folded(tmp_path):
    before = observed(desired(tmp_path))
    text = CONFIG.replace("tool_call_parser: hermes", "tool_call_parser: qwen3_coder")
    out = plan_markdown(build_plan(desired(tmp_path, text), before))
    assert out.startswith("### aigo-apply plan: project <code>")
    assert "**Plan:** 1 to replace; 2 unchanged." in out
    assert "<details><summary>1 change</summary>" in out and out.rstrip().endswith("</details>")
    assert "**model.beta** will be replaced (replace: vllm.tool&#95;call&#95;parser changed)" in out
    assert (
        "<code>vllm.tool&#95;call&#95;parser</code>: <code>&#34;hermes&#34;</code> &#8594; <code>&#34;qwen3&#95;coder&#34;</code>"
        in out
    )


def test_no_changes_is_one_line(tmp_path):
    state = desired(tmp_path)
    out = plan_markdown(build_plan(state, observed(state)))
    assert "**No changes.** The containers match the file (2 models)." in out and "<details>" not in out


def test_names_and_reasons_cannot_inject_markdown_or_html():
    evil = "<img src=x onerror=alert(1)> **bold** [link](http://e.x) @team `code` | ~~s~~ \n# h"
    plan = Plan(
        project="lab",
        config_file="aigo.yaml",
        fingerprint="sha256:0",
        actions=(
            Action(
                address="model." + evil,
                kind="create",
                reasons=(evil,),
                changes=(Change("env.X", None, evil, "create"),),
            ),
        ),
        blockers=(Blocker("conflict.port", evil, evil),),
        warnings=(evil,),
    )
    out = plan_markdown(plan)
    for needle in ("<img", "**bold**", "[link]", "@team", "`code`", "|", "~~", "\n# h"):
        assert needle not in out
    assert "&#60;img src=x onerror=alert(1)&#62;" in out
    assert md("a\u202eb\x1b") == "a&#92;u202eb&#92;x1b"  # control and format characters shown, escaped


def test_a_huge_plan_stays_under_the_comment_limit():
    actions = tuple(Action(address=f"model.m{n}", kind="create", reasons=("x" * 500,), changes=()) for n in range(400))
    out = plan_markdown(Plan(project="lab", config_file="aigo.yaml", fingerprint="sha256:0", actions=actions))
    assert len(out) < MAX_CHARS and "more lines cut" in out and out.rstrip().endswith("</details>")
