"""Reads aigo.yaml into plain Python data plus the line and column of every key and value.

PyYAML's composer gives nodes with positions; we construct the values ourselves so that
duplicate keys become problems (PyYAML silently keeps the last one), so that alias bombs, deep
nesting and oversized files stop with a clear error instead of eating the machine, and so that
nothing YAML rewrites behind the writer's back passes silently (config/scalars.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from aigo_apply.config import invisible, scalars
from aigo_apply.config.doc_path import dotted
from aigo_apply.config.file_read import MAX_FILE_BYTES, read_bytes
from aigo_apply.errors import ConfigFileError, Problem
from aigo_apply.json_types import JsonObject, JsonScalar, JsonValue

# libyaml's parser when PyYAML has it (several times faster), the pure-Python one otherwise.
if TYPE_CHECKING:
    _BaseLoader = yaml.SafeLoader
else:
    _BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):
    """The safe loader, each plain scalar's implicit tag resolved once per document: the composer asks
    for every scalar, and the keys and values of one model come back in every model of a file. Only
    without path resolvers (SafeLoader has none), where the tag depends on the text alone."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._tags: dict[tuple[str | None, bool | tuple[bool, bool]], str] = {}

    def resolve(self, kind: type[yaml.Node], value: str | None, implicit: bool | tuple[bool, bool]) -> str:
        if kind is not yaml.ScalarNode or self.yaml_path_resolvers:
            resolved: str = super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]
            return resolved
        key = (value, implicit)
        tag = self._tags.get(key)
        if tag is None:
            tag = self._tags[key] = super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]
        return tag


MAX_NODES = 100_000
MAX_DEPTH = 32  # the deepest path a valid file has is 6 (models.m.vllm.speculative.draft.repo)
MAX_KEY_CHARS = 256
# No mapping or list of a valid file comes near these (models: 256, gpus: 64), nor any value (paths and
# env values: 4096); bounding them keeps every later check (the schema, its patterns, the rules) fast.
MAX_ENTRIES = 1000
MAX_VALUE_CHARS = 4096
__all__ = [
    "MAX_DEPTH",
    "MAX_ENTRIES",
    "MAX_FILE_BYTES",
    "MAX_NODES",
    "MAX_VALUE_CHARS",
    "Marks",
    "Source",
    "comments",
    "load",
]

Path_ = tuple[str | int, ...]  # keys and list indices, from the document's top
_MERGE, _VALUE = "tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"  # the keys flatten_mapping acts on


@dataclass
class Marks:
    """Positions (1-based line, column) of keys and values, addressed by their path in the data."""

    keys: dict[Path_, tuple[int, int]] = field(default_factory=dict)
    values: dict[Path_, tuple[int, int]] = field(default_factory=dict)
    # the text as written of each value YAML turned into something else than a string (`0123`, `off`, `~`)
    written: dict[Path_, str] = field(default_factory=dict)

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
    data: JsonValue  # as read: not yet checked against the schema
    marks: Marks
    problems: list[Problem]
    digest: str = ""  # sha256 of the bytes read: the file is read once, and this names what was read
    text: str = ""  # the text parsed, comments included (`comments`)


EMPTY = (
    "is empty; it needs at least `version: 1`, `project:` and `models:` "
    "(`aigo-apply init -f FILE --force` writes a starter file in its place)"
)


def read_text(path: Path, display: str) -> tuple[str, str]:
    """The file as UTF-8 text, and the sha256 of its bytes (read once, see file_read.py)."""
    return decode_text(read_bytes(path, display), display)


def decode_text(raw: bytes, display: str) -> tuple[str, str]:
    """A config file's bytes as UTF-8 text, and their sha256: size, encoding and blank files refused."""
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
    if found := invisible.in_file(text):  # YAML breaks lines at U+2028, NEL, a lone CR: even in a comment
        raise ConfigFileError(display, found[2], found[0], found[1])
    if not text.strip() or all(not ln.strip() or ln.lstrip().startswith("#") for ln in text.splitlines()):
        raise ConfigFileError(display, EMPTY)
    return text, hashlib.sha256(raw).hexdigest()


def load(path: Path, display: str | None = None) -> Source:
    """Load one YAML document with positions; raise ConfigFileError when it is not usable YAML."""
    display = display or str(path)
    text, digest = read_text(path, display)
    return load_text(text, display, digest)


def load_bytes(raw: bytes, display: str) -> Source:
    """load() of bytes already read (a command that rewrites the file edits exactly what it parsed)."""
    text, digest = decode_text(raw, display)
    return load_text(text, display, digest)


def load_text(text: str, display: str, digest: str = "") -> Source:
    """`load` for text already in memory (import checks a model entry in a document it composes)."""
    if found := invisible.in_file(text):
        raise ConfigFileError(display, found[2], found[0], found[1])
    node, loader = _compose(text, display)
    if node is None:
        raise ConfigFileError(display, EMPTY)
    builder = _Builder(loader, display)
    data = builder.build(node, ())
    return Source(display, data, builder.marks, builder.problems, digest, text)


def comments(text: str) -> Iterator[tuple[int, int, str]]:
    """Each comment of a document that loaded: the line and column (1-based) of its `#` and the text
    after it. A `#` starts one where YAML reads one: after the last token of its line, at the line's
    start or after white space (`a#b` and `"#x"` are values). Scans the text again, so only called for
    a text that may hold something to find (config/env_rules.py: a credential)."""
    covered: dict[int, int] = {}  # line -> the column up to which tokens cover it (-1: all of it)
    try:
        for token in yaml.scan(text, Loader=_BaseLoader):
            start, end = token.start_mark, token.end_mark
            covered.update(dict.fromkeys(range(start.line, end.line), -1))
            if covered.get(end.line, 0) >= 0:
                covered[end.line] = max(covered.get(end.line, 0), end.column)
    except yaml.YAMLError:  # not a document that loaded: nothing to say of its comments
        return
    for n, line in enumerate(text.split("\n")):
        begin = covered.get(n, 0)
        if begin < 0:
            continue
        at = line.find("#", begin)
        while at > 0 and line[at - 1] not in " \t":
            at = line.find("#", at + 1)
        if at >= 0:
            yield n + 1, at + 1, line[at + 1 :].rstrip("\r")


def _compose(text: str, display: str) -> tuple[yaml.Node | None, yaml.SafeLoader]:
    """The node tree. Only the parser's own words are shown, never a snippet of the file."""
    loader = _Loader(text)
    try:
        return loader.get_single_node(), loader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = ", ".join(part for part in (exc.context, exc.problem) if part) or "syntax error"
        line, col = (mark.line + 1, mark.column + 1) if mark else (None, None)
        if mark and (tab := _tab_at(text, mark.line, mark.column)):
            raise ConfigFileError(display, tab, line, col) from None
        raise ConfigFileError(display, f"YAML syntax error: {what}", line, col) from None
    except yaml.YAMLError as exc:
        raise ConfigFileError(display, f"YAML error: {exc}") from None
    except RecursionError:  # the pure-Python composer recurses; libyaml stops at 1000 levels itself
        raise ConfigFileError(display, f"nests deeper than {MAX_DEPTH} levels; aigo.yaml needs at most 6") from None
    finally:
        loader.dispose()


def _tab_at(text: str, line: int, column: int) -> str | None:
    """What to do about a tab where the parser stopped (0-based `line`, `column`), in place of
    PyYAML's "found character '\\t' that cannot start any token"; None if no tab is there."""
    rows = text.split("\n")
    row = rows[line] if line < len(rows) else ""
    if row[column : column + 1] != "\t":
        return None
    where = f"line {line + 1} column {column + 1}"
    if not row[:column].strip(" \t"):
        return f"YAML does not allow tabs for indentation: {where}; indent with spaces"
    return f"a tab at {where}: YAML takes a tab here only inside quotes; write spaces instead"


class _Builder:
    """Turns a composed node tree into data, recording marks and duplicate keys as it goes."""

    def __init__(self, loader: yaml.SafeLoader, file: str):
        self.loader, self.file = loader, file
        self.marks = Marks()
        self.problems: list[Problem] = []
        self.count = 0

    def build(self, node: yaml.Node, path: Path_) -> JsonValue:
        """Iterating would not help: MAX_DEPTH keeps the recursion far from Python's limit."""
        self.count += 1
        line, col = node.start_mark.line + 1, node.start_mark.column + 1
        if self.count > MAX_NODES:
            raise ConfigFileError(
                self.file,
                f"expands to more than {MAX_NODES} YAML nodes (too large, or anchors and aliases that multiply); simplify the file",
            )
        if len(path) > MAX_DEPTH:
            raise ConfigFileError(
                self.file, f"nests deeper than {MAX_DEPTH} levels; aigo.yaml needs at most 6", line, col
            )
        self.marks.values.setdefault(path, (line, col))
        if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and len(node.value) > MAX_ENTRIES:
            raise ConfigFileError(
                self.file, f"has more than {MAX_ENTRIES} entries here; no part of aigo.yaml needs that many", line, col
            )
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(child, path + (i,)) for i, child in enumerate(node.value)]
        return self._scalar(node, path, line, col)

    def _scalar(self, node: yaml.Node, path: Path_, line: int, col: int) -> JsonScalar:
        if node.end_mark.line != node.start_mark.line:  # refused without quoting it: it may be a secret file
            raise ConfigFileError(self.file, scalars.MULTI_LINE, line, col)
        if len(node.value) > MAX_VALUE_CHARS:
            raise ConfigFileError(self.file, f"this value is longer than {MAX_VALUE_CHARS} characters", line, col)
        value, problem = scalars.construct(self.loader, node, scalars.is_env_value(path))
        if problem:
            self.problems.append(Problem(line, col, dotted(path), problem, self.file))
        elif not isinstance(value, str):  # the schema says "quote it" if it wanted a string here
            self.marks.written[path] = node.value
        return value

    def _key(self, node: yaml.Node, path: Path_, line: int, col: int) -> str:
        """A key as written; a key YAML reads as a number, boolean, date or null is a problem."""
        if not isinstance(node, yaml.ScalarNode):
            raise ConfigFileError(self.file, "a mapping key must be a plain value, not a list or mapping", line, col)
        if node.end_mark.line != node.start_mark.line or len(node.value) > MAX_KEY_CHARS:
            raise ConfigFileError(
                self.file, f"a key must be written on one line, in at most {MAX_KEY_CHARS} characters", line, col
            )
        problem = scalars.key_problem(self.loader, node)
        if problem:
            self.problems.append(Problem(line, col, dotted(path + (node.value,)), problem, self.file))
        return str(node.value)

    def _mapping(self, node: yaml.MappingNode, path: Path_) -> JsonObject:
        tags = [key.tag for key, _ in node.value]
        if _MERGE in tags or _VALUE in tags:  # else flatten_mapping has nothing to do (most mappings)
            self._flatten(node, path)
        result: JsonObject = {}
        for key_node, value_node in node.value:
            line, col = key_node.start_mark.line + 1, key_node.start_mark.column + 1
            key = self._key(key_node, path, line, col)
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
            self.marks.written.pop(child, None)
            result[key] = self.build(value_node, child)
        return result

    def _flatten(self, node: yaml.MappingNode, path: Path_) -> None:
        """Resolve `<<:` merge keys (PyYAML's flatten_mapping), reporting a second one in a mapping."""
        merges = [k for k, _ in node.value if k.tag == _MERGE]
        for extra in merges[1:]:  # PyYAML keeps both, silently: which one wins is not what the file says
            first = merges[0].start_mark.line + 1
            self.problems.append(
                Problem(
                    extra.start_mark.line + 1,
                    extra.start_mark.column + 1,
                    dotted(path + ("<<",)),
                    f"a second merge key '<<' (the first is on line {first}); write one: <<: [*a, *b]",
                    self.file,
                )
            )
        try:
            self.loader.flatten_mapping(node)  # resolves `<<:` merge keys
        except yaml.YAMLError as exc:
            raise ConfigFileError(
                self.file,
                f"bad merge key: {getattr(exc, 'problem', exc)}",
                node.start_mark.line + 1,
                node.start_mark.column + 1,
            ) from None
