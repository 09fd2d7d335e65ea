"""The built package (minutes: an integration test, marked slow), made as an index would make it: the
sdist, then the wheel from the sdist. Both carry the LICENSE the metadata names; schemas/ and templates/
ship inside the wheel; and the wheel, installed in a fresh virtual environment by the install step of
examples/ci/aigo-plan.yml itself, runs that workflow's checks on a config repo, validates an example and
writes a starter file, away from the checkout. `init` from the checkout: tests/unit/cli/test_init.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile

import pytest
import yaml

from helpers.paths import EXAMPLES, ROOT

pytestmark = pytest.mark.slow
WORKFLOW = EXAMPLES / "ci" / "aigo-plan.yml"


def test_wheel_ships_data_and_works_in_a_fresh_venv(tmp_path):
    dist = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    wheel = next(dist.glob("aigo_apply-*.whl"))
    sdist = next(dist.glob("aigo_apply-*.tar.gz"))
    names = zipfile.ZipFile(wheel).namelist()
    for required in (
        "aigo_apply/_data/schemas/aigo.schema.json",
        "aigo_apply/_data/schemas/plan.schema.json",
        "aigo_apply/_data/schemas/vllm-v0.31.0.json",
        "aigo_apply/_data/templates/aigo.yaml.j2",
    ):
        assert required in names
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    info = next(n.rsplit("/", 1)[0] for n in names if n.endswith(".dist-info/METADATA"))
    assert zipfile.ZipFile(wheel).read(f"{info}/licenses/LICENSE").decode() == license_text
    metadata = zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode()
    assert "License-Expression: Apache-2.0" in metadata and "License-File: LICENSE" in metadata
    with tarfile.open(sdist) as archive:
        top = archive.getnames()[0].split("/", 1)[0]
        shipped = archive.extractfile(f"{top}/LICENSE")
        assert shipped is not None and shipped.read().decode() == license_text

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    repo = tmp_path / "config-repo"  # a config repo as examples/ci expects it: the wheel in tools/
    (repo / "tools").mkdir(parents=True)
    shutil.copy(wheel, repo / "tools")
    shutil.copy(EXAMPLES / "single-gpu.yaml", repo / "aigo.yaml")
    alone = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # no checkout on the path
    alone["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"  # as setup-python's `python`
    for step in yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))["jobs"]["check"]["steps"]:
        if "run" in step:  # install, validate, fmt: each as the runner's bash runs it
            ran = subprocess.run(
                ["bash", "-e", "-c", step["run"]], capture_output=True, text=True, cwd=repo, env=alone, timeout=600
            )
            assert ran.returncode == 0, f"{step.get('name', step['run'])}:\n{ran.stdout[-3000:]}{ran.stderr[-3000:]}"

    work = tmp_path / "elsewhere"  # away from the checkout, so only the installed copy can answer
    work.mkdir()
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
