"""The names and labels of the Kubernetes objects aigo-apply makes, derived from project and alias
(pure: config/kube_rules.py refuses a file whose models would share one, kube/ names its objects).

Aliases may hold '.', '_' and capitals and be 64 characters long; object names must be DNS labels
(at most 63 lowercase letters, digits and '-', starting with a letter for a Service) and label values
at most 63 characters. So every object name is `aigo-PROJECT-ALIAS-HASH`, sanitised and cut, where
the hash is of the real project and alias: two aliases that sanitise alike (`a.b`, `a_b`) still get
distinct names, and the same file always gives the same names. The hash has 64 bits (16 hex digits),
so two aliases whose names meet cannot be found by trying (a 24-bit hash fell in under a second);
and what a hash cannot rule out, `model_names` lets validation check: the names and the name label
of every model of a file, which must be distinct. The real alias is in an annotation.
Every name and label made here is checked again right here (`check_name`, `check_label_value`).
"""

from __future__ import annotations

import hashlib
import re

from aigo_apply.errors import UnsafeSetting

MANAGED_BY = "app.kubernetes.io/managed-by"
INSTANCE = "app.kubernetes.io/instance"
NAME = "app.kubernetes.io/name"
COMPONENT = "app.kubernetes.io/component"
MANAGER = "aigo-apply"
COMPONENTS = ("model", "router", "download")

DNS_LABEL = re.compile(r"[a-z]([a-z0-9-]{0,61}[a-z0-9])?")  # RFC 1035 label: also a valid Service name
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?)?")
_HASH = 16  # hex digits: 64 bits


def digest(*parts: str, length: int = _HASH) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:length]


def _slug(text: str) -> str:
    return re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9-]", "-", text.lower())).strip("-")


def object_name(body: str, key: str, suffix: str = "") -> str:
    """`aigo-BODY-HASH[-SUFFIX]`, at most 63 characters: BODY sanitised and cut, HASH of `key`."""
    return _named(_slug(body), digest(key), suffix)


def _named(slug: str, hashed: str, suffix: str) -> str:
    """object_name of a body already sanitised (`slug`) and a key already hashed."""
    tail = f"-{hashed}" + (f"-{suffix}" if suffix else "")
    room = 63 - len("aigo-") - len(tail)
    return check_name(f"aigo-{slug[:room].strip('-') or 'x'}{tail}")


def _model_parts(project: str, alias: str) -> tuple[str, str]:
    """The sanitised body and the hash every object name of a model is made of (model_name's)."""
    return _slug(f"{project}-{alias}"), digest(f"model\0{project}\0{alias}")


def model_name(project: str, alias: str, suffix: str = "") -> str:
    """The Deployment and Service of a model (with a suffix: its other objects)."""
    return _named(*_model_parts(project, alias), suffix)


def storage_name(project: str, alias: str, storage_key: str) -> str:
    """The volume and download Job of a model: a new name for other weights or another volume,
    so a changed source downloads beside the volume still serving (PVCs and Jobs are immutable)."""
    return model_name(project, alias, digest(storage_key))


ENV_SUFFIX = "env"  # a model's Secret of secret environment variables: its object name's suffix


def env_secret_name(project: str, alias: str) -> str:
    return model_name(project, alias, ENV_SUFFIX)


def router_name(project: str) -> str:
    return object_name(f"{project}-router", f"router\0{project}")


def hub_secret_name(project: str) -> str:
    """The Secret holding the Hugging Face token, read only by download Jobs."""
    return object_name(f"{project}-hub", f"hub\0{project}")


def model_names(project: str, alias: str) -> dict[str, str]:
    """What must be the model's alone on a cluster: its object names (Deployment and Service, the env
    Secret; its volumes and Jobs extend the first with a hash of their own) and its name label, which
    its Service selects its pods by."""
    # model_name, env_secret_name and storage_name's prefix, from one sanitised body and one hash
    # (validation asks this of every model: three hashes and slugs of the same text each time otherwise)
    parts = _model_parts(project, alias)
    return {
        "Deployment and Service": _named(*parts, ""),
        "Secret": _named(*parts, ENV_SUFFIX),
        # a volume's and a download Job's name before the hash of what they hold
        "volumes and download Jobs": _named(*parts, "0" * _HASH),
        f"label {NAME}": label_value(alias),
    }


def label_value(text: str) -> str:
    """`text` when it is a valid label value, else its sanitised, cut form with a hash of it."""
    if LABEL_VALUE.fullmatch(text) and len(text) <= 63:
        return text
    cut = re.sub(r"[^A-Za-z0-9_.-]", "-", text)[: 63 - 1 - _HASH]
    cut = re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", cut)
    return check_label_value(f"{cut}-{digest(text)}" if cut else digest(text))


def instance(project: str) -> str:
    """The `app.kubernetes.io/instance` value of a project: the project itself, or (a project ending
    in '-' or '_' is no label value) its trimmed form, '.' and a hash of it. No project holds a '.',
    so no project's value is another's: a selector for one never lists another's objects."""
    if LABEL_VALUE.fullmatch(project) and len(project) <= 63:
        return project
    trimmed = project.rstrip("-_")  # a project is [a-z0-9][a-z0-9_-]*: only these can end it badly
    return check_label_value(f"{trimmed}.{digest(project)}" if trimmed else digest(project))


def labels(project: str, name: str, component: str) -> dict[str, str]:
    """The labels of every object of the project: managed-by, instance, name and component."""
    if component not in COMPONENTS:
        raise UnsafeSetting(f"refusing Kubernetes component {component!r}")
    return {
        MANAGED_BY: MANAGER,
        INSTANCE: instance(project),
        NAME: check_label_value(name),
        COMPONENT: component,
    }


def project_selector(project: str) -> str:
    """The label selector of every object of the project: what a LIST (and a prune) may touch."""
    return f"{MANAGED_BY}={MANAGER},{INSTANCE}={instance(project)}"


def check_name(name: str) -> str:
    if not DNS_LABEL.fullmatch(name):
        raise UnsafeSetting(f"refusing Kubernetes object name {name!r}: not a DNS label of at most 63 characters")
    return name


def check_label_value(value: str) -> str:
    if not (len(value) <= 63 and LABEL_VALUE.fullmatch(value)):
        raise UnsafeSetting(f"refusing Kubernetes label value {value!r}")
    return value
