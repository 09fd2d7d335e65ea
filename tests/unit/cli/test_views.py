"""Commands as requests, one view per output format: every request is a frozen
keyword-only value, every -o value has its one view, and no use case (app/) nor command (cli/)
asks which format it prints: only cli/views.view_for reads the format, once."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import json
from pathlib import Path

import click
import pytest

import aigo_apply
from aigo_apply.cli.views import FORMATS, GithubView, JsonView, MarkdownView, TextView, view_for
from aigo_apply.errors import ConfigInvalid, Problem
from aigo_apply.plan.host_checks import Check
from aigo_apply.plan.markdown import plan_markdown
from aigo_apply.plan.text import plan_json, plan_text
from aigo_apply.plan.types import Action, Plan
from aigo_apply.platforms.views import Readiness

PACKAGE = Path(aigo_apply.__file__).parent
# where a format may be named: the one choice, and validate's usage rule (-o json is for one file)
ASKS_ALLOWED = {("cli/views.py", "view_for"), ("cli/check_commands.py", "validate")}


def _requests_the_commands_build() -> dict[str, type]:
    """Every request a click command hands to a use case: each name ending in Request or Command that
    a module of cli/ imports from app/, platforms/ or edit/ (platforms/requests.py's, and those defined beside their use case)."""
    found = {}
    for path in (PACKAGE / "cli").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                ("aigo_apply.app.", "aigo_apply.platforms.", "aigo_apply.edit.")
            ):
                for alias in node.names:
                    if alias.name.endswith(("Request", "Command")):
                        found[alias.name] = getattr(importlib.import_module(node.module), alias.name)
    return found


def test_every_request_is_frozen_and_keyword_only():
    made = _requests_the_commands_build()
    assert len(made) >= 12, sorted(made)
    for name, request in made.items():
        assert dataclasses.is_dataclass(request), name
        assert request.__dataclass_params__.frozen, name
        assert all(f.kw_only for f in dataclasses.fields(request)), name


def test_each_format_has_its_one_view_and_the_console_asks_as_told():
    kinds = {output: type(view_for(output)) for output in FORMATS}
    assert kinds == {"text": TextView, "json": JsonView, "markdown": MarkdownView, "github": GithubView}
    ask = lambda question: True
    assert view_for("json", ask).confirm is ask and view_for("text").confirm is None


def _asks_for_a_format(tree: ast.AST) -> list[tuple[str, int]]:
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Compare):
                names = [n for n in [node.left, *node.comparators] if isinstance(n, (ast.Name, ast.Attribute))]
                if any((n.id if isinstance(n, ast.Name) else n.attr) == "output" for n in names):
                    found.append((fn.name, node.lineno))
    return found


def test_no_use_case_or_command_asks_which_format_it_prints():
    asking = []
    for layer in ("app", "cli", "apply", "kube"):
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            rel = str(path.relative_to(PACKAGE))
            for function, line in _asks_for_a_format(ast.parse(path.read_text())):
                if (rel, function) not in ASKS_ALLOWED:
                    asking.append(f"{rel}:{line} ({function})")
    assert not asking, asking


def test_the_plan_views_wrap_the_plan_renderers(capsys):
    plan = Plan("lab", "aigo.yaml", "sha256:" + "0" * 64, (Action("model.a", "create", ("no container",), model="a"),))
    for view, expected in (
        (TextView(), plan_text(plan)),
        (JsonView(), plan_json(plan)),
        (MarkdownView(), plan_markdown(plan).rstrip("\n")),
    ):
        view.plan(plan, show_diff=False)
        view.plan_saved(Path("plan.json"))
        out = capsys.readouterr().out
        assert out.startswith(click.unstyle(expected) + "\n")  # (no colours off a terminal)
        assert ("Saved the plan to plan.json" in out) is (type(view) is TextView)


def test_validate_views_say_a_problem_each_in_their_format(capsys):
    problem = ConfigInvalid("aigo.yaml", [Problem(3, 5, "models.a.gpus", "is not valid")])
    with pytest.raises(ConfigInvalid):
        TextView().invalid(problem, alone=True)  # the error boundary says it
    TextView().invalid(problem, alone=False)
    assert "models.a.gpus" in capsys.readouterr().err
    JsonView().invalid(problem, alone=True)
    assert json.loads(capsys.readouterr().out)["valid"] is False
    GithubView().invalid(problem, alone=True)
    assert capsys.readouterr().out.startswith("::error file=aigo.yaml,line=3")


def test_readiness_views(capsys):
    report = Readiness(
        "lab",
        "vllm",
        {"image_reference": "vllm/vllm-openai:v0.31.0", "tag_overridden": False},
        (Check("docker.engine", "ok", "Docker 27"), Check("nvidia.gpus", "blocking", "no GPU", "add one")),
        [],
    )
    assert report.blocked
    TextView().readiness(report)
    out = capsys.readouterr().out
    assert "image: vllm/vllm-openai:v0.31.0" in out and "fix: add one" in out
    JsonView().readiness(report)
    assert json.loads(capsys.readouterr().out)["blocked"] is True
