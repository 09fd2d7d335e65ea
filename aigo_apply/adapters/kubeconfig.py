"""Reading a kubeconfig file, and the files it names, before lightkube sees them. The file is the
user's (or a tool's) YAML, of any shape: lightkube assumes kubectl's, and a list, a number, or a
`clusters:` that is a mapping ended in AttributeError and KeyError tracebacks. Here the file is read
by the one bounded reader (aigo_apply/safe_read.py, KUBECONFIG: a regular file of at most 16 MiB,
through a link too, since ~/.kube/config often is one; a FIFO or device refused without waiting),
parsed with PyYAML's safe loader and walked within bounds (depth, and values counted through
aliases), and its outline checked: a mapping whose `clusters`, `contexts` and `users` are lists of
entries with a text `name` and a mapping under `cluster`/`context`/`user`, and a text
`current-context`. A file of any other shape is one KubeUnavailable naming the file and the place
in it; what lightkube still refuses inside an entry is mapped where lightkube is called
(adapters/kube_client.py).

The files the context in use names (`tokenFile`, `client-certificate`, `client-key`,
`certificate-authority`) are read here too, by the same reader (KUBE_CREDENTIAL: a link followed,
as a service account's projected token is one; at most 4 MiB), and handed to lightkube as the
entry's inline value, so lightkube never opens a path itself: a `tokenFile` that is a FIFO once
hung `plan` for good. Relative paths are taken from the kubeconfig's folder, as lightkube takes them."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

from aigo_apply import safe_read
from aigo_apply.errors import AigoError, KubeUnavailable, Unreadable
from aigo_apply.json_types import JsonObject, arr, obj

MAX_KUBECONFIG_BYTES = safe_read.KUBECONFIG.limit
SECTIONS = (("clusters", "cluster", True), ("contexts", "context", True), ("users", "user", False))
FIX = safe_read.KUBECONFIG.fix
# (section, entry key, [(the key naming a file, the key of its inline value, base64?, whether the file wins)])
# as lightkube reads them: a tokenFile over a token, a CA file over its data, client data over client files
NAMED_FILES = (
    (
        "users",
        "user",
        (
            ("tokenFile", "token", False, True),
            ("client-certificate", "client-certificate-data", True, False),
            ("client-key", "client-key-data", True, False),
        ),
    ),
    ("clusters", "cluster", (("certificate-authority", "certificate-authority-data", True, True),)),
)


def _kind(value: object) -> str:
    names = {dict: "a mapping", list: "a list", str: "text", bool: "a boolean", int: "a number", float: "a number"}
    return names.get(type(value), "empty")


def read_kubeconfig(path: str, context: str | None = None) -> JsonObject:
    """The kubeconfig at `path` as a mapping lightkube's KubeConfig.from_dict can take, with the
    files that `context` (else its current context) names read in."""
    data = _parse(path, _read(path))
    _check_outline(path, data)
    _read_named_files(path, data, context)
    return data


def _read(path: str) -> bytes:
    try:
        target = safe_read.home_path(path, "the kubeconfig")
        data = safe_read.read(target, safe_read.KUBECONFIG, f"the kubeconfig {path}")
    except Unreadable as exc:
        if exc.missing:
            raise KubeUnavailable(
                f"no kubeconfig at {path}; set KUBECONFIG, or create ~/.kube/config (`kubectl config view` shows "
                "the one kubectl uses)"
            ) from None
        raise KubeUnavailable(str(exc)) from None
    except AigoError as exc:  # ~USER of no account
        raise KubeUnavailable(str(exc)) from None
    assert data is not None
    return data


def _parse(path: str, data: bytes) -> JsonObject:
    try:
        parsed = yaml.safe_load(data.decode("utf-8"))
        safe_read.check_tree(parsed, safe_read.KUBECONFIG.depth, safe_read.MAX_VALUES)
    except UnicodeDecodeError:
        raise KubeUnavailable(f"the kubeconfig {path} is not UTF-8 text; {FIX}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise KubeUnavailable(
            f"the kubeconfig {path}{where} is not YAML ({getattr(exc, 'problem', exc)}); {FIX}"
        ) from None
    except RecursionError:
        raise KubeUnavailable(f"the kubeconfig {path} nests too deeply to be one; {FIX}") from None
    except safe_read.BadData as exc:
        raise KubeUnavailable(f"the kubeconfig {path} {exc}; {FIX}") from None
    except (ValueError, OverflowError) as exc:  # a value YAML cannot build: an integer of 5000 digits, 2024-13-45
        raise KubeUnavailable(f"the kubeconfig {path} holds a value YAML cannot read ({exc}); {FIX}") from None
    if not isinstance(parsed, dict):
        raise KubeUnavailable(
            f"the kubeconfig {path} is {_kind(parsed)}, not a mapping with clusters, contexts and users; {FIX}"
        )
    return parsed


def _read_named_files(path: str, data: JsonObject, context: str | None) -> None:
    """Put the content of each file the context in use names into its entry, in place of the path.
    An unknown context is left to lightkube, which says which contexts there are."""
    name = context or data.get("current-context")
    contexts = [obj(e)["context"] for e in arr(data["contexts"]) if obj(e)["name"] == name]
    if not contexts:
        return
    base = safe_read.home_path(path, "the kubeconfig").parent
    for section, inner, fields in NAMED_FILES:
        wanted = obj(contexts[-1]).get(inner)  # lightkube keeps the last entry of a name
        entries = [(i, obj(obj(e)[inner])) for i, e in enumerate(arr(data.get(section))) if obj(e)["name"] == wanted]
        if not entries:
            continue
        index, entry = entries[-1]
        for file_key, value_key, encoded, file_wins in fields:
            target = entry.get(file_key)
            if target is None or (not file_wins and entry.get(value_key) is not None):
                entry.pop(file_key, None)  # lightkube would not read it
                continue
            where = f"`{section}[{index}].{inner}.{file_key}`"
            if not isinstance(target, str) or not target:
                raise KubeUnavailable(f"the kubeconfig {path}: {where} is {_kind(target)}, not a path; {FIX}")
            file = Path(target) if Path(target).is_absolute() else base / target
            try:
                raw = safe_read.read(file, safe_read.KUBE_CREDENTIAL, safe_read.shown(file))
            except Unreadable as exc:
                raise KubeUnavailable(f"the kubeconfig {path}: {where} names {exc}") from None
            assert raw is not None
            entry[value_key] = base64.b64encode(raw).decode("ascii") if encoded else _text(raw, path, where)
            del entry[file_key]


def _text(raw: bytes, path: str, where: str) -> str:
    try:
        return raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise KubeUnavailable(f"the kubeconfig {path}: {where} names a file that is not UTF-8 text; {FIX}") from None


def _check_outline(path: str, data: JsonObject) -> None:
    for section, inner, required in SECTIONS:
        entries = data.get(section)
        if entries is None and not required:
            continue
        if entries is None:
            raise KubeUnavailable(f"the kubeconfig {path} has no `{section}` list; {FIX}")
        if not isinstance(entries, list):
            raise KubeUnavailable(f"the kubeconfig {path}: `{section}` is {_kind(entries)}, not a list; {FIX}")
        for index, entry in enumerate(entries):
            where = f"{section}[{index}]"
            if not isinstance(entry, dict):
                raise KubeUnavailable(f"the kubeconfig {path}: `{where}` is {_kind(entry)}, not a mapping; {FIX}")
            if not isinstance(entry.get("name"), str):
                raise KubeUnavailable(f"the kubeconfig {path}: `{where}.name` is {_kind(entry.get('name'))}; {FIX}")
            if not isinstance(entry.get(inner), dict):
                raise KubeUnavailable(
                    f"the kubeconfig {path}: `{where}.{inner}` is {_kind(entry.get(inner))}, not a mapping; {FIX}"
                )
    current = data.get("current-context")
    if current is not None and not isinstance(current, str):
        raise KubeUnavailable(f"the kubeconfig {path}: `current-context` is {_kind(current)}, not a name; {FIX}")
