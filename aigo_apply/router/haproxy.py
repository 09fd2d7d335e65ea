"""Renders the router's files from templates/ with Jinja2 (strict undefined): the HAProxy config,
the model -> backend map, the Lua service that answers `/v1/models` from HAProxy's health checks
(models.lua), the routed models as JSON (models.json: what plan and status read; it is not served)
and the JSON error bodies. Pure: the same
routes and settings always give byte-identical files, so the plan compares them as text. Every
value is checked again here (router/haproxy_safety.py), right before it becomes a word of these files."""

from __future__ import annotations

import ipaddress
import json
import re
from functools import cache
from typing import TYPE_CHECKING, TypedDict

from aigo_apply.desired.engines.router import LIVE
from aigo_apply.desired.types import Route, RouterSettings
from aigo_apply.errors import RouterError
from aigo_apply.resources import data_dir
from aigo_apply.router import haproxy_metrics as metrics
from aigo_apply.router import haproxy_swap as swap
from aigo_apply.router.haproxy_allowlist import FORM_PATHS, JSON_PATHS, acl_lines
from aigo_apply.router.haproxy_safety import (
    check_adapters,
    check_conf,
    check_keys,
    check_lua_value,
    check_routes,
    check_settings,
)
from aigo_apply.router.render_key import RENDER_KEY_FILE, key_record, render_key

if TYPE_CHECKING:
    import jinja2

KEYS_FILE = "api-keys"
KEYS_DIGEST_FILE = "api-keys.digest"  # a salted, slow hash of the keys: a key change is a reload, never stored
TEMPLATE = "haproxy.cfg.j2"
LUA_TEMPLATE = "models.lua.j2"  # GET /v1/models: the routed models whose engine is healthy now
MODEL_HOLDS = "models"  # below the holds folder: one file per model whose engine apply is replacing
ROUTES_HEADER = "x-aigo-routes"  # on /v1/models: every routed alias, healthy or not (the reload check)


@cache
def _env() -> jinja2.Environment:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render_files(
    settings: RouterSettings,
    routes: list[Route],
    conf: str | None = None,
    addresses: dict[str, str] | None = None,
    held: frozenset[str] = frozenset(),
) -> dict[str, str]:
    """Every file of the router's config folder except the API key file, by relative name. `conf`
    is the folder the config names its files in (the live one, unless checking a new generation).
    `addresses` (Kubernetes: alias -> Service DNS name and port) replaces each engine's
    127.0.0.1:PORT; those names are resolved through the pod's DNS, at start and while running.
    `held`: the models whose new requests wait while apply replaces their engine (models.lua)."""
    routes = sorted(routes)
    check_settings(settings)
    check_routes(routes)
    check_adapters(settings.adapters, routes)
    adapters = routed_adapters(settings, routes)
    check_conf(conf or LIVE)
    if addresses is not None:
        check_addresses(addresses, routes)
    swap_files = swap.render(_env(), settings, routes)  # on-demand models (swap groups); none without any
    metrics_files = metrics.render(_env(), settings, routes, kubernetes=addresses is not None)
    config = (
        _env()
        .get_template(TEMPLATE)
        .render(
            project=settings.project,
            conf=conf or LIVE,
            bind=settings.bind,
            port=settings.port,
            api_keys=settings.api_keys,
            routes=routes,
            addresses=addresses or {},
            servers={r.alias: server_address(r, addresses) for r in routes},
            held=held,
            # the buffer holds the whole body to route it by its "model", and a mebibyte more, so
            # that a body over the limit (chunked, with no length said) shows as more than it
            bufsize=(settings.max_body_mb + 1) * 1024 * 1024,
            max_body=settings.max_body_mb * 1024 * 1024,
            timeout_client=f"{settings.timeout_s}s",
            timeout_server=f"{settings.timeout_s}s",
            hard_stop_after=f"{settings.timeout_s}s",
            swap=bool(swap_files),
            json_paths=acl_lines(sorted(JSON_PATHS)),
            form_paths=acl_lines(sorted(FORM_PATHS)),
            metrics_need_key=settings.api_keys and not settings.metrics_without_key,
            kubernetes=addresses is not None,
            own_metrics=metrics.OWN_SOCKET,
            loopback=ipaddress.ip_address(settings.bind).is_loopback,
        )
    )
    files = {
        "haproxy.cfg": config,
        "models.lua": _render_lua(settings, routes, adapters, held),
        **metrics_files,
        "held.map": "".join(f"{alias} {r.backend}\n" for alias, r in adapters.items() if r.alias in held)
        + "".join(f"{r.alias} {r.backend}\n" for r in routes if r.alias in held),
        **swap_files,
        "models.map": "".join(f"{r.alias} {r.backend}\n" for r in routes)
        + "".join(f"{alias} {r.backend}\n" for alias, r in adapters.items()),
        "models.json": json.dumps(
            {
                "object": "list",
                "data": [
                    {
                        "id": r.alias,
                        "object": "model",
                        "created": 0,
                        "owned_by": r.owned_by,
                        "root": r.alias,
                        "parent": None,
                        "max_model_len": r.max_model_len,
                    }
                    for r in routes
                ]
                + [
                    {
                        "id": alias,
                        "object": "model",
                        "created": 0,
                        "owned_by": r.owned_by,
                        "root": alias,
                        "parent": r.alias,
                        "max_model_len": r.max_model_len,
                    }
                    for alias, r in adapters.items()
                ],
            },
            indent=1,
        )
        + "\n",
        "errors/400.json": _error(
            'The request needs a JSON body with a "model" field; GET /v1/models lists the models served here.',
            "BadRequestError",
            400,
            "model",
        ),
        "errors/401.json": _error(
            "Missing or invalid API key: send 'Authorization: Bearer KEY'.", "AuthenticationError", 401
        ),
        "errors/400-path.json": _error(
            "The request path holds a control character or is not in normal form (//, /./, /../ or a "
            "trailing /); send the API path as written, such as /v1/chat/completions.",
            "BadRequestError",
            400,
        ),
        "errors/400-model.json": _error(
            'The "model" field holds a control character; GET /v1/models lists the models served here.',
            "BadRequestError",
            400,
            "model",
        ),
        "errors/404-path.json": _error(
            "Not found: this endpoint serves GET /v1/models and the inference API (POST /v1/chat/completions, "
            "/v1/completions, /v1/embeddings and the others its documentation lists) for the models it routes.",
            "NotFoundError",
            404,
        ),
        "errors/403-host.json": _error(
            "The Host header must name this machine (localhost or 127.0.0.1): the router is bound to loopback, "
            "and a request for another name is refused (it could be a web page whose name was rebound to it).",
            "PermissionDeniedError",
            403,
        ),
        "errors/403-page.json": _error(
            "An upload a web page sent is refused: the router serves API clients, and a page on any site could "
            "post a form here without asking. Send it from a program (no Origin or Sec-Fetch-Site header).",
            "PermissionDeniedError",
            403,
        ),
        "errors/415.json": _error(
            "Unsupported Media Type: send Content-Type: application/json (multipart/form-data for /v1/audio/...).",
            "BadRequestError",
            415,
        ),
        "errors/503-held.json": _error(
            "The model's engine is being replaced and did not serve again within router.hold_seconds; "
            "try again shortly.",
            "ServiceUnavailableError",
            503,
        ),
        "errors/413.json": _error(
            f"The request body is larger than this router takes ({settings.max_body_mb} MiB, router.max_body_mb).",
            "RequestTooLargeError",
            413,
        ),
    }
    if settings.api_keys and settings.keys_digest:
        files[KEYS_DIGEST_FILE] = f"pbkdf2-sha256 {settings.keys_digest}\n"
    for route in routes:
        body = _error(
            f"The engine serving model `{route.alias}` is down or not ready; try again shortly.",
            "ServiceUnavailableError",
            503,
        )
        files[f"errors/503-{route.backend}.http"] = (
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nCache-Control: no-cache\r\n"
            f"Connection: close\r\nContent-Length: {len(body.encode())}\r\n\r\n{body}"
        )
    files[RENDER_KEY_FILE] = key_record(render_key(settings, routes, addresses, held), files)
    return files


def routed_adapters(settings: RouterSettings, routes: list[Route]) -> dict[str, Route]:
    """adapter alias -> its base's route, for the adapters whose base is routed (sorted by alias):
    a request naming the adapter goes to the base's backend."""
    by_alias = {r.alias: r for r in routes}
    return {a.alias: by_alias[a.base] for a in sorted(settings.adapters) if a.base in by_alias}


_ADDRESS = re.compile(r"[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?:[0-9]{1,5}")


def server_address(route: Route, addresses: dict[str, str] | None = None) -> str:
    """Where the router reaches a route's engine: a cluster Service's DNS name and port, the
    engine's Unix socket in the mounted sockets folder, or its port on 127.0.0.1."""
    if addresses is not None:
        return addresses[route.alias]
    if route.router_socket is not None:
        return f"unix@{route.router_socket}"
    return f"127.0.0.1:{route.port}"


def check_addresses(addresses: dict[str, str], routes: list[Route]) -> None:
    """One address per route, each a DNS name and a port: a word of a `server` line, nothing more."""
    if set(addresses) != {r.alias for r in routes}:
        raise RouterError("router: refusing server addresses that do not name exactly the routed models")
    for alias, address in addresses.items():
        if not (
            isinstance(address, str) and _ADDRESS.fullmatch(address) and 1 <= int(address.rpartition(":")[2]) <= 65535
        ):
            raise RouterError(
                f"router: refusing to write the address {address!r} of model {alias} into the HAProxy files: "
                "it must be a DNS name and a port (nothing was changed)"
            )


class LuaModel(TypedDict):
    """One entry of GET /v1/models as models.lua lists it (`parent`: an adapter's base, "" for a model)."""

    backend: str
    alias: str
    owned_by: str
    max_model_len: int
    parent: str


def _render_lua(
    settings: RouterSettings,
    routes: list[Route],
    adapters: dict[str, Route] | None = None,
    held: frozenset[str] = frozenset(),
) -> str:
    """The Lua service behind GET /v1/models. Every value becomes part of a Lua string literal (or
    a number), so each is checked again right here to be a plain word that cannot end the literal.
    An adapter is listed with its base as parent, on its base's backend (up while the base is).
    A held model is listed: its requests wait for the engine apply is starting, then reach it."""
    models: list[LuaModel] = [
        {
            "backend": check_lua_value("backend name", r.backend),
            "alias": check_lua_value("model alias", r.alias),
            "owned_by": check_lua_value("engine name", r.owned_by),
            "max_model_len": check_lua_value("context length", r.max_model_len),
            "parent": "",
        }
        for r in routes
    ]
    models += [
        {
            "backend": check_lua_value("backend name", r.backend),
            "alias": check_lua_value("adapter alias", alias),
            "owned_by": check_lua_value("engine name", r.owned_by),
            "max_model_len": check_lua_value("context length", r.max_model_len),
            "parent": check_lua_value("model alias", r.alias),
        }
        for alias, r in (adapters or {}).items()
    ]
    models_only = [m for m in models if not m["parent"]]
    return (
        _env()
        .get_template(LUA_TEMPLATE)
        .render(
            project=check_lua_value("project", settings.project),
            models=models,
            routes=" ".join(m["alias"] for m in models_only),
            held_backends=sorted(check_lua_value("backend name", r.backend) for r in routes if r.alias in held),
            held_at=[
                {"alias": check_lua_value("model alias", r.alias), **swap.lua_address(r)}
                for r in sorted(routes)
                if r.alias in held
            ],
            hold_dir=f"{swap.HOLD_DIR}/{MODEL_HOLDS}",
            hold_ms=check_lua_value("hold_seconds", settings.hold_s) * 1000,
        )
    )


def keys_file(keys: list[str]) -> str:
    """The API key pattern file: one exact Authorization header value per line (each key checked
    again here: a NUL or a line break would cut or split a pattern line)."""
    check_keys(keys)
    return "".join(f"Bearer {k}\n" for k in keys)


def routes_from_models_json(text: str) -> list[str]:
    """The models' aliases a deployed /v1/models file lists (for drift checks; adapters aside)."""
    try:
        return sorted(m["id"] for m in json.loads(text).get("data", []) if not m.get("parent"))
    except (ValueError, AttributeError, KeyError, TypeError):
        return []


def adapters_from_models_json(text: str) -> dict[str, str]:
    """adapter alias -> its base model's, as a deployed /v1/models file lists them."""
    try:
        return {m["id"]: m["parent"] for m in json.loads(text).get("data", []) if m.get("parent")}
    except (ValueError, AttributeError, KeyError, TypeError):
        return {}


def _error(message: str, kind: str, code: int, param: str | None = None) -> str:
    return json.dumps({"error": {"message": message, "type": kind, "param": param, "code": code}}) + "\n"
