"""`aigo-apply image tag`: set or remove one engine's `image_tag` in the config file in one step,
keeping its comments and layout. ruamel.yaml (round-trip) makes the edit; only the lines the edit
touches change in the file (the rest is kept byte for byte), and they are written as `aigo-apply fmt`
writes them (the tag quoted only where a YAML reader would read another value, a new key where fmt's
order puts it), so a formatted file stays formatted; the result must pass the real validation before
it replaces the file, and the file is replaced the one safe way
(edit/config_write.py): owner and mode kept, refused when it changed while the edit was made."""

from __future__ import annotations

import difflib
import io
from dataclasses import dataclass
from pathlib import Path

import yaml as pyyaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError
from ruamel.yaml.scalarstring import PlainScalarString, ScalarString
from ruamel.yaml.util import load_yaml_guess_indent

from aigo_apply.config.secret_values import unquoted
from aigo_apply.config.yaml_source import comments
from aigo_apply.desired.images import BUILT_IN
from aigo_apply.edit.config_write import read_config, replace_validated
from aigo_apply.edit.fmt import key_order, string_scalar
from aigo_apply.errors import AigoError, ConfigInvalid, UsageProblem


@dataclass(frozen=True)
class TagChange:
    """What `image tag` did: the key's dotted path, its value before and after (None: not set)."""

    path: str
    before: str | None
    after: str | None
    default: str | None  # the built-in tag, if the engine has one

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def describe(self, file: str) -> str:
        builtin = f"the built-in {self.default} applies" if self.default else "there is no built-in tag"
        if not self.changed and self.after is None:
            return f"nothing to reset: {file} sets no {self.path} ({builtin})"
        if not self.changed:
            return f"{self.path} is already {self.after} in {file}; nothing changed"
        before = "(not set)" if self.before is None else self.before or "(empty)"
        after = self.after if self.after is not None else f"(removed: {builtin})"
        return f"{file}: {self.path}: {before} -> {after}; run `aigo-apply plan` to see what it changes"


def key_path(engine: str) -> tuple[str, ...]:
    if engine not in BUILT_IN:
        raise UsageProblem(f"unknown engine {engine!r}; known here: {', '.join(BUILT_IN)}")
    return ("router",) if engine == "router" else ("engines", engine)


def set_tag(config_file: str, engine: str, tag: str | None) -> TagChange:
    """Write `tag` as the engine's image_tag, or remove the key when `tag` is None."""
    where = key_path(engine)
    dotted = ".".join(where + ("image_tag",))
    if tag is not None and not tag.strip():
        raise UsageProblem(f"the tag is empty; to use the built-in tag: aigo-apply image tag {engine} --reset")
    path = Path(config_file).expanduser()
    raw, source = read_config(path, config_file)  # the project's own reader: size, UTF-8, syntax, nesting, bombs
    if source.problems:  # duplicate keys and the like: which of two lines to edit is not clear
        raise ConfigInvalid(config_file, unquoted(source.problems))
    original = raw.decode("utf-8")  # line ends as written (read_text would turn CRLF into LF)
    bom = "\ufeff" if original.startswith("\ufeff") else ""
    original = original.removeprefix(bom)
    yaml, document = _round_trip(original, config_file)
    if not isinstance(document, CommentedMap):
        raise AigoError(f"{config_file}: is not a mapping of settings; cannot set {dotted}")
    section = _descend(document, where)
    before = section.get("image_tag") if section is not None else None
    before_text = None if section is None or "image_tag" not in section else "" if before is None else str(before)
    change = TagChange(dotted, before_text, tag, BUILT_IN[engine][1])
    if tag is None and (section is None or "image_tag" not in section):
        return change
    if tag is not None and before_text == tag and isinstance(before, str):
        return change
    baseline = _dump(yaml, document)
    if tag is None:
        _remove(document, where)
    else:
        section = _ensure(document, where)
        if "image_tag" in section:
            section["image_tag"] = _scalar(tag)
        else:
            section.insert(_position(section, where, "image_tag"), "image_tag", _scalar(tag))
    edited = _dump(yaml, document)
    text = patch(original, baseline, edited, keep_comments=tag is None)
    if text is not None and _data(text) != _data(edited):  # the lines went elsewhere than the writer meant
        text = None
    if text is None:
        value = f"`image_tag: {tag}` under {'.'.join(where)}" if tag is not None else f"the line of {dotted}"
        raise AigoError(
            f"{config_file}: cannot make this edit without rewriting other lines of the file "
            f"(its layout differs from what the YAML writer produces); edit it by hand: "
            + ("add " if tag is not None else "remove ")
            + value
        )
    edit = f"with {dotted}: {tag}" if tag is not None else f"without {dotted}"
    _write_validated(path, config_file, bom + text, raw, edit)
    return change


def _round_trip(text: str, display: str) -> tuple[YAML, object]:
    """The YAML writer whose output is closest to `text`, and the document it read."""
    try:
        _, guessed, offset = load_yaml_guess_indent(text)
    except YAMLError as exc:
        raise AigoError(f"{display}: cannot be read for editing: {exc}") from None
    shapes = {(guessed or 2, (guessed or 2) + (offset or 0), offset or 0)}
    shapes |= {(m, m + off, off) for m in (2, 4) for off in (0, 2)}
    best: tuple[int, YAML, object] | None = None
    for mapping, sequence, off in sorted(shapes):
        yaml = YAML()
        yaml.preserve_quotes = True
        yaml.width = 2**31 - 1
        yaml.indent(mapping=mapping, sequence=sequence, offset=off)
        document = yaml.load(text)
        lines = _dump(yaml, document).splitlines()
        score = sum(
            size for *_, size in difflib.SequenceMatcher(None, lines, text.splitlines(), False).get_matching_blocks()
        )
        if best is None or score > best[0]:
            best = (score, yaml, document)
    assert best is not None
    return best[1], best[2]


def _scalar(tag: str) -> str:
    """The tag as `aigo-apply fmt` writes it, whatever quotes the old value had: plain when every YAML
    reader (the project's YAML 1.1, an editor's 1.2) reads it back as this text, else double-quoted
    (`3.3`, `1e3`, `0x10`, `08`, `true`, `null`), so that fmt finds nothing to rewrite on its line."""
    written = string_scalar(tag)
    # plain as its own type: ruamel.yaml would give a plain str the quotes of the value it replaces
    return written if isinstance(written, ScalarString) else PlainScalarString(written)


def _data(text: str) -> object:
    try:
        return pyyaml.safe_load(text)
    except pyyaml.YAMLError:
        return None


def _dump(yaml: YAML, document: object) -> str:
    out = io.StringIO()
    yaml.dump(document, out)
    return out.getvalue()


def _descend(document: CommentedMap, where: tuple[str, ...]) -> CommentedMap | None:
    node: object = document
    for key in where:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, CommentedMap) else None


def _ensure(document: CommentedMap, where: tuple[str, ...]) -> CommentedMap:
    """The mapping at `where`, made where missing, each new key where fmt's order (edit/fmt.key_order) puts it."""
    node = document
    for depth, key in enumerate(where):
        child = node.get(key)
        if not isinstance(child, CommentedMap):
            child = CommentedMap()
            if key in node:
                node[key] = child
            else:
                node.insert(_position(node, where[:depth], key), key, child)
        node = child
    return node


def _position(node: CommentedMap, path: tuple[str, ...], key: str) -> int:
    """Where `key` goes among `node`'s keys in fmt's order: before the first that fmt puts after it (a
    key fmt does not list, it puts after every listed one)."""
    order = key_order(path) or ()
    if key not in order:
        return len(node)
    rank = order.index(key)
    return next((n for n, k in enumerate(node) if k not in order or order.index(k) > rank), len(node))


def _remove(document: CommentedMap, where: tuple[str, ...]) -> None:
    """Delete image_tag, then each enclosing section left empty (an empty `vllm:` is invalid)."""
    chain = [document]
    for key in where:
        chain.append(chain[-1][key])
    del chain[-1]["image_tag"]
    for parent, key, child in zip(reversed(chain[:-1]), reversed(where), reversed(chain[1:]), strict=True):
        if child:
            break
        del parent[key]


def patch(original: str, baseline: str, edited: str, keep_comments: bool = False) -> str | None:
    """`original` with the edit that turns `baseline` into `edited` (both written by the same YAML
    writer), applied only to the lines it touches; None when those lines are not written in
    `original` as the writer writes them (then the edit cannot be made without restyling).
    An edited line keeps the spaces written before its end-of-line comment (`}}  # flow`: the writer
    would move the `#` to its old column, or one space after a longer value). keep_comments: the
    comments of the lines the edit deletes stay, whole-line ones and those after a deleted value
    alike, each as a line of its own at the indent of what now follows (where `fmt` keeps a comment:
    with the entry below it), and the blank lines between them, never two in a row."""
    newline = "\r\n" if "\r\n" in original else "\n"
    lines = original.splitlines(keepends=True)
    keys = [line.rstrip("\r\n") for line in lines]
    base, new = baseline.splitlines(), edited.splitlines()
    where: dict[int, int] = {}  # baseline line -> the same line in the original
    for block in difflib.SequenceMatcher(None, base, keys, False).get_matching_blocks():
        where.update({block.a + k: block.b + k for k in range(block.size)})
    hunks = [op for op in difflib.SequenceMatcher(None, base, new, False).get_opcodes() if op[0] != "equal"]
    was, now = _after_values(original), _after_values(edited)
    for tag, i1, i2, j1, j2 in reversed(hunks):
        if i2 > i1:
            span = [where.get(i) for i in range(i1, i2)]
            if None in span or span != list(range(span[0] or 0, (span[0] or 0) + len(span))):
                return None
            start, end = span[0] or 0, (span[-1] or 0) + 1
        elif i1 - 1 in where:
            start = end = where[i1 - 1] + 1
        elif i1 in where or i1 == 0:
            start = end = where.get(i1, 0)
        else:
            return None
        if tag == "insert":  # a new key goes right after its sibling: comments and blank lines below it
            while start > 0 and _comment_or_blank(keys[start - 1]):  # belong to what follows
                start = end = start - 1
        if start > 0 and not lines[start - 1].endswith(("\n", "\r")):
            lines[start - 1] += newline
        gaps = {text: gap for n in range(start, end) if n in was for _, gap, text in [was[n]]}
        written = [_spaced(new[j], now.get(j), gaps) for j in range(j1, j2)]
        if keep_comments and tag == "delete":  # the comments right above it were about it too: fmt gives
            while start > 0 and _comment_or_blank(keys[start - 1]):  # them to the entry below them now
                start -= 1
        kept = _kept(keys[start:end], was, start, written, keys[end:]) if keep_comments and tag == "delete" else []
        kept = _one_blank(kept, (keys[:start] + written)[-1:], keys[end : end + 1])
        lines[start:end] = [line + newline for line in written + kept]
        keys[start:end] = written + kept
    return "".join(lines)


def _after_values(text: str) -> dict[int, tuple[int, int, str]]:
    """Line (0-based) -> (the column of its `#`, the spaces before it, the comment) for each comment
    that follows a value on its line."""
    rows = text.split("\n")
    out = {}
    for line, column, _ in comments(text):
        head = rows[line - 1][: column - 1]
        if head.strip():
            out[line - 1] = (column - 1, len(head) - len(head.rstrip(" \t")), rows[line - 1][column - 1 :].rstrip("\r"))
    return out


def _spaced(line: str, comment: tuple[int, int, str] | None, gaps: dict[str, int]) -> str:
    """`line` with the spaces before its end-of-line comment as the original line had them."""
    if comment is None or comment[2] not in gaps:
        return line
    column, _, text = comment
    return line[:column].rstrip(" \t") + " " * gaps[text] + line[column:]


def _kept(
    deleted: list[str], was: dict[int, tuple[int, int, str]], first: int, written: list[str], after: list[str]
) -> list[str]:
    """The comments (and blank lines) of the `deleted` lines (the first at `first`) that no written
    line carries, each a line of its own at the indent of the next entry in `after`."""
    below = next((line for line in after if not _comment_or_blank(line)), None)
    if below is None:  # the end of the file: fmt keeps them where they stand, a value's at its line's indent
        return [
            line if _comment_or_blank(line) else line[: len(line) - len(line.lstrip(" "))] + was[first + n][2]
            for n, line in enumerate(deleted)
            if _comment_or_blank(line) or first + n in was
        ]
    pad = below[: len(below) - len(below.lstrip(" "))]
    carried = {now[2] for now in (_after_values("\n".join(written)).values())}
    out = []
    for n, line in enumerate(deleted):
        if _comment_or_blank(line):
            out.append(pad + line.strip() if line.strip() else "")
        elif first + n in was and was[first + n][2] not in carried:
            out.append(pad + was[first + n][2])
    return out


def _one_blank(kept: list[str], before: list[str], after: list[str]) -> list[str]:
    """`kept` without a blank line beside another (`before` and `after`: the lines around it, none at
    the file's start and end), as fmt writes blank lines."""
    out: list[str] = []
    blank = not before or not before[0].strip()
    for line in kept:
        if line.strip() or not blank:
            out.append(line)
            blank = not line.strip()
    if out and not out[-1].strip() and (not after or not after[0].strip()):
        out.pop()
    return out


def _comment_or_blank(line: str) -> bool:
    return not line.strip() or line.lstrip().startswith("#")


def _write_validated(path: Path, display: str, text: str, raw: bytes, edit: str) -> None:
    """Validate `text` as the file it would become, then put it in place (edit/config_write.py): owner
    and mode kept, refused when the file is no longer `raw`."""
    replace_validated(
        path,
        display,
        text,
        raw,
        lambda shown: f"{shown} would not validate {edit}, so it was not changed:",
        lambda error: f"{error}; so it was not changed",
    )
