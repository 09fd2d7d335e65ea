"""Shell completion through the real entry point in a child process: click's own mechanism
(`_AIGO_APPLY_COMPLETE=bash_source aigo-apply`, and the completion requests the script then makes)
and `aigo-apply completion SHELL`, which prints the same script; a bash that sources it completes
commands and options. (The guard on standard output once refused click's bytes: an internal error, exit 3.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from helpers.cli import run_cli

SHELLS = ("bash", "zsh", "fish")


def _complete(instruction: str, **env: str) -> subprocess.CompletedProcess:
    return run_cli(env={"_AIGO_APPLY_COMPLETE": instruction, **env})


@pytest.mark.parametrize("shell", SHELLS)
def test_click_completion_variable_prints_the_script_and_completion_prints_the_same(shell):
    sourced = _complete(f"{shell}_source")
    assert sourced.returncode == 0, sourced.stderr
    assert sourced.stderr == "" and "_AIGO_APPLY_COMPLETE" in sourced.stdout and "internal error" not in sourced.stdout
    printed = run_cli("completion", shell)
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.strip() == sourced.stdout.strip()


def test_completion_requests_answer_commands_subcommands_options_and_choices():
    def bash(*words: str) -> list[str]:
        done = _complete("bash_complete", COMP_WORDS=" ".join(("aigo-apply", *words)), COMP_CWORD=str(len(words)))
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    assert "plain,apply" in bash("ap")
    assert {"plain,inspect", "plain,pull", "plain,tag"} <= set(bash("image", ""))
    assert "plain,--tail" in bash("logs", "--t")
    assert {"plain,zsh"} == set(bash("completion", "z"))
    zsh = _complete("zsh_complete", COMP_WORDS="aigo-apply val", COMP_CWORD="1")
    assert zsh.returncode == 0 and "validate" in zsh.stdout.split("\n")
    fish = _complete("fish_complete", COMP_WORDS="aigo-apply des", COMP_CWORD="des")
    assert fish.returncode == 0 and fish.stdout.startswith("plain,destroy")


def test_an_unknown_shell_is_a_usage_error():
    done = run_cli("completion", "tcsh")
    assert done.returncode == 64 and "'tcsh' is not one of 'bash', 'zsh', 'fish'" in done.stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_sourcing_the_printed_script_completes_through_the_command(tmp_path):
    program = tmp_path / "aigo-apply"
    program.write_text(f'#!/bin/sh\nexec {sys.executable} -m aigo_apply "$@"\n')
    program.chmod(0o755)
    script = (
        'eval "$(aigo-apply completion bash)"\n'
        "COMP_WORDS=(aigo-apply dest); COMP_CWORD=1\n"
        "_aigo_apply_completion aigo-apply\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    env.pop("_AIGO_APPLY_COMPLETE", None)
    done = subprocess.run(["bash", "--norc", "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["destroy"]
