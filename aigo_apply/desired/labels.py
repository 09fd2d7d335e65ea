"""Every Docker label key aigo-apply reads or writes. The labels on the containers are the state:
there is no state file, so this module is the whole schema of that state.

A container is ours only when it carries MANAGED_BY=aigo-apply and PROJECT=<project> (and its labels
and name pass observe/label_checks.py); anything else is never touched. The same holds for the
project's cache volumes (one per engine image): each is made with `for_volume`'s labels, naming its
image, and apply's pruning and destroy remove a volume only when `owns_volume` says so and its name is
the one aigo-apply derives from that image (observe/cache_volumes.py; a user's volume is kept).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from aigo_apply import __version__
from aigo_apply.config.env_rules import credential_kind
from aigo_apply.desired.types import canonical_json
from aigo_apply.errors import UnsafeSetting

PREFIX = "io.aigo-apply."
MANAGED_BY = PREFIX + "managed-by"
PROJECT = PREFIX + "project"
ROLE = PREFIX + "role"  # "engine", "router", or (on a volume) "cache"
MODEL = PREFIX + "model"  # the alias
ENGINE = PREFIX + "engine"
SPEC = PREFIX + "spec"  # canonical spec, compact JSON, secrets as references only
SPEC_HASH = PREFIX + "spec-hash"  # hash of the full container definition (see ContainerSpec.definition)
LABELS_VERSION = PREFIX + "labels-version"
CREATED_BY = PREFIX + "created-by"  # aigo-apply version; informational, never compared
SLOT = PREFIX + "slot"  # "b": the engine serves on its second socket (a parallel replace); absent: the first
IMAGE = PREFIX + "image"  # on a cache volume: the engine image reference whose compiled code it keeps

MANAGER = "aigo-apply"
CURRENT_LABELS_VERSION = "1"
ROLE_ENGINE = "engine"
ROLE_ROUTER = "router"
ROLE_CACHE = "cache"


def project_filter(project: str) -> dict[str, list[str]]:
    """Docker API filter that selects only this project's containers."""
    return {"label": [f"{MANAGED_BY}={MANAGER}", f"{PROJECT}={project}"]}


def references_only(spec: object, where: str = "spec") -> None:
    """The spec label is readable by anyone who can list containers: refuse to store a value that
    looks like a credential (validation refuses it first; this holds for a spec from elsewhere)."""
    if _holds_credential(spec):  # rarely: only then is each value's place spelled out for the message
        _refuse_credentials(spec, where)


def _holds_credential(spec: object) -> bool:
    """Whether any key or string in `spec` looks like a credential (what _refuse_credentials
    searches, without building a place name for every value of every spec)."""
    stack = [spec]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack += value
            stack += value.values()
        elif isinstance(value, list):
            stack += value
        elif isinstance(value, str) and (_spec_text_kind(value) if len(value) <= 256 else credential_kind(value)):
            return True
    return False


@functools.lru_cache(maxsize=4096)
def _spec_text_kind(text: str) -> str | None:
    """credential_kind of a short text of a spec, searched once per process: the same names and
    values (keys, engine, image, parser) come back in every model's spec of every plan. Only spec
    text, never a secret's value, is kept here."""
    return credential_kind(text)


def _refuse_credentials(spec: object, where: str) -> None:
    """Raise for the first key or string (in order) that looks like a credential, naming its place."""
    if isinstance(spec, dict):
        for key, value in spec.items():
            _refuse_credentials(key, where)
            _refuse_credentials(value, f"{where}.{key}")
    elif isinstance(spec, list):
        for n, value in enumerate(spec):
            _refuse_credentials(value, f"{where}[{n}]")
    elif isinstance(spec, str) and (kind := credential_kind(spec)):
        raise UnsafeSetting(f"{where}: refusing to store {kind} in a container label; pass secrets by reference")


def for_engine(
    project: str, alias: str, engine: str, spec: Mapping[str, object], definition_hash: str
) -> dict[str, str]:
    references_only(spec, f"model '{alias}'")
    return {
        MANAGED_BY: MANAGER,
        PROJECT: project,
        ROLE: ROLE_ENGINE,
        MODEL: alias,
        ENGINE: engine,
        SPEC: canonical_json(spec),
        SPEC_HASH: definition_hash,
        LABELS_VERSION: CURRENT_LABELS_VERSION,
        CREATED_BY: __version__,
    }


def for_router(project: str, spec: Mapping[str, object], definition_hash: str) -> dict[str, str]:
    references_only(spec, "router")
    return {
        MANAGED_BY: MANAGER,
        PROJECT: project,
        ROLE: ROLE_ROUTER,
        SPEC: canonical_json(spec),
        SPEC_HASH: definition_hash,
        LABELS_VERSION: CURRENT_LABELS_VERSION,
        CREATED_BY: __version__,
    }


def for_volume(project: str, image: str | None = None) -> dict[str, str]:
    """The labels of a volume the tool makes for the project: the compile cache of its engines on
    `image` (None: a volume of no one image)."""
    return {
        MANAGED_BY: MANAGER,
        PROJECT: project,
        ROLE: ROLE_CACHE,
        **({IMAGE: image} if image is not None else {}),
        LABELS_VERSION: CURRENT_LABELS_VERSION,
        CREATED_BY: __version__,
    }


def owns_volume(labels: object, project: str) -> bool:
    """Whether a volume's labels (as Docker reports them: possibly null) say the tool made it for
    this project. A volume of our name without them is someone else's, or an older aigo-apply's."""
    if not isinstance(labels, dict):
        return False
    return is_ours(labels, project) and labels.get(ROLE) == ROLE_CACHE


def is_ours(labels: dict[str, str], project: str) -> bool:
    return labels.get(MANAGED_BY) == MANAGER and labels.get(PROJECT) == project


def read_spec(labels: dict[str, str]) -> dict[str, Any] | None:
    """The canonical spec stored on a container, or None when missing or unreadable."""
    try:
        spec = json.loads(labels.get(SPEC, ""))
    except ValueError:
        return None
    return spec if isinstance(spec, dict) else None
