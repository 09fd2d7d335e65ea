"""`aigo-apply render --as kubernetes`: the objects as multi-document YAML for
`kubectl apply --server-side -f -`, written by config/machine_text.yaml_text (files as literal blocks,
every value read back exactly, no line a CI runner takes for a command). Secrets come without values
(the objects never have any here), with a comment saying where `aigo-apply apply` takes each one from.
Pure."""

from __future__ import annotations

from collections.abc import Sequence

from aigo_apply.config.machine_text import yaml_text
from aigo_apply.errors import UnsafeSetting
from aigo_apply.json_types import JsonMap
from aigo_apply.json_types import obj as _dict
from aigo_apply.kube.secrets import SOURCES

SECRET_NOTE = (
    "# No values here: `aigo-apply apply` fills each key from the reference in the annotation\n"
    f"# {SOURCES} (applied as printed, the Secret holds no data).\n"
)


def to_yaml(objs: Sequence[JsonMap]) -> str:
    docs = []
    for obj in objs:
        if obj["kind"] == "Secret" and ("data" in obj or "stringData" in obj):
            raise UnsafeSetting(f"refusing to print Secret {_dict(obj['metadata'])['name']}: it holds values")
        text = yaml_text(obj)
        docs.append("---\n" + (SECRET_NOTE if obj["kind"] == "Secret" else "") + text)
    return "".join(docs)
