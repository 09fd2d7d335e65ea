"""The comments of a config while `fmt` (edit/fmt.py) reorders it. ruamel.yaml keeps a whole-line
comment with the entry *before* it (the last value written above it); a key moved by the canonical
order must take the comments above it along. So each comment line is first given to the entry it
precedes (`detach`), kept there while the document is rebuilt, and written back as that entry's
"before" comment; the file's header stays on top and what follows the last entry stays last
(`attach`). `comments` lists every comment of a text, to check that none was lost."""

from __future__ import annotations

import re
from collections.abc import Iterable

import yaml as pyyaml
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.tokens import CommentToken

from aigo_apply.errors import AigoError

INDENT = 2

# ruamel keeps a comment line with the entry *before* it (the last value written above it). A key
# moved by the new order must take the comments above it along, so each comment line is first given
# to the entry it precedes, and written back as that entry's "before" comment.


Block = CommentedMap | CommentedSeq  # a mapping or a list as ruamel.yaml reads it, comments attached


def _entries(node: object) -> list[tuple[Block, object]]:
    """(container, key or index) of every entry of the block collections, in document order."""
    found: list[tuple[Block, object]] = []
    stack: list[object] = [node]

    def walk(container: object) -> None:
        if not isinstance(container, (CommentedMap, CommentedSeq)) or container.fa.flow_style():
            return
        if any(child is container for child in stack[:-1]):  # an alias back into itself
            raise AigoError("an anchor is used inside itself")
        keys: Iterable[object] = (
            list(container.keys()) if isinstance(container, CommentedMap) else range(len(container))
        )
        for key in keys:
            found.append((container, key))
            stack.append(container[key])
            walk(container[key])
            stack.pop()
        found.append((container, _END))  # lines ruamel keeps "at the end" of a block (after a {...} value)

    if isinstance(node, CommentedMap) and getattr(node, "merge", None):
        raise AigoError("it uses a YAML merge key (<<:); write the merged settings out by hand")
    walk(node)
    return found


_END = object()


def _slot(container: Block) -> int:
    return 2 if isinstance(container, CommentedMap) else 0


def _lines(tokens: CommentToken | list[CommentToken | None] | None) -> list[str]:
    text = "".join(t.value for t in (tokens if isinstance(tokens, list) else [tokens]) if t is not None)
    return [line.strip() for line in text.split("\n")[:-1]] if text else []


def detach(document: object) -> tuple[list[str], tuple[list[str], int]]:
    """Move every whole-line comment (and blank line) to the entry below it, as a list of stripped
    lines in ca.items[key][1]; end-of-line comments stay where they are. Returns the lines above the
    first entry (the file's header) and those after the last one."""
    if not isinstance(document, CommentedMap):
        raise AigoError("it is not a mapping")
    header = _lines(document.ca.comment[1]) if document.ca.comment else []
    if document.ca.comment:
        document.ca.comment[1] = None
    pending: list[str] = []
    indent = 0
    seen: set[int] = set()
    for container, key in _entries(document):
        if key is _END:
            end = getattr(container.ca, "end", None)
            if end:
                pending += _lines(end)
                indent = min((getattr(t, "column", 0) or 0 for t in end), default=0)
                container.ca.end = None
            continue
        if id(container) not in seen:  # the first entry of a nested block: lines ruamel keeps on the block
            seen.add(id(container))
            if container is not document and container.ca.comment and container.ca.comment[1]:
                pending += _lines(container.ca.comment[1])
                container.ca.comment[1] = None
        item = container.ca.items.get(key)
        if item is None:
            item = container.ca.items[key] = [None, None, None, None]
        if isinstance(container, CommentedMap) and item[3]:  # the nested block's first lines (a copy)
            item[3] = None
        before = pending + (_lines(item[1]) if isinstance(container, CommentedMap) else [])
        pending = []
        token = item[_slot(container)]
        if token is not None:
            text = token.value
            first, _, rest = text.partition("\n")
            item[_slot(container)] = (
                CommentToken(first.strip() + "\n", CommentMark(token.column)) if first.strip() else None
            )
            value = container[key]
            if isinstance(value, (CommentedMap, CommentedSeq)) and value.ca.comment:
                value.ca.comment[0] = item[_slot(container)]
            pending = [line.strip() for line in rest.split("\n")[:-1]] if rest else []
            indent = min((len(line) - len(line.lstrip()) for line in rest.split("\n") if line.strip()), default=0)
        item[1] = before
    return header, (pending, _level_column(document, indent) if pending else 0)


def _level_column(document: CommentedMap, indent: int) -> int:
    """Where lines after the last entry go: the level (of the last entries' chain) they were written
    at, as the canonical layout indents it."""
    column, depth, node = 0, 0, document
    while isinstance(node, CommentedMap) and node and not node.fa.flow_style():
        last = list(node)[-1]
        if node.lc.key(last)[1] > indent:
            break
        column = depth * INDENT
        node, depth = node[last], depth + 1
    return column


def attach(node: CommentedMap, header: list[str], end: tuple[list[str], int]) -> None:
    """The header back on top; the lines after the last entry at the level they were written at."""
    while header and not header[0]:  # no blank line at the top of the file
        header = header[1:]
    if header:
        node.ca.comment = [None, [token(line, 0) for line in squeeze(header)]]
    trailer, column = squeeze(end[0]), end[1]
    while trailer and not trailer[-1]:
        trailer.pop()
    if not trailer:
        return
    container: Block = node
    key: object = None  # ruamel writes no comment after the document: they go after its last value
    while isinstance(container, (CommentedMap, CommentedSeq)) and container and not container.fa.flow_style():
        key = list(container)[-1] if isinstance(container, CommentedMap) else len(container) - 1
        value = container[key]
        if not isinstance(value, (CommentedMap, CommentedSeq)) or not value or value.fa.flow_style():
            break
        container = value
    slot = _slot(container)
    item = container.ca.items.setdefault(key, [None, None, None, None])
    eol = item[slot]
    lines = "".join(f"{' ' * column}{line}\n" if line else "\n" for line in trailer)
    item[slot] = CommentToken((eol.value if eol is not None else "\n") + lines, CommentMark(eol.column if eol else 0))


def squeeze(lines: list[str]) -> list[str]:
    """At most one blank line in a row: blank runs are layout, not content."""
    return [line for n, line in enumerate(lines) if line or n == 0 or lines[n - 1]]


def token(line: str, column: int) -> CommentToken:
    return CommentToken((line + "\n") if line else "\n", CommentMark(column))


def comments(text: str) -> list[str]:
    """Every comment of a YAML text (stripped), found by PyYAML's scanner: a `#` outside every token."""
    covered: list[tuple[int, int]] = []
    try:
        for token in pyyaml.scan(text, Loader=pyyaml.SafeLoader):
            covered.append((token.start_mark.index, token.end_mark.index))
    except pyyaml.YAMLError:
        return []
    found: list[str] = []
    ends = sorted(covered)
    position = 0
    for start, end in ends + [(len(text), len(text))]:
        gap = text[position:start]
        for match in re.finditer(r"(?:^|(?<=[ \t\n]))#[^\n]*", gap):
            found.append(match.group().strip())
        position = max(position, end)
    return found
