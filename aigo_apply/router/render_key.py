"""A generation's render key (render.key, beside its files): what its files were rendered from (the
settings, the routes, the router's code and templates) and a digest of the files themselves. A plan that
finds an untouched generation rendered from the same inputs knows its files are what this file renders,
without Jinja2 or rendering them; any other key means rendering them and comparing the files, and only
files that differ are a change. Another version of this tool has other code, so another key: that alone
is no change (served_files), and apply writes this version's key over the same files (rendered_elsewhere)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from functools import cache
from pathlib import Path

from aigo_apply import __version__
from aigo_apply.desired.types import Route, RouterSettings
from aigo_apply.resources import data_dir

RENDER_KEY_FILE = "render.key"  # what a generation was rendered from, and the digest of its files


def render_key(
    settings: RouterSettings,
    routes: list[Route],
    addresses: dict[str, str] | None = None,
    held: frozenset[str] = frozenset(),
) -> str:
    """A digest of everything the rendered files depend on (settings, routes, the templates and the
    router's code), computed without Jinja2."""
    inputs = {"settings": asdict(settings), "routes": [r.to_dict() for r in sorted(routes)], "code": code_digest()}
    if addresses is not None:
        inputs["addresses"] = dict(sorted(addresses.items()))
    if held:
        inputs["held"] = sorted(held)
    basis = json.dumps(inputs, sort_keys=True)
    return hashlib.sha256(basis.encode()).hexdigest()


def key_record(key: str, files: dict[str, str]) -> str:
    """render.key's text for `files` (a generation's, without it) rendered from `key`."""
    return json.dumps({"inputs": key, "files": _digest(files), "code": code_digest()}) + "\n"


def verified_render_key(files: dict[str, str]) -> str | None:
    """The render key a deployed folder records, or None when its files were changed since (or it
    has no key): only then does a comparison need the files rendered again."""
    try:
        record = json.loads(files.get(RENDER_KEY_FILE, ""))
        if record["files"] == _digest(served_files(files)):
            return str(record["inputs"])
    except (ValueError, KeyError, TypeError):
        pass
    return None


def rendered_elsewhere(files: dict[str, str]) -> bool:
    """Whether a deployed generation was rendered by another version of this tool (its render key
    names other code; or names none, as before keys did, or was changed or lost)."""
    try:
        return bool(json.loads(files.get(RENDER_KEY_FILE, "")).get("code") != code_digest())
    except (ValueError, AttributeError):
        return True


def served_files(files: dict[str, str]) -> dict[str, str]:
    """A generation's files without its render key: what HAProxy reads, and so what two generations
    are compared by."""
    return {name: text for name, text in files.items() if name != RENDER_KEY_FILE}


def _digest(files: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


@cache
def code_digest() -> str:
    """This version's router code: every module of router/ and every template, by name (a change to a
    template the router does not use costs one rendering and comparison, never a reload)."""
    sources = [*sorted(Path(__file__).parent.glob("*.py")), *sorted(data_dir("templates").glob("*.j2"))]
    parts = [__version__.encode()] + [f"{p.name}\0".encode() + p.read_bytes() for p in sources]
    return hashlib.sha256(b"\0".join(parts)).hexdigest()
