"""The writers of the machine formats aigo-apply prints: JSON, YAML and shell words. Each escapes in
its own grammar, so a parser reads back exactly the value it was given, and no line of its output is a
CI runner's workflow command, so cli/ci_output's guard (which rewrites such lines of human text) finds
nothing to rewrite in them.

GitHub Actions reads a line (split at LF and CR) as a command when it begins with `::` after white
space, or holds `##[` anywhere. The writers keep both out and any other character a terminal would act
on (controls, bidi and other format characters, line separators), each in its grammar:
- JSON: such characters as `\\uXXXX`, the `[` of `##[` as `\\u005b` (a line of JSON never begins
  inside a string: JSON writes a line feed as `\\n`);
- YAML: a text that holds any of them is a double-quoted scalar, the `[` of `##[` written `\\x5b`,
  the others `\\xNN`/`\\uNNNN`; a text that begins with `:` is quoted so that no key opens a line;
  a text that any YAML reader (1.1 or 1.2, PyYAML, go-yaml) would read plain as a null, bool, number
  or date is quoted too, so `kubectl` reads `1e3` or `0o17` back as the text it is;
- shell: a word in single quotes, its `##[` split as `##''[` and a line inside it that would begin
  with `:` opened with `''`; a character a terminal acts on comes from `printf`'s octal escapes.
Pure: the standard library and PyYAML."""

from __future__ import annotations

import json
import re

import yaml

_OLD_COMMAND = "##["
_LINE = re.compile(r"[^\r\n]*")


def is_command(line: str) -> bool:
    """Whether a CI runner would read `line` (one line, no line break) as a workflow command."""
    return line.lstrip().startswith("::") or _OLD_COMMAND in line


# -- JSON -------------------------------------------------------------------------------------------


def json_text(data: object, *, indent: int | None = None, ascii: bool = True, sort_keys: bool = False) -> str:
    """`data` as JSON that json.loads reads back to the same values: with `ascii`, everything beyond
    ASCII as `\\u` escapes (json.dumps's default); without, only characters that are not printable."""
    text = json.dumps(data, indent=indent, ensure_ascii=ascii, sort_keys=sort_keys)
    if not ascii and not text.replace("\n", "").isprintable():  # (line feeds: indent's own)
        text = "".join(c if c.isprintable() or c == "\n" else _json_escape(c) for c in text)
    return text.replace(_OLD_COMMAND, "##\\u005b")  # `#` is only ever inside a string: so is the `[`


def _json_escape(char: str) -> str:
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


# -- YAML -------------------------------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    """Plain YAML: no anchors or aliases, even for equal parts; a text of lines (a file) as a literal
    block where YAML can write it so and no line of it needs escaping; any text that needs
    escaping double-quoted (see the module's docstring)."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def _needs_quotes(value: str) -> bool:
    return not value.isprintable() or _OLD_COMMAND in value or value.lstrip().startswith(":")


# What some YAML reader resolves a plain scalar to when it is not a string. PyYAML's own resolver
# (YAML 1.1 as PyYAML reads it) is asked by its emitter already; these are the others: the YAML 1.1
# types (bools y/n/on/off, base 60, dates, `<<`, `=`; a float has one point, as every reader takes it,
# not the `[0-9.]*` of yaml.org/type that would make `127.0.0.1` a float),
# the YAML 1.2 core schema (spec 10.3.2: `1e3`, `-.5e3`, `0o17`, `+.inf`), and go-yaml's (kubectl's)
# reading of numbers: every `_` dropped, then Go's integer syntax (`08`, no octal, is the float 8) or
# a float.
_WORD = re.compile(
    r"~|null|Null|NULL|y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF|<<|="
)
_DATE = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt \t].*)?", re.DOTALL)
_YAML11_NUMBER = re.compile(
    r"[-+]?(?:0b[0-1_]+|0[0-7_]+|0|[1-9][0-9_]*|0x[0-9a-fA-F_]+|[1-9][0-9_]*(?::[0-5]?[0-9])+"
    r"|(?:[0-9][0-9_]*)?\.[0-9_]*(?:[eE][-+][0-9]+)?|[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*"
    r"|\.(?:inf|Inf|INF))|\.(?:nan|NaN|NAN)"
)
_NUMBER = re.compile(  # with every `_` taken out first
    r"[-+]?(?:0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|\.(?:inf|Inf|INF))|\.(?:nan|NaN|NAN)"
)


def plain_reads_as_other(value: str) -> bool:
    """Whether a YAML reader other than PyYAML (YAML 1.1 by its spec, YAML 1.2's core schema,
    go-yaml as kubectl reads manifests) would read `value`, written plain, as something other than
    this text: a null, a bool, a number or a date. Such a text is written double-quoted."""
    return (
        value == ""
        or any(rule.fullmatch(value) for rule in (_WORD, _DATE, _YAML11_NUMBER))
        or _NUMBER.fullmatch(value.replace("_", "")) is not None
    )


def _blockable(value: str) -> bool:
    """Only line feeds as control characters, no line ending in white space, none needing escapes,
    no leading space on the first line."""
    lines = value.split("\n")
    return not value.startswith(" ") and all(
        not line.endswith((" ", "\t")) and not _needs_quotes(line) for line in lines
    )


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value and _blockable(value):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    style = '"' if _needs_quotes(value) else "'" if plain_reads_as_other(value) else None  # PyYAML's quotes
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def yaml_text(data: object) -> str:
    """`data` as block-style YAML that yaml.safe_load reads back to the same values.
    Every character that is not printable, and every `##[`, can only be inside a double-quoted scalar
    (`_needs_quotes`), where they are written as escapes."""
    text = yaml.dump(
        data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True, width=2**31 - 1
    )
    if not text.replace("\n", "").isprintable():  # what PyYAML leaves as it is (bidi, NBSP...)
        text = "".join(c if c.isprintable() or c == "\n" else _yaml_escape(c) for c in text)
    return text.replace(_OLD_COMMAND, "##\\x5b")


def yaml_comment(text: str) -> str:
    """`text` (one line, from outside: a file name) as the text of a YAML comment: shown, not read."""
    shown = "".join(c if c.isprintable() else _yaml_escape(c) for c in text)
    return shown.replace(_OLD_COMMAND, "##\\x5b")


def _yaml_escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


# -- shell ------------------------------------------------------------------------------------------

_SAFE_WORD = re.compile(r"[\w@%+=:,./-]+", re.ASCII)


def shell_word(text: str) -> str:
    """`text` as one word a POSIX shell reads back exactly: as it is when it holds only characters no
    shell treats specially (and does not begin with `:`), else single-quoted (see the module's
    docstring)."""
    if _SAFE_WORD.fullmatch(text) and not text.startswith(":"):
        return text
    out = ["'"]
    for char in text:
        if char == "'":
            out.append("'\\''")
        elif char.isprintable() or char in "\n\t":
            out.append(char)
        else:  # a control, format or separator character: its UTF-8 bytes from printf
            octal = "".join(f"\\{byte:03o}" for byte in char.encode("utf-8", "surrogatepass"))
            out.append(f"'\"$(printf '{octal}')\"'")
    out.append("'")
    word = "".join(out).replace(_OLD_COMMAND, "##''[")
    return "\n".join(
        "''" + line if i and line.lstrip().startswith(":") else line for i, line in enumerate(word.split("\n"))
    )
