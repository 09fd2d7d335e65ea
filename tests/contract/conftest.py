"""Fixtures for the contract tests: the real vLLM 0.31.0, installed by scripts/setup-vllm-venv in
.venv-vllm, checks what aigo-apply writes, and vLLM 0.34.0 (scripts/setup-vllm-overlay: .venv-vllm-0.34.0,
an overlay on .venv-vllm) what it writes for image_tag v0.34.0. vLLM runs only in those venvs' Python, as
a subprocess (scripts/vllm_contract.py, scripts/vllm_facts.py); this process never imports it. SGLang 0.5.6's own
server-argument code checks the SGLang lines the same way (.venv-sglang, scripts/sglang_contract.py).
Every test here is marked `contract`. Without a venv they skip on a developer's machine and fail in CI
(CI=true)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers.paths import ROOT

HERE = Path(__file__).parent
SCRIPTS = ROOT / "scripts"
# release -> (its venv, the script that builds it)
VLLM_VENVS = {
    "0.31.0": (ROOT / ".venv-vllm", "scripts/setup-vllm-venv"),
    "0.34.0": (ROOT / ".venv-vllm-0.34.0", "scripts/setup-vllm-overlay"),
}
SGLANG_PYTHON = ROOT / ".venv-sglang" / "bin" / "python"
SGLANG_BUILT = ROOT / ".venv-sglang" / ".built"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under tests/contract/ `contract` (tryfirst: before -m selects by marker)."""
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.contract)


def vllm_python_of(release: str) -> Path:
    """A vLLM release's venv Python; a missing venv skips here and fails in CI, where these tests must run."""
    venv, script = VLLM_VENVS[release]
    if not (venv / ".built").exists():
        reason = f"the vLLM {release} venv is missing: run {script} (scripts/setup does)"
        if os.environ.get("CI"):
            pytest.fail(f"contract tests must run in CI: {reason}")
        pytest.skip(reason)
    return venv / "bin" / "python"


def runner(python: Path) -> Callable[..., str]:
    """Run one of scripts/ with a vLLM venv's Python and the given stdin; returns its stdout."""

    def run(script: str, stdin: str = "", *args: str) -> str:
        env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "VLLM_NO_USAGE_STATS": "1", "VLLM_LOGGING_LEVEL": "ERROR"}
        done = subprocess.run(
            [str(python), str(SCRIPTS / script), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            check=False,
        )
        assert done.returncode == 0, f"{script} failed:\n{done.stderr[-4000:]}"
        return done.stdout

    return run


def verdicts_of(run: Callable[..., str]) -> Callable[[list[list[str]]], list[dict]]:
    """Check many `vllm serve` argument lists in one vLLM start (its import takes about 12 s)."""

    def check(command_lines: list[list[str]]) -> list[dict]:
        return json.loads(run("vllm_contract.py", json.dumps(command_lines)))

    return check


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    """vLLM 0.31.0's Python (.venv-vllm)."""
    return vllm_python_of("0.31.0")


@pytest.fixture(scope="session")
def run_in_vllm(vllm_python: Path) -> Callable[..., str]:
    """Run one of scripts/ in the vLLM 0.31.0 venv with the given stdin; returns its stdout."""
    return runner(vllm_python)


@pytest.fixture(scope="session")
def vllm_verdicts(run_in_vllm: Callable[..., str]) -> Callable[[list[list[str]]], list[dict]]:
    """vLLM 0.31.0's verdicts on many `vllm serve` argument lists, from one start."""
    return verdicts_of(run_in_vllm)


@pytest.fixture(scope="session")
def run_in_vllm034() -> Callable[..., str]:
    """Run one of scripts/ in the vLLM 0.34.0 venv (.venv-vllm-0.34.0) with the given stdin."""
    return runner(vllm_python_of("0.34.0"))


@pytest.fixture(scope="session")
def vllm034_verdicts(run_in_vllm034: Callable[..., str]) -> Callable[[list[list[str]]], list[dict]]:
    """vLLM 0.34.0's verdicts on many `vllm serve` argument lists, from one start."""
    return verdicts_of(run_in_vllm034)


@pytest.fixture(scope="session")
def sglang_verdicts() -> Callable[[list[list[str]]], list[dict]]:
    """Check many `sglang.launch_server` argument lists in one SGLang start (scripts/sglang_contract.py)."""
    if not SGLANG_BUILT.exists():
        reason = "the SGLang 0.5.6 venv is missing: run scripts/setup-sglang-venv (scripts/setup does)"
        if os.environ.get("CI"):
            pytest.fail(f"contract tests must run in CI: {reason}")
        pytest.skip(reason)

    def check(command_lines: list[list[str]]) -> list[dict]:
        done = subprocess.run(
            [str(SGLANG_PYTHON), str(SCRIPTS / "sglang_contract.py")],
            input=json.dumps(command_lines),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, f"sglang_contract.py failed:\n{done.stderr[-4000:]}"
        return json.loads(done.stdout)

    return check
