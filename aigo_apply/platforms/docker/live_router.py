"""The router's live generation as its state folder holds it (platforms/docker/router_deploy.py writes
it): the files HAProxy serves from, which a plan compares with what this file renders, and the route
table they were rendered from, which the next deployment starts from. Read, never written, here."""

from __future__ import annotations

import json
import os
from pathlib import Path

from aigo_apply.desired.types import Route
from aigo_apply.errors import AigoError
from aigo_apply.router.haproxy import KEYS_FILE
from aigo_apply.router.haproxy_safety import check_routes
from aigo_apply.router.render_key import RENDER_KEY_FILE

RENDERED_EXTRA = ("routes.json", "check.cfg", KEYS_FILE)  # a generation's files that are not rendered output


def read_live(folder: Path) -> dict[str, str]:
    """The rendered files of the live generation (not the key file), for plans and drift checks
    (os.walk, not Path.rglob: a plan reads one error file per model, and pathlib's objects cost)."""
    live = os.path.join(folder, "live")
    if not os.path.isdir(live):
        return {}
    files = {}
    for root, dirs, names in os.walk(live):
        dirs.sort()
        # the folder's relative path once, not each file's (relpath makes both paths absolute each time)
        under = os.path.relpath(root, live).replace(os.sep, "/")
        for name in sorted(names):
            path = os.path.join(root, name)
            rel = name if under == "." else f"{under}/{name}"
            if rel in RENDERED_EXTRA or not os.path.isfile(path):
                continue
            try:
                with open(path, encoding="utf-8", newline="") as f:  # keep the errorfiles' CRLF as written
                    files[rel] = f.read()
            except (OSError, UnicodeDecodeError):
                files[rel] = "<unreadable>"
    return dict(sorted(files.items()))


def live_key(folder: Path) -> dict[str, str]:
    """The live generation's render key file alone, as read_live has it ({} without one): what an apply
    that changed nothing reads to know whether another version rendered the files in service."""
    path = os.path.join(folder, "live", RENDER_KEY_FILE)
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            return {RENDER_KEY_FILE: f.read()}
    except (OSError, UnicodeDecodeError):
        return {RENDER_KEY_FILE: "<unreadable>"}


def live_routes(folder: Path) -> list[Route]:
    """The route table the live generation was rendered from; none when it is unreadable or holds
    a value the router's files could not take (the next reload then writes it afresh)."""
    try:
        routes = [Route(**r) for r in json.loads((folder / "live" / "routes.json").read_text())]
        check_routes(routes)
        return routes
    except (OSError, ValueError, TypeError, RecursionError, AigoError):
        return []
