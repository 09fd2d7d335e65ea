"""`aigo-apply fmt`: rewrite a config file into its one canonical layout, so that a config repo's diffs
show changes of meaning only. Keys in the order schemas/aigo.schema.json lists them (the order of
docs/configuration.md's reference), two spaces per level, every comment kept next to the key it was
written beside or above, strings quoted exactly where a YAML reader (the project's YAML 1.1 or an
editor's 1.2) would otherwise read another value (`off`, `0123`, `1e3`, `null`, a date), booleans as
true/false, numbers as written.

ruamel.yaml (round-trip) keeps the comments; the values themselves come from the project's own
reader (config/yaml_source), so what the file means is what is written back (the comments are moved
by edit/fmt_comments.py). Only a file that
validates is formatted, and the result must read back to the same data with every comment in place,
or nothing is written. Writing is the one safe way (edit/config_write.py, aigo_apply/safe_write.py):
a temporary file and a rename, owner and mode kept, a symlink or anything but a regular file refused,
and an edit made to the file while fmt ran kept (nothing is written then)."""

from __future__ import annotations

import difflib
import io
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml as pyyaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.resolver import VersionedResolver
from ruamel.yaml.scalarfloat import ScalarFloat
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from aigo_apply import safe_write
from aigo_apply.config import scalars
from aigo_apply.config.machine_text import plain_reads_as_other
from aigo_apply.config.yaml_source import Marks, _Builder, _compose
from aigo_apply.edit.config_write import read_config, replace_config
from aigo_apply.edit.fmt_comments import attach, comments, detach, squeeze, token
from aigo_apply.edit.fmt_refusal import at_path, first_difference, lost_comment_line, refusal, yaml_mark
from aigo_apply.errors import AigoError, ConfigFileError, ConfigInvalid, FormatUnkept, visible
from aigo_apply.json_types import JsonObject, JsonValue, arr, obj
from aigo_apply.observe.config_file import load_config
from aigo_apply.resources import schema_data

INDENT = 2
_SOURCE = "repo revision path file"
_SECRET = "from_env from_file"
_RESOLVE_11 = pyyaml.resolver.Resolver()
_RESOLVE_12 = VersionedResolver(version=(1, 2))


@dataclass(frozen=True)
class Formatted:
    """One file: its text as written and in the canonical layout."""

    file: str
    before: str
    after: str

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        """The unified diff from the file as written to the formatted file."""
        lines = difflib.unified_diff(
            self.before.splitlines(keepends=True),
            self.after.splitlines(keepends=True),
            f"{visible(self.file)} (as written)",  # a file name stays on its line
            f"{visible(self.file)} (formatted)",
        )
        return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def format_file(file: str, write: bool) -> Formatted:
    """Format `file`: validate it, compute its canonical text, and (`write`) replace it when it changes."""
    path = Path(file).expanduser()
    raw, _ = read_config(path, file)  # a regular file only: a symlink, FIFO or folder is refused unread
    config = load_config(file)  # refuses an invalid file, with every problem, before anything is written
    safe_write.unchanged(path, file, raw)  # load_config read it again: the same bytes, or nothing is written
    original = raw.decode("utf-8")  # the bytes read_config and load_config found valid UTF-8
    after = format_text(original, config.data, file, config.marks)
    result = Formatted(file, original, after)
    if write and result.changed:
        _replace(path, file, after, config.data, raw)
    return result


def format_text(text: str, data: object, display: str, marks: Marks | None = None) -> str:
    """`text` (a file whose meaning is `data`, as the project's reader reads it) in the canonical layout;
    `marks` (where each value is written) let a refusal name its line (edit/fmt_refusal.py)."""
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    newline = "\r\n" if "\r\n" in text else "\n"
    body = text.removeprefix(bom).replace("\r\n", "\n")
    try:
        writer = _writer()
        document = writer.load(body)
        header, trailer = detach(document)
        canonical = _canon(document, data, (), 0)
        if not isinstance(canonical, CommentedMap):  # cannot be: detach took a mapping, and data read as one
            raise FormatUnkept("the document reads otherwise in ruamel.yaml", ())
        attach(canonical, header, trailer)
        out = io.StringIO()
        writer.dump(canonical, out)
        result = out.getvalue()
    except FormatUnkept as exc:  # what the file holds that fmt cannot rewrite faithfully
        raise refusal(display, str(exc), where=at_path(marks, exc.path)) from None
    except YAMLError as exc:  # ruamel.yaml reads a line the project's reader took otherwise
        problem = getattr(exc, "problem", None) or type(exc).__name__
        what = f"ruamel.yaml, which fmt writes with, cannot read it ({problem})"
        raise refusal(display, what, where=yaml_mark(exc)) from None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError) as exc:
        raise refusal(display, f"ruamel.yaml could not write it ({type(exc).__name__}: {str(exc)[:200]})") from None
    result = "\n".join(line.rstrip(" \t") for line in result.split("\n")).rstrip("\n") + "\n"
    _check_same(body, result, data, display, marks)
    return bom + result.replace("\n", newline)


def _writer() -> YAML:
    writer = YAML()
    writer.indent(mapping=INDENT, sequence=2 * INDENT, offset=INDENT)
    writer.width = 2**31 - 1  # never fold a long value onto a second line
    writer.preserve_quotes = False
    return writer


# -- the canonical document -------------------------------------------------------------------------


def key_order(path: tuple[object, ...]) -> tuple[str, ...] | None:
    """The order fmt writes the keys of the mapping at `path` in: its properties in the order
    schemas/aigo.schema.json writes them (a `$ref` followed, and of a value's forms, `oneOf` or
    `anyOf`, the mapping); None for a mapping of names (models, env, node_selector) and a mapping
    inside a list (tolerations), which keep their written order. Keys the schema does not list keep
    their written order after the listed ones (fmt formats only a valid file: there are none)."""
    node = _mapping(_schema())
    for key in path:
        if node is None:
            return None
        properties = obj(node.get("properties"))
        node = _mapping(
            properties[key] if isinstance(key, str) and key in properties else node.get("additionalProperties")
        )
    return (tuple(obj(node.get("properties"))) or None) if node is not None else None


def _schema() -> JsonObject:
    return obj(schema_data("aigo.schema.json"))  # read once, when fmt first orders a mapping


def _mapping(schema: JsonValue | None) -> JsonObject | None:
    """The schema of a mapping that `schema` describes, or None (a scalar, a list)."""
    if not isinstance(schema, dict):
        return None
    if "properties" not in schema and "$ref" in schema:
        target: JsonValue = _schema()
        for part in str(schema["$ref"]).removeprefix("#/").split("/"):
            target = obj(target).get(part)
        return _mapping(target)
    if "properties" in schema or isinstance(schema.get("additionalProperties"), dict):
        return schema
    for form in arr(schema.get("oneOf")) + arr(schema.get("anyOf")):
        if (found := _mapping(form)) is not None:
            return found
    return None


def _canon(node: object, value: object, path: tuple[str | int, ...], column: int) -> object:
    """A fresh ruamel tree for `value` (the meaning), in canonical order, with `node`'s comments."""
    if isinstance(value, dict):
        if not isinstance(node, CommentedMap) or len(node) != len(value):
            raise FormatUnkept(
                f"the mapping at {_where(path)} reads otherwise in ruamel.yaml (a merge key or an anchor?)", path
            )
        pairs = list(zip(node.keys(), value.keys(), strict=True))
        order = key_order(path)
        if order is not None:
            pairs.sort(key=lambda pair: order.index(pair[1]) if pair[1] in order else len(order))
        fresh = CommentedMap()
        flow = node.fa.flow_style()
        if flow:
            fresh.fa.set_flow_style()
        for n, (old, key) in enumerate(pairs):
            name = string_scalar(key)
            fresh[name] = _canon(node[old], value[key], path + (key,), column + INDENT)
            _move_comments(node, old, fresh, name, column, flow, n == 0, path + (key,))
        if flow and node.ca.comment and node.ca.comment[0]:
            fresh.ca.comment = [node.ca.comment[0], None]
        return fresh
    if isinstance(value, list):
        if not isinstance(node, CommentedSeq) or len(node) != len(value):
            raise FormatUnkept(f"the list at {_where(path)} reads otherwise in ruamel.yaml", path)
        seq = CommentedSeq()
        flow = node.fa.flow_style()
        if flow:
            seq.fa.set_flow_style()
        for index, item in enumerate(value):
            seq.append(_canon(node[index], item, path + (index,), column + 2 * INDENT))
            if not flow and index in node.ca.items:
                seq.ca.items[index] = [node.ca.items[index][0], None, None, None]
                before = node.ca.items[index][1] or []
                if before:
                    raise FormatUnkept(f"a comment between the items of the list at {_where(path)}", path + (index,))
        return seq
    if isinstance(node, (CommentedMap, CommentedSeq)):
        raise FormatUnkept(f"the value at {_where(path)} reads otherwise in ruamel.yaml", path)
    return _scalar(node, value, path)


def _move_comments(
    node: CommentedMap,
    old: object,
    fresh: CommentedMap,
    name: str,
    column: int,
    flow: bool,
    first: bool,
    path: tuple[str | int, ...],
) -> None:
    """`old`'s comments onto `name`: the lines above it (no blank line first in a block), its end-of-line one."""
    item = node.ca.items.get(old)
    if item is None:
        return
    before = item[1] if isinstance(item[1], list) and all(isinstance(x, str) for x in item[1]) else []
    while first and before and not before[0]:
        before = before[1:]
    if flow:
        if item[2] is not None or before:
            raise FormatUnkept("a comment inside a {...} mapping: move it above the line", path)
        return
    fresh.ca.items[name] = [
        None,
        [token(line, column if line else 0) for line in squeeze(before)] or None,
        item[2],
        None,
    ]


def _scalar(node: object, value: object, path: tuple[str | int, ...]) -> object:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if isinstance(node, ScalarFloat) and float(node) == value and _reads_as(_plain_dump(node), value):
            return node  # 0.90 stays 0.90
        return value
    if isinstance(value, str):
        return string_scalar(value)
    raise FormatUnkept(f"the value at {_where(path)} has a type aigo.yaml does not use", path)


def string_scalar(text: str) -> str:
    """`text` plain when every YAML reader reads it back as this text, else double-quoted: how fmt
    writes a string, and so how `image tag` writes the one value it edits (edit/image_tag.py)."""
    return text if _plain_keeps(text) else DoubleQuotedScalarString(text)


def _plain_keeps(text: str) -> bool:
    """Whether YAML 1.1 (the project's reader, PyYAML) and YAML 1.2 (editors, ruamel) both read `text`
    written plain as this text: `off`, `0123`, `1e3`, `8000`, `null`, `2024-01-01` need quotes."""
    tag = _RESOLVE_12.resolve(ScalarNode, text, (True, False))
    # types-PyYAML leaves Resolver.resolve unannotated
    kinds = {str(_RESOLVE_11.resolve(pyyaml.ScalarNode, text, (True, False))), str(getattr(tag, "value", tag))}  # type: ignore[no-untyped-call]
    return kinds == {scalars.STR} and not plain_reads_as_other(text)  # what ruamel misses: `-.5e3`, `y`


def _plain_dump(value: object) -> str:
    out = io.StringIO()
    _writer().dump({"x": value}, out)
    return out.getvalue()


def _reads_as(text: str, value: object) -> bool:
    try:
        read = pyyaml.safe_load(text)
    except pyyaml.YAMLError:
        return False
    return isinstance(read, dict) and type(read.get("x")) is type(value) and read.get("x") == value


def _where(path: tuple[object, ...]) -> str:
    return ".".join(str(part) for part in path) or "the top level"


# -- checks and writing -----------------------------------------------------------------------------


def _check_same(before: str, after: str, data: object, display: str, marks: Marks | None = None) -> None:
    """The formatted text must mean the same and keep every comment, or it is not used."""
    try:
        node, loader = _compose(after, display)
        builder = _Builder(loader, display)
        read = builder.build(node, ()) if node is not None else None
    except ConfigFileError:
        read, builder = None, None
    if builder is None or builder.problems or read != data or not _same_types(read, data):
        path = first_difference(data, read) if builder is not None and not builder.problems else None
        raise refusal(
            display,
            f"the value at {_where(path)} would read differently once rewritten" if path else "its meaning",
            "quote that value, or write it in plain form, then run fmt again",
            at_path(marks, path) if path else None,
        )
    if Counter(written := comments(before)) != Counter(kept := comments(after)):
        raise refusal(
            display,
            "a comment here would not stay in place",
            "move it above the line (out of {...} or [...], and not between list items), then run fmt again",
            lost_comment_line(before, written, kept),
        )


def _same_types(a: object, b: object) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_types(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_types(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b)


def _replace(path: Path, display: str, text: str, data: object, raw: bytes) -> None:
    """Validate `text` as the file, then put it in place (edit/config_write.py): owner and mode kept,
    refused when the file is no longer the bytes `raw` that were formatted."""

    def check(tmp: str) -> None:
        try:
            if load_config(tmp).data != data:
                raise AigoError(f"{display}: the formatted file reads differently; nothing was written")
        except (ConfigInvalid, ConfigFileError):
            raise AigoError(f"{display}: the formatted file does not validate; nothing was written") from None

    replace_config(path, display, text, raw, check)
