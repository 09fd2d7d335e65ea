"""Turns a path into a checked config: read YAML with positions, apply the schema and the
cross-field rules, and raise one ConfigInvalid that carries every problem found."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aigo_apply import checks, schema
from aigo_apply.defaults import DEFAULT_FILE, FILE_ENV
from aigo_apply.errors import ConfigInvalid
from aigo_apply.yaml_source import Marks, load


@dataclass(frozen=True)
class Config:
    """A file that passed validation: its data, where it lives, and where each value is written."""

    file: str
    base_dir: Path
    data: dict[str, Any]
    marks: Marks


def choose_file(option: str | None) -> str:
    """-f/--file wins, then $AIGO_FILE, then ./aigo.yaml."""
    return option or os.environ.get(FILE_ENV) or DEFAULT_FILE


def load_config(file: str) -> Config:
    path = Path(file).expanduser()
    source = load(path, file)
    problems = source.problems + schema.validate(source) + checks.check(source)
    if problems:
        raise ConfigInvalid(file, problems)
    return Config(file, path.resolve().parent, source.data, source.marks)
