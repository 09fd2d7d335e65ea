"""`aigo-apply init` through the real command line: a valid starter named after its folder, never
over an existing file, and a bad --project refused before anything is written. The built wheel's
own `init`: tests/integration/test_wheel.py."""

from __future__ import annotations

from helpers.cli import run_cli


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
