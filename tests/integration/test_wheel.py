"""The built wheel (minutes: an integration test, marked slow): schemas/ and templates/ ship inside
it, and an install of it in a fresh virtual environment validates an example and writes a starter
file. `init` from the checkout: tests/unit/cli/test_init.py."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile

import pytest

from helpers.paths import EXAMPLES, ROOT

pytestmark = pytest.mark.slow


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
    alone = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nor a checkout on the path
    exe = env_dir / "bin" / "aigo-apply"
    example = EXAMPLES / "dgx-spark-nemotron.yaml"
    result = subprocess.run([exe, "validate", "-f", str(example)], capture_output=True, text=True, cwd=work, env=alone)
    assert result.returncode == 0, result.stderr
    assert subprocess.run([exe, "init"], capture_output=True, cwd=work, env=alone).returncode == 0
    result = subprocess.run([exe, "validate"], capture_output=True, text=True, cwd=work, env=alone)
    assert result.returncode == 0 and "valid" in result.stdout
    located = subprocess.run(
        [env_dir / "bin" / "python", "-c", "from aigo_apply.resources import data_dir; print(data_dir('schemas'))"],
        capture_output=True,
        text=True,
        cwd=work,
        env=alone,
    ).stdout
    assert "_data" in located and str(ROOT) not in located
