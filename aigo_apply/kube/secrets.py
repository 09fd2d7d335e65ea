"""The Secret objects of a deployment, rendered WITHOUT values: each carries only its keys and, in an
annotation, where each value comes from at apply time (a `{from_env: NAME}` / `{from_file: PATH}`
reference, or the Hugging Face token of the machine that applies). What `render` prints and what a
plan shows therefore never holds a secret; the apply path reads the values (platforms/secrets.py rules)
and fills a copy with `with_values` just before it sends the object to the cluster.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass

from aigo_apply.desired.types import SecretRef, canonical_json
from aigo_apply.errors import UnsafeSetting
from aigo_apply.json_types import JsonMap, JsonObject, text
from aigo_apply.json_types import obj as _dict

SOURCES = "aigo-apply.io/secret-sources"  # key -> reference (JSON); never a value
HUB_TOKEN = "hub-token"  # the reference kind of the Hugging Face token of the machine that applies
HUB_TOKEN_KEY = "token"
API_KEYS_KEY = "api-keys"  # the router's key file, as router/haproxy.keys_file writes it


@dataclass(frozen=True)
class SecretSlot:
    """One value the apply path must read and put into a Secret: `ref` None is the Hugging Face token
    (what the host's own downloads use: HF_TOKEN, or the token `hf auth login` stored)."""

    secret: str  # the Secret's name
    key: str
    ref: SecretRef | None


def secret_object(
    name: str, namespace: str, labels: Mapping[str, str], sources: dict[str, SecretRef | None]
) -> JsonObject:
    """A Secret with its keys named and no value (`data` is filled at apply time only)."""
    shown = {key: (ref.as_dict() if ref is not None else {HUB_TOKEN: "the Hugging Face token of the machine that applies"})
             for key, ref in sorted(sources.items())}  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**labels},
            "annotations": {SOURCES: canonical_json(shown)},
        },
        "type": "Opaque",
    }


def slots(obj: JsonMap) -> list[SecretSlot]:
    """The values a rendered Secret needs, read back from its annotation."""
    meta = _dict(obj["metadata"])
    name = text(meta["name"])
    sources = _dict(json.loads(text(_dict(meta["annotations"])[SOURCES])))
    out = []
    for key, ref in sorted(sources.items()):
        kind, target = next(iter(_dict(ref).items()))
        out.append(SecretSlot(name, key, None if kind == HUB_TOKEN else SecretRef(kind, text(target))))
    return out


def with_values(obj: JsonMap, values: dict[str, str]) -> JsonObject:
    """A copy of a rendered Secret with its values (base64 `data`), for the apply path only: never
    print or store the result. Every key of the Secret must be given, and no other."""
    wanted = {slot.key for slot in slots(obj)}
    if set(values) != wanted:
        raise UnsafeSetting(
            f"Secret {_dict(obj['metadata'])['name']}: values for {sorted(values)} given, keys {sorted(wanted)} expected"
        )
    data: JsonObject = {key: base64.b64encode(value.encode()).decode() for key, value in sorted(values.items())}
    return {**obj, "data": data}
