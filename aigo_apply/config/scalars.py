"""What a YAML scalar means, without YAML's silent rewrites: YAML 1.1 reads `0x1A:` as the key 26,
`off:` as false, `0123` as 83, `1:30` as 90 and `2024-01-01` as a date. A name (a key) must stay
exactly what was written, so such keys are refused with a "quote it" hint; an environment value is
text for the engine, so it is kept exactly as written; a number is accepted only in plain decimal.
No key or value may hold a character that hides text (config/invisible.py), whatever it is for.
"""

from __future__ import annotations

import re

import yaml

from aigo_apply.config import invisible
from aigo_apply.json_types import JsonScalar

TAG = "tag:yaml.org,2002:"
STR, INT, FLOAT, BOOL, NULL, TIMESTAMP = (TAG + t for t in ("str", "int", "float", "bool", "null", "timestamp"))
PLAIN_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)\Z")
PLAIN_FLOAT = re.compile(
    r"[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\Z|[-+]?\.(?:inf|Inf|INF)\Z|\.(?:nan|NaN|NAN)\Z"
)
MULTI_LINE = (
    "this value is written over several lines; every value in aigo.yaml fits on one line "
    "(quote it if it needs special characters)"
)


def is_env_value(path: tuple[str | int, ...]) -> bool:
    """models.ALIAS.env.NAME, and model.env.NAME of a portable definition (edit/portable.py): text handed
    to the engine, so it keeps the characters written (`3.10` stays 3.10, `On` stays On)."""
    return (len(path) == 4 and path[0] == "models" and path[2] == "env") or (
        len(path) == 3 and path[:2] == ("model", "env")
    )


def construct(loader: yaml.SafeLoader, node: yaml.Node, as_text: bool = False) -> tuple[JsonScalar, str | None]:
    """The scalar's value and, when YAML would change what was written, the problem to report."""
    text, tag = node.value, node.tag
    if hidden := invisible.problem(text):
        return text, hidden
    if tag == STR:  # what YAML's constructor gives for one: the text itself (most values; no call needed)
        return text, None
    if as_text and tag in (INT, FLOAT, BOOL, TIMESTAMP):
        return text, None
    if tag == INT and PLAIN_INT.match(text):  # plain decimal: what YAML's int constructor gives, directly
        return int(text), None
    if tag == TIMESTAMP:
        return text, f"YAML reads {text} as a date; quote it ({_quoted(text)}) to keep it as written"
    if tag not in (STR, INT, FLOAT, BOOL, NULL):
        return text, f"the YAML tag {tag.replace(TAG, '!!')} is not used in aigo.yaml; remove it"
    try:
        value = loader.construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError, OverflowError) as exc:
        return text, f"cannot read value: {getattr(exc, 'problem', exc)}"
    assert value is None or isinstance(value, (bool, int, float)), "what YAML makes of these four tags"
    if tag == INT and not PLAIN_INT.match(text):
        return value, _rewritten(text, f"the number {value}", "write the number in plain decimal")
    if tag == FLOAT and not PLAIN_FLOAT.match(text):
        return value, _rewritten(text, f"the number {value}", "write the number in plain decimal")
    return value, None


def key_problem(loader: yaml.SafeLoader, node: yaml.Node) -> str | None:
    """Why a key is not the name written (YAML reads it as a number, boolean, date or null), if so."""
    text, tag = node.value, node.tag
    if hidden := invisible.problem(text, "this name"):
        return hidden
    if tag == STR:
        return None
    if not text:
        return "a key is empty; write a name"
    what = {NULL: "empty (null)", TIMESTAMP: "a date"}.get(tag, f"a value tagged {tag.replace(TAG, '!!')}")
    if tag in (INT, FLOAT, BOOL):
        value, _ = construct(loader, node)
        what = f"the boolean {str(value).lower()}" if tag == BOOL else f"the number {value}"
    return _rewritten(text, what, "")


def _rewritten(text: str, what: str, otherwise: str) -> str:
    also = f"{otherwise}, or " if otherwise else ""
    return f"YAML reads {text} as {what}, not as the text written; {also}quote it ({_quoted(text)})"


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
