"""A schema reference that travels: `init` writes `$schema=` as the published URL (when the schema's
`$id` is one) or as `aigo.schema.json` beside the file, with that copy; never this installation's
absolute path. `aigo-apply schema` prints the schema; `--write` copies it beside the config."""

from __future__ import annotations

import json
import os

import pytest
from test_repo_fmt import aigo

from aigo_apply.edit import starter
from aigo_apply.errors import UsageProblem

from helpers.cli import run_cli
from helpers.paths import ROOT

SCHEMA = (ROOT / "schemas" / "aigo.schema.json").read_text()


def test_init_writes_a_relative_reference_and_the_schema_beside_the_file(tmp_path):
    result = run_cli("init", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "aigo.yaml").read_text()
    assert text.splitlines()[0] == "# yaml-language-server: $schema=aigo.schema.json"
    assert "file://" not in text and str(ROOT) not in text
    assert (tmp_path / "aigo.schema.json").read_text() == SCHEMA
    assert aigo("fmt", "--check", cwd=tmp_path).returncode == 0  # the starter is already canonical
    (tmp_path / "aigo.schema.json").write_text("{}")  # an old copy is refreshed by --force
    assert run_cli("init", "--force", cwd=tmp_path).returncode == 0
    assert (tmp_path / "aigo.schema.json").read_text() == SCHEMA


def test_a_published_versioned_id_is_used_as_the_reference(monkeypatch, tmp_path):
    published = {**json.loads(SCHEMA), "$id": "https://example.org/aigo-apply/schemas/v1/aigo.schema.json"}
    monkeypatch.setattr(starter, "schema", lambda: published)
    starter.write_starter(tmp_path / "aigo.yaml", "lab")
    first = (tmp_path / "aigo.yaml").read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=https://example.org/aigo-apply/schemas/v1/aigo.schema.json"
    assert not (tmp_path / "aigo.schema.json").exists()
    assert starter.schema_reference("local") == "aigo.schema.json"


def test_the_url_reference_needs_a_published_schema(monkeypatch):
    monkeypatch.setattr(starter, "schema", lambda: {**json.loads(SCHEMA), "$id": "urn:aigo-apply:schema:aigo:1"})
    with pytest.raises(UsageProblem, match="no published URL"):
        starter.schema_reference("url")
    for bad in ("http://insecure.example/x.json", "https://a b", "https://x\n"):
        monkeypatch.setattr(starter, "schema", lambda bad=bad: {"$id": bad})
        assert starter.published_url() is None


def test_schema_prints_it_and_write_copies_it_beside_the_config(tmp_path):
    printed = aigo("schema", cwd=tmp_path)
    assert printed.returncode == 0 and printed.stdout == SCHEMA
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "aigo.yaml").write_text("version: 1\n")
    wrote = aigo("schema", "--write", "-f", "repo/aigo.yaml", cwd=tmp_path)
    assert wrote.returncode == 0, wrote.stderr
    assert (repo / "aigo.schema.json").read_text() == SCHEMA
    assert "# yaml-language-server: $schema=aigo.schema.json" in wrote.stdout  # the line to add
    (repo / "aigo.yaml").write_text("# yaml-language-server: $schema=aigo.schema.json\nversion: 1\n")
    again = aigo("schema", "--write", "-f", "repo/aigo.yaml", cwd=tmp_path)
    assert again.returncode == 0 and again.stdout.startswith("up to date:") and "first line" not in again.stdout
    assert sorted(p.name for p in repo.iterdir()) == ["aigo.schema.json", "aigo.yaml"]


def test_schema_write_refuses_a_symlink_or_other_file_at_the_target(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "aigo.schema.json").symlink_to(victim)
    result = aigo("schema", "--write", cwd=tmp_path)
    assert result.returncode == 1 and "symbolic link" in result.stderr and "Traceback" not in result.stderr
    assert victim.read_text() == "keep"
    os.unlink(tmp_path / "aigo.schema.json")
    os.mkfifo(tmp_path / "aigo.schema.json")
    result = aigo("schema", "--write", cwd=tmp_path)
    assert result.returncode == 1 and "not a regular file" in result.stderr
    missing = aigo("schema", "--write", "-f", "nowhere/aigo.yaml", cwd=tmp_path)
    assert missing.returncode == 1 and "no such folder" in missing.stderr
