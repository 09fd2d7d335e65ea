"""examples/ci/aigo-plan.yml, the GitHub workflow a config repo copies: still a workflow, each
`aigo-apply` line one the real command line parses, and aigo-apply installed from a file the config repo
holds (a wheel), never by a name no package index answers. Running its check job's steps on the built
wheel: tests/integration/test_wheel.py."""

from __future__ import annotations

import shlex

import click
import pytest
import yaml

from helpers.doc_blocks import command_words, parse
from helpers.paths import EXAMPLES

WORKFLOW = EXAMPLES / "ci" / "aigo-plan.yml"


def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def run_lines() -> list[tuple[str, str]]:
    return [
        (f"{job}: {step.get('name', step['run'].splitlines()[0])}", line)
        for job, spec in workflow()["jobs"].items()
        for step in spec["steps"]
        if "run" in step
        for line in step["run"].splitlines()
    ]


def test_it_is_a_workflow_run_on_pull_requests():
    data = workflow()
    assert "pull_request" in data[True]  # YAML 1.1 reads the key `on` as true
    for name, job in data["jobs"].items():
        assert job["runs-on"] and job["steps"], name
        for step in job["steps"]:
            assert ("uses" in step) != ("run" in step), f"{name}: a step runs a command or uses an action: {step}"


@pytest.mark.parametrize(("where", "line"), run_lines(), ids=lambda x: x if " " not in x else x[:40])
def test_every_aigo_apply_line_parses(where, line):
    for args in command_words(line):
        try:
            parse(args)
        except click.ClickException as exc:
            pytest.fail(f"{WORKFLOW.name}: {where}: aigo-apply {shlex.join(args)}: {exc.format_message()}")


def test_aigo_apply_is_installed_from_a_file_of_the_config_repo():
    """aigo-apply is on no package index: `pip install aigo-apply` fails on a runner. What the job
    installs must be a path (the wheel the config repo keeps, or a checkout), never a bare name."""
    installs = []
    for where, line in run_lines():
        words = shlex.split(line, comments=True)
        for n in range(len(words) - 1):
            if words[n] in ("pip", "pipx") and words[n + 1] == "install":
                targets = [w for w in words[n + 2 :] if not w.startswith("-")]
                installs.append((where, targets))
    assert installs, f"{WORKFLOW.name}: no step installs aigo-apply"
    for where, targets in installs:
        assert targets, where
        for target in targets:
            assert "/" in target and ("aigo_apply" in target or target.startswith(".")), (
                f"{WORKFLOW.name}: {where}: installs {target!r} by name; aigo-apply is on no index: install "
                "the wheel the config repo keeps (tools/aigo_apply-X.Y.Z-py3-none-any.whl)"
            )
