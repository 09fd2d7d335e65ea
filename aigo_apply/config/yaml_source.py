"""Reads aigo.yaml into plain Python data plus the line and column of every key and value.

PyYAML's composer gives nodes with positions; we construct the values ourselves so that
duplicate keys become problems (PyYAML silently keeps the last one) and so that alias bombs
and oversized files stop with a clear error instead of eating the machine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from aigo_apply.config.doc_path import dotted
from aigo_apply.errors import ConfigFileError, Problem

# libyaml's parser when PyYAML has it (several times faster), the pure-Python one otherwise.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MAX_FILE_BYTES = 1024 * 1024
MAX_NODES = 100_000

Path_ = tuple[Any, ...]


@dataclass
class Marks:
    """Positions (1-based line, column) of keys and values, addressed by their path in the data."""

    keys: dict[Path_, tuple[int, int]] = field(default_factory=dict)
    values: dict[Path_, tuple[int, int]] = field(default_factory=dict)

    def of_key(self, path: Path_) -> tuple[int, int]:
        """Where the key at `path` is written, else the nearest written ancestor."""
        for n in range(len(path), 0, -1):
            if path[:n] in self.keys:
                return self.keys[path[:n]]
        return (1, 1)

    def of_value(self, path: Path_) -> tuple[int, int]:
        """Where the value at `path` starts, else where its key (or an ancestor) is."""
        return self.values.get(path) or self.of_key(path)


@dataclass
class Source:
    """One loaded YAML document: its data, where each part of it is written, and duplicate keys."""

    file: str
    data: Any
    marks: Marks
    problems: list[Problem]


def read_text(path: Path, display: str) -> str:
    """Read the file as UTF-8 text, turning every OS-level failure into one clear line."""
    try:
        with open(path, "rb") as f:  # never more than the limit (+1 to know it was exceeded): /dev/zero stays harmless
            raw = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ConfigFileError(
            display, "no such file; create it (see examples/) or choose another with -f/--file or AIGO_FILE"
        ) from None
    except IsADirectoryError:
        raise ConfigFileError(display, "is a directory, not a YAML file; pass the file itself with -f/--file") from None
    except PermissionError:
        raise ConfigFileError(display, "permission denied; make the file readable by this user") from None
    except OSError as exc:
        raise ConfigFileError(display, f"cannot be read: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigFileError(display, f"is larger than {MAX_FILE_BYTES} bytes (1 MiB), the limit for aigo.yaml files")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigFileError(
            display, f"is not valid UTF-8 (byte 0x{raw[exc.start]:02x}); save it as UTF-8", line, 1
        ) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip() or all(not ln.strip() or ln.lstrip().startswith("#") for ln in text.splitlines()):
        raise ConfigFileError(
            display, "is empty; it needs at least `version: 1`, `project:` and `models:` (see examples/)"
        )
    return text


def load(path: Path, display: str | None = None) -> Source:
    """Load one YAML document with positions; raise ConfigFileError when it is not usable YAML."""
    display = display or str(path)
    text = read_text(path, display)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = ", ".join(part for part in (exc.context, exc.problem) if part) or "syntax error"
        line, col = (mark.line + 1, mark.column + 1) if mark else (None, None)
        raise ConfigFileError(display, f"YAML syntax error: {what}", line, col) from None
    except yaml.YAMLError as exc:
        raise ConfigFileError(display, f"YAML error: {exc}") from None
    finally:
        loader.dispose()
    if node is None:
        raise ConfigFileError(
            display, "is empty; it needs at least `version: 1`, `project:` and `models:` (see examples/)"
        )
    builder = _Builder(loader, display)
    data = builder.build(node, ())
    return Source(display, data, builder.marks, builder.problems)


class _Builder:
    """Turns a composed node tree into data, recording marks and duplicate keys as it goes."""

    def __init__(self, loader: yaml.SafeLoader, file: str):
        self.loader, self.file = loader, file
        self.marks = Marks()
        self.problems: list[Problem] = []
        self.count = 0

    def build(self, node: yaml.Node, path: Path_) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            raise ConfigFileError(
                self.file,
                f"expands to more than {MAX_NODES} YAML nodes (too large, or anchors and aliases that multiply); simplify the file",
            )
        self.marks.values.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(child, path + (i,)) for i, child in enumerate(node.value)]
        try:
            return self.loader.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            raise ConfigFileError(
                self.file,
                f"cannot read value: {getattr(exc, 'problem', exc)}",
                node.start_mark.line + 1,
                node.start_mark.column + 1,
            ) from None

    def _mapping(self, node: yaml.MappingNode, path: Path_) -> dict[str, Any]:
        try:
            self.loader.flatten_mapping(node)  # resolves `<<:` merge keys
        except yaml.YAMLError as exc:
            raise ConfigFileError(
                self.file,
                f"bad merge key: {getattr(exc, 'problem', exc)}",
                node.start_mark.line + 1,
                node.start_mark.column + 1,
            ) from None
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            line, col = key_node.start_mark.line + 1, key_node.start_mark.column + 1
            if not isinstance(key_node, yaml.ScalarNode):
                raise ConfigFileError(
                    self.file, "a mapping key must be a plain value, not a list or mapping", line, col
                )
            key = self.loader.construct_object(key_node, deep=True)
            if not isinstance(key, str):  # `1:`, `true:`, `null:` keys, named as written in YAML
                key = "null" if key is None else str(key).lower() if isinstance(key, bool) else str(key)
            child = path + (key,)
            if key in result:
                first = self.marks.keys[child]
                self.problems.append(
                    Problem(
                        line,
                        col,
                        dotted(child),
                        f"duplicate key '{key}' (first written on line {first[0]}); keep only one",
                        self.file,
                    )
                )
            else:
                self.marks.keys[child] = (line, col)
            self.marks.values.pop(child, None)
            result[key] = self.build(value_node, child)
        return result
