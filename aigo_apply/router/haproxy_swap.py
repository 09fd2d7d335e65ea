"""The router's part of swap groups, rendered beside haproxy.cfg: swap.lua (the action
that wakes a sleeping on-demand model before its request is forwarded, and /metrics/swaps) and
on-demand.map (alias -> group: the ACL that sends only those requests through Lua). The engines'
control endpoints (/sleep, /wake_up, /is_sleeping) are reached by this Lua only: the router forwards
none of them (router/haproxy_allowlist.py). Pure; every value is checked again right before it
becomes part of a Lua literal."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, TypedDict

from aigo_apply.config.swap_groups import MAX_AWAKE_LIMIT
from aigo_apply.desired.engines.router import ROUTER_MOUNT
from aigo_apply.desired.types import Route, RouterSettings
from aigo_apply.errors import RouterError
from aigo_apply.router.haproxy_safety import check_lua_value

_SOCKET = re.compile(r"/[A-Za-z0-9/._-]{1,200}")

if TYPE_CHECKING:
    import jinja2

SWAP_TEMPLATE = "swap.lua.j2"
SWAP_FILE = "swap.lua"
MAP_FILE = "on-demand.map"
MAX_WAIT_S = 300  # a request for a sleeping model waits at most this long (or router.timeout if shorter)
CALL_MS = 120_000  # one /sleep or /wake_up call (level 1 moves the weights between GPU and host memory)
LEARN_MS = 2_000
HOLDS = "holds"  # in the router's state folder: one file per swap group apply is starting a model of
HOLD_DIR = f"{ROUTER_MOUNT}/{HOLDS}"


class LuaAddress(TypedDict):
    """Where the router's Lua reaches an engine: `addr` (unix@SOCKET, or 127.0.0.1) and its port (None
    on a socket); both None on Kubernetes, where HAProxy resolved the backend's address."""

    addr: str | None
    port: int | None


def render(env: jinja2.Environment, settings: RouterSettings, routes: list[Route]) -> dict[str, str]:
    """swap.lua and on-demand.map for the groups' routed members; nothing without any."""
    by_alias = {r.alias: r for r in routes}
    groups, members = [], []
    for group in sorted(settings.swap_groups):
        routed = [a for a in group.members if a in by_alias]
        if not routed:
            continue
        name = check_lua_value("swap group", group.name)
        awake = check_lua_value("max_awake", group.max_awake)
        if not 1 <= awake <= MAX_AWAKE_LIMIT:
            raise RouterError(f"router: refusing max_awake {awake!r} of swap group {name}: it must be 1-16")
        groups.append(
            {"name": name, "max_awake": awake, "members": [check_lua_value("model alias", a) for a in routed]}
        )
        for alias in routed:
            route = by_alias[alias]
            members.append(
                {
                    "alias": check_lua_value("model alias", alias),
                    "group": name,
                    "backend": check_lua_value("backend name", route.backend),
                    **lua_address(route),
                }
            )
    if not groups:
        return {}
    values: dict[str, object] = {  # the template's words
        "project": check_lua_value("project", settings.project),
        "groups": groups,
        "members": members,
        "wait_ms": min(MAX_WAIT_S, settings.timeout_s) * 1000,
        "call_ms": CALL_MS,
        "learn_ms": LEARN_MS,
        "hold_dir": HOLD_DIR,
    }
    return {
        SWAP_FILE: env.get_template(SWAP_TEMPLATE).render(**values),
        MAP_FILE: "".join(f"{m['alias']} {m['group']}\n" for m in members),
    }


def lua_address(route: Route) -> LuaAddress:
    """Where swap.lua connects to a member's engine (a Lua string literal and a number): its Unix
    socket as HAProxy names one, or 127.0.0.1 and its port."""
    if route.router_socket is None:
        return {"addr": "127.0.0.1", "port": check_lua_value("port", route.port)}
    if not _SOCKET.fullmatch(route.router_socket) or "/../" in route.router_socket:
        raise RouterError(f"router: refusing the socket path {route.router_socket!r} of model {route.alias}")
    return {"addr": f"unix@{route.router_socket}", "port": None}
