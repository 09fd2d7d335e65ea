"""Collects the problems of one config file, each located at a key or a value of the source, so
that every rule reports where (line, column, path in the document) as well as what."""

from __future__ import annotations

from aigo_apply.config.doc_path import dotted
from aigo_apply.config.yaml_source import Path_, Source
from aigo_apply.errors import Problem


class Finder:
    """Collects problems, locating each at a key or a value of the source."""

    def __init__(self, source: Source):
        self.source = source
        self.problems: list[Problem] = []

    def at_key(self, path: Path_, message: str) -> None:
        line, col = self.source.marks.of_key(path)
        self.problems.append(Problem(line, col, dotted(path), message, self.source.file))

    def at_value(self, path: Path_, message: str) -> None:
        line, col = self.source.marks.of_value(path)
        self.problems.append(Problem(line, col, dotted(path), message, self.source.file))
