"""`aigo-apply init`, and the built wheel: schemas/ and templates/ ship inside it, and an install
of it in a fresh virtual environment validates an example and writes a starter file."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile

import pytest

from helpers.cli import run_cli
from helpers.paths import EXAMPLES, ROOT


def test_init_writes_a_valid_starter_and_refuses_to_overwrite(tmp_path):
    folder = tmp_path / "My GPU Box"
    folder.mkdir()
    first = run_cli("init", cwd=folder)
    assert first.returncode == 0, first.stderr
    assert run_cli("validate", cwd=folder).stdout.strip() == "aigo.yaml: valid (project 'my-gpu-box', 1 model)"
    again = run_cli("init", cwd=folder)
    assert again.returncode == 1 and "already exists" in again.stderr
    bad = run_cli("init", "--force", "--project", "BAD NAME", cwd=folder)
    assert bad.returncode == 64 and "--project 'BAD NAME'" in bad.stderr
    assert "project: my-gpu-box" in (folder / "aigo.yaml").read_text()  # untouched by the refused run


@pytest.mark.slow
def test_wheel_ships_data_and_works_in_a_fresh_venv(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    wheel = next(dist.glob("aigo_apply-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for required in (
        "aigo_apply/_data/schemas/aigo.schema.json",
        "aigo_apply/_data/schemas/plan.schema.json",
        "aigo_apply/_data/schemas/vllm-v0.31.0.json",
        "aigo_apply/_data/templates/aigo.yaml.j2",
    ):
        assert required in names
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    pip = subprocess.run(
        [env_dir / "bin" / "python", "-m", "pip", "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert pip.returncode == 0, pip.stderr
    work = tmp_path / "elsewhere"  # away from the checkout, so only the installed copy can answer
    work.mkdir()
    exe = env_dir / "bin" / "aigo-apply"
    example = EXAMPLES / "dgx-spark-nemotron.yaml"
    result = subprocess.run([exe, "validate", "-f", str(example)], capture_output=True, text=True, cwd=work)
    assert result.returncode == 0, result.stderr
    assert subprocess.run([exe, "init"], capture_output=True, cwd=work).returncode == 0
    result = subprocess.run([exe, "validate"], capture_output=True, text=True, cwd=work)
    assert result.returncode == 0 and "valid" in result.stdout
    located = subprocess.run(
        [env_dir / "bin" / "python", "-c", "from aigo_apply.resources import data_dir; print(data_dir('schemas'))"],
        capture_output=True,
        text=True,
        cwd=work,
    ).stdout
    assert "_data" in located and str(ROOT) not in located
