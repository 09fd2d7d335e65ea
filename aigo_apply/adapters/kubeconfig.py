"""Reading a kubeconfig file before lightkube sees it. The file is the user's (or a tool's) YAML, of
any shape: lightkube assumes kubectl's, and a list, a number, or a `clusters:` that is a mapping ended
in AttributeError and KeyError tracebacks. Here the file is read bounded and without waiting (a
FIFO or device is refused), parsed with PyYAML's safe loader, and its outline checked: a mapping
whose `clusters`, `contexts` and `users` are lists of entries with a text `name` and a mapping
under `cluster`/`context`/`user`, and a text `current-context`. A file of any other shape is one
KubeUnavailable naming the file and the place in it; what lightkube still refuses inside an entry
is mapped where lightkube is called (adapters/kube_client.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

from aigo_apply.errors import KubeUnavailable
from aigo_apply.safe_write import read_at_most

MAX_KUBECONFIG_BYTES = 16 * 1024 * 1024
SECTIONS = (("clusters", "cluster", True), ("contexts", "context", True), ("users", "user", False))
FIX = "fix the file, or point KUBECONFIG (or kubernetes.context in aigo.yaml) at a working one"


def _kind(value: Any) -> str:
    names = {dict: "a mapping", list: "a list", str: "text", bool: "a boolean", int: "a number", float: "a number"}
    return names.get(type(value), "empty")


def read_kubeconfig(path: str) -> dict[str, Any]:
    """The kubeconfig at `path` as a mapping lightkube's KubeConfig.from_dict can take."""
    data = _parse(path, _read(path))
    _check_outline(path, data)
    return data


def _read(path: str) -> bytes:
    try:
        target = Path(path).expanduser()
        info = os.stat(target)  # a symlinked ~/.kube/config is ordinary: follow it
        if not stat.S_ISREG(info.st_mode):
            raise KubeUnavailable(f"cannot read the kubeconfig {path}: not a regular file (a FIFO, device or folder)")
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise KubeUnavailable(f"cannot read the kubeconfig {path}: not a regular file")
            data = read_at_most(fd, MAX_KUBECONFIG_BYTES)
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise KubeUnavailable(
            f"no kubeconfig at {path}; set KUBECONFIG, or create ~/.kube/config (`kubectl config view` shows "
            "the one kubectl uses)"
        ) from None
    except (OSError, ValueError) as exc:
        raise KubeUnavailable(f"cannot read the kubeconfig {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if len(data) > MAX_KUBECONFIG_BYTES:
        raise KubeUnavailable(f"the kubeconfig {path} is larger than {MAX_KUBECONFIG_BYTES >> 20} MiB; {FIX}")
    return data


def _parse(path: str, data: bytes) -> dict[str, Any]:
    try:
        parsed = yaml.safe_load(data.decode("utf-8"))
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
    if not isinstance(parsed, dict):
        raise KubeUnavailable(
            f"the kubeconfig {path} is {_kind(parsed)}, not a mapping with clusters, contexts and users; {FIX}"
        )
    return parsed


def _check_outline(path: str, data: dict[str, Any]) -> None:
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
