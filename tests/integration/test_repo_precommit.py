"""The pre-commit hooks in .pre-commit-hooks.yaml, run by pre-commit itself (`pre-commit try-repo`)
against a scratch config repository: validate passes a valid file and fails an invalid one; fmt
rewrites a file out of layout (so the hook fails once) and then passes. The hook repository is a
scratch git copy of this checkout's package files, so the test sees the working tree as it is.
pre-commit installs the package into its own environment (pip, from the network): slow. Without
pre-commit the test is skipped on a developer's machine and fails in CI (CI=true)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.paths import ROOT

pytestmark = pytest.mark.slow
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@e.x",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@e.x",
}
VALID = "version: 1\nproject: lab\nmodels:\n  m:\n    source: {repo: org/m}\n    context_length: 8\n    gpus: none\n"
MESSY = "project: lab   # p\nversion: 1\nmodels:\n    m:\n        gpus: none\n        source: {repo: org/m}\n        context_length: 8\n"
INVALID = VALID.replace("gpus: none", "gpus: sometimes")


def _pre_commit() -> str:
    found = shutil.which("pre-commit") or str(Path(sys.executable).parent / "pre-commit")
    if not Path(found).exists():
        if os.environ.get("CI"):
            pytest.fail("pre-commit must be installed in CI (pip install pre-commit)")
        pytest.skip("pre-commit is not installed (pip install pre-commit)")
    return found


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env={**os.environ, **GIT_ENV})


@pytest.fixture(scope="module")
def hooks(tmp_path_factory):
    """(pre-commit, hook repo, its PRE_COMMIT_HOME): a committed copy of what the package build needs."""
    exe = _pre_commit()
    repo = tmp_path_factory.mktemp("hook-repo")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "_data")
    for name in ("aigo_apply", "schemas", "templates"):
        shutil.copytree(ROOT / name, repo / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml"):
        shutil.copy2(ROOT / name, repo / name)
    _git("init", "-q", cwd=repo)
    _git("add", "-A", cwd=repo)
    _git("commit", "-q", "-m", "hooks", cwd=repo)
    return exe, repo, tmp_path_factory.mktemp("pre-commit-home")


def _config_repo(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    _git("init", "-q", cwd=tmp_path)
    _git("add", "-A", cwd=tmp_path)
    return tmp_path


def _try(hooks, cwd: Path, hook: str, *args: str) -> subprocess.CompletedProcess:
    exe, repo, home = hooks
    env = {**os.environ, **GIT_ENV, "PRE_COMMIT_HOME": str(home)}
    env.pop("AIGO_FILE", None)
    return subprocess.run(
        [exe, "try-repo", str(repo), hook, "--color", "never", *args],
        cwd=cwd, capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip


def test_validate_hook_passes_a_valid_file_and_fails_an_invalid_one(hooks, tmp_path):
    cfg = _config_repo(
        tmp_path, {"aigo.yaml": VALID, "site/aigo-gpu2.yml": VALID, "bad/aigo.yaml": INVALID, "other.yaml": "x: [\n"}
    )
    good = _try(hooks, cfg, "aigo-apply-validate", "--files", "aigo.yaml", "site/aigo-gpu2.yml", "other.yaml")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Passed" in good.stdout
    bad = _try(hooks, cfg, "aigo-apply-validate", "--all-files")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "bad/aigo.yaml:7:" in bad.stdout and "models.m.gpus" in bad.stdout
    assert "other.yaml" not in bad.stdout  # not an aigo*.yaml: not the hook's business


def test_fmt_hook_rewrites_a_file_out_of_layout_then_passes(hooks, tmp_path):
    cfg = _config_repo(tmp_path, {"aigo.yaml": MESSY})
    first = _try(hooks, cfg, "aigo-apply-fmt", "--all-files")
    assert first.returncode == 1 and "files were modified by this hook" in first.stdout, first.stdout + first.stderr
    assert (cfg / "aigo.yaml").read_text().startswith("version: 1\nproject: lab   # p\nmodels:\n  m:\n    source:")
    _git("add", "-A", cwd=cfg)
    second = _try(hooks, cfg, "aigo-apply-fmt", "--all-files")
    assert second.returncode == 0, second.stdout + second.stderr
