"""The text of the entry `aigo-apply add` writes, and writing it into the config file. Each setting
is one line with a comment saying why it was chosen (`context_length: 40960  # the longest the model
takes ...`), a header comment names where the files came from, and the values are written as YAML
reads them back (config/machine_text.py: a text that needs quotes gets them). The entry goes where
`import --write` puts one (edit/portable.with_entry: at the end of `models:`, every other line of the
file, its comments and line ends kept as written), and the file is replaced only when it validates
with it (edit/config_write.py)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from aigo_apply.config.machine_text import json_text, yaml_comment, yaml_text
from aigo_apply.config.secret_values import unquoted
from aigo_apply.edit.config_write import read_config
from aigo_apply.edit.portable import entry_text, with_entry, write_checked
from aigo_apply.errors import ConfigInvalid

_PLAIN = re.compile(r"[A-Za-z0-9_/][A-Za-z0-9._/-]*")


def scalar(value: object) -> str:
    """One value as YAML that reads back to it, on one line (in a {...} mapping too)."""
    if isinstance(value, list):
        return "[" + ", ".join(scalar(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {scalar(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str):
        plain = _PLAIN.fullmatch(value) and yaml_text({"v": value}) == f"v: {value}\n"
        return value if plain else json_text(value)  # JSON's double quotes: a YAML double-quoted scalar
    return yaml_text({"v": value}).removeprefix("v: ").rstrip("\n")


def entry_lines(alias: str, entry: Mapping[str, object], why: Mapping[str, str], indent: int, header: str) -> list[str]:
    """The entry's lines (each ending in "\\n"), at `indent`, each setting with its reason as a comment."""
    pad = " " * indent
    lines = [f"{pad}# {yaml_comment(header)}\n", f"{pad}{scalar(alias)}:\n"]

    def add(key: str, value: object, depth: int, dotted: str) -> None:
        at = pad + "  " * depth
        if isinstance(value, dict) and value and key != "source":
            lines.append(f"{at}{key}:\n")
            for inner, v in value.items():
                add(inner, v, depth + 1, f"{dotted}.{inner}")
            return
        comment = f"  # {yaml_comment(why[dotted])}" if dotted in why else ""
        lines.append(f"{at}{key}: {scalar(value)}{comment}\n")

    for key, value in entry.items():
        add(key, value, 1, key)
    return lines


def insert_entry(
    config_file: str, alias: str, entry: Mapping[str, object], why: Mapping[str, str], header: str
) -> None:
    """Add the entry at the end of the file's `models:` (import --write's place) and write the file,
    the one safe way, only if it validates with it; a file that changed since it was read is refused."""
    path = Path(config_file).expanduser()
    raw, source = read_config(path, config_file)
    if source.problems:
        raise ConfigInvalid(config_file, unquoted(source.problems))
    text = raw.decode("utf-8")
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    body = text.removeprefix(bom)
    placed = with_entry(body, source, alias, {}, config_file)  # `ALIAS: {}` where the entry goes
    lines = placed.splitlines(keepends=True)
    old = body.splitlines(keepends=True)
    first = next((i for i, (a, b) in enumerate(zip(lines, old, strict=False)) if a != b), len(old))
    mark = entry_text(alias, {}, 0).strip()  # as with_entry wrote it
    at = next(i for i in range(first, len(lines)) if lines[i].strip() == mark)
    line = lines[at]
    indent = len(line) - len(line.lstrip(" "))
    ending = line[len(line.rstrip("\r\n")) :]
    newline = "\r\n" if "\r\n" in body else "\n"
    block = "".join(entry_lines(alias, entry, why, indent, header)).replace("\n", newline)
    lines[at] = block.removesuffix(newline) + ending
    write_checked(path, config_file, alias, bom + "".join(lines), raw)
