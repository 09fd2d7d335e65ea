"""How YAML readers other than PyYAML resolve a plain scalar, written here from the specs (not from
aigo-apply's code), so that a test can hold that every YAML aigo-apply prints reads the same in each:
the YAML 1.2 core schema (spec 1.2.2, section 10.3.2: what kubectl's go-yaml, editors and ruamel.yaml
read) and the YAML 1.1 types as yaml.org/type writes them (bools y/n/on/off, base 60, dates), but for
one slip of that page: its float's `\\.[0-9.]*` would make `127.0.0.1` a float, which no reader does
(PyYAML, go-yaml, SnakeYAML and Ruby's Psych all allow one point)."""

from __future__ import annotations

import re

import yaml

STR, NULL, BOOL, INT, FLOAT = "str", "null", "bool", "int", "float"

CORE_12 = [  # in the order the spec's table lists them
    (NULL, r"null|Null|NULL|~|"),
    (BOOL, r"true|True|TRUE|false|False|FALSE"),
    (INT, r"[-+]?[0-9]+"),
    (INT, r"0o[0-7]+"),
    (INT, r"0x[0-9a-fA-F]+"),
    (FLOAT, r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?"),
    (FLOAT, r"[-+]?(\.inf|\.Inf|\.INF)"),
    (FLOAT, r"\.nan|\.NaN|\.NAN"),
]
YAML_11 = [  # yaml.org/type: bool, int, float, null, timestamp, merge, value
    (BOOL, r"y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF"),
    (INT, r"[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(:[0-5]?[0-9])+"),
    (
        FLOAT,
        r"[-+]?([0-9][0-9_]*)?\.[0-9_]*([eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+\.[0-9_]*"
        r"|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)",
    ),
    (NULL, r"~|null|Null|NULL|"),
    (
        "timestamp",
        r"[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]"
        r"|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?([Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9]"
        r"(\.[0-9]*)?(([ \t]*)Z|[-+][0-9][0-9]?(:[0-9][0-9])?)?",
    ),
    ("merge", r"<<"),
    ("value", r"="),
]
_PYYAML = {
    "tag:yaml.org,2002:str": STR,
    "tag:yaml.org,2002:null": NULL,
    "tag:yaml.org,2002:bool": BOOL,
    "tag:yaml.org,2002:int": INT,
    "tag:yaml.org,2002:float": FLOAT,
    "tag:yaml.org,2002:timestamp": "timestamp",
}


def resolve(schema: list[tuple[str, str]], plain: str) -> str:
    """What `schema` reads the plain scalar `plain` as."""
    return next((kind for kind, rule in schema if re.fullmatch(rule, plain)), STR)


def plain_scalars(text: str) -> list[tuple[str, str]]:
    """Each plain scalar of `text` (every document), with what PyYAML read it as."""
    found: list[tuple[str, str]] = []

    def walk(node: yaml.Node) -> None:
        if isinstance(node, yaml.ScalarNode):
            if not node.style:
                found.append((node.value, _PYYAML.get(node.tag, node.tag)))
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                walk(key)
                walk(value)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                walk(item)

    for document in yaml.compose_all(text, Loader=yaml.SafeLoader):
        if document is not None:
            walk(document)
    return found


def read_alike(text: str) -> list[str]:
    """The plain scalars of `text` that YAML 1.2's core schema or YAML 1.1's types read otherwise than
    PyYAML does (empty when every reader reads the same values)."""
    return [
        f"{value!r}: PyYAML {kind}, YAML 1.2 {resolve(CORE_12, value)}, YAML 1.1 {resolve(YAML_11, value)}"
        for value, kind in plain_scalars(text)
        if {resolve(CORE_12, value), resolve(YAML_11, value)} - {kind}
    ]
