"""`aigo-apply render --as kubernetes`: the objects as multi-document YAML for
`kubectl apply --server-side -f -`. Secrets come without values (the objects never have any here),
with a comment saying where `aigo-apply apply` takes each one from. Pure."""

from __future__ import annotations

from typing import Any

import yaml

from aigo_apply.errors import UnsafeSetting
from aigo_apply.kube.secrets import SOURCES

SECRET_NOTE = (
    "# No values here: `aigo-apply apply` fills each key from the reference in the annotation\n"
    f"# {SOURCES} (applied as printed, the Secret holds no data).\n"
)


class _Dumper(yaml.SafeDumper):
    """Plain YAML: no anchors or aliases, even for equal parts; files (the router's configuration)
    as literal blocks where YAML can write them so, else quoted with escapes."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    block = "\n" in value.rstrip("\n") and _blockable(value)
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if block else None)


def _blockable(value: str) -> bool:
    """Only newlines as control characters, no line ending in a space, no leading space on line 1."""
    lines = value.split("\n")
    return all(line.isprintable() and not line.endswith((" ", "\t")) for line in lines) and not value.startswith(" ")


_Dumper.add_representer(str, _text)


def to_yaml(objs: list[dict[str, Any]]) -> str:
    docs = []
    for obj in objs:
        if obj["kind"] == "Secret" and ("data" in obj or "stringData" in obj):
            raise UnsafeSetting(f"refusing to print Secret {obj['metadata']['name']}: it holds values")
        text = yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True, width=4096)
        docs.append("---\n" + (SECRET_NOTE if obj["kind"] == "Secret" else "") + text)
    return "".join(docs)
