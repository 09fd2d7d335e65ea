"""The last check before a value becomes a word of the router's files (HAProxy config, map, key
file, the Lua service): the schema and the rules check the same values earlier, but a value that reaches this point
unchecked (validation bypassed, a damaged state file) must never add a line, a token or a keyword
to HAProxy's files. Also the API keys' own rules, their parsing and their digest. Pure."""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections.abc import Iterable, Sequence
from typing import TypeVar

from aigo_apply.desired.types import AdapterRoute, Route, RouterSettings
from aigo_apply.errors import RouterError

MAX_BODY_MB = 128  # tune.bufsize: HAProxy refuses 256 MiB and more when HTTP is in use
MAX_TIMEOUT_S = 86400  # HAProxy takes up to 2^31-1 ms; a day is the longest useful request
MAX_PORT = 65535
MAX_MODEL_LEN = 2**31 - 1
MAX_KEY_CHARS = 1024  # a pattern file line must fit HAProxy's line buffer
MAX_KEYS = 1000
KEY_CHARS = "1-1024 printable ASCII characters without spaces"
DIGEST_ROUNDS = 20_000  # about 10 ms a plan: slows guessing a key from the digest, keeps plan instant

_PROJECT = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
_ALIAS = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_OWNER = re.compile(r"[a-z0-9][a-z0-9._-]{0,31}")
_BIND = re.compile(r"[0-9A-Fa-f:.]{2,39}")
_CONF = re.compile(r"/[A-Za-z0-9/._-]{0,1023}")
_DIGEST = re.compile(r"[0-9a-f]{64}")
Checked = TypeVar("Checked")


def _refuse(what: str, value: object, rule: str) -> RouterError:
    return RouterError(
        f"router: refusing to write {what} {value!r} into the HAProxy files: it must be {rule} (nothing was changed)"
    )


def _integer(value: object, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


def check_settings(settings: RouterSettings) -> None:
    """project, bind, port, max_body_mb, timeout and the keys' digest, as the config allows them."""
    if not (isinstance(settings.project, str) and _PROJECT.fullmatch(settings.project)):
        raise _refuse("project", settings.project, "1-32 lowercase letters, digits, '-' or '_'")
    if not is_ip(settings.bind):
        raise _refuse("router.bind", settings.bind, "an IP address such as 127.0.0.1 or 0.0.0.0")
    if not _integer(settings.port, 1, MAX_PORT):
        raise _refuse("router.port", settings.port, f"an integer from 1 to {MAX_PORT}")
    if not _integer(settings.max_body_mb, 1, MAX_BODY_MB):
        raise _refuse("router.max_body_mb", settings.max_body_mb, f"an integer from 1 to {MAX_BODY_MB}")
    if not _integer(settings.timeout_s, 1, MAX_TIMEOUT_S):
        raise _refuse("router.timeout", settings.timeout_s, f"an integer from 1 to {MAX_TIMEOUT_S}")
    if type(settings.api_keys) is not bool:
        raise _refuse("router.api_keys", settings.api_keys, "true or false (whether keys are used)")
    if not _integer(getattr(settings, "hold_s", 300), 1, MAX_TIMEOUT_S):
        raise _refuse("router.hold_seconds", settings.hold_s, f"an integer from 1 to {MAX_TIMEOUT_S}")
    if not _integer(getattr(settings, "stall_s", 120), 0, MAX_TIMEOUT_S):
        raise _refuse("router.stall_seconds", settings.stall_s, f"an integer from 0 to {MAX_TIMEOUT_S}")
    if type(getattr(settings, "metrics_without_key", False)) is not bool:
        raise _refuse("router.metrics_without_key", settings.metrics_without_key, "true or false")
    digest = getattr(settings, "keys_digest", "")
    if not (digest == "" or (isinstance(digest, str) and _DIGEST.fullmatch(digest))):
        raise _refuse("the API keys' digest", digest, "64 hexadecimal digits, or empty while the keys are unread")


def is_ip(value: object) -> bool:
    """An IPv4 or IPv6 address in plain notation (no zone, no spaces: a word of a `bind` line)."""
    if not (isinstance(value, str) and _BIND.fullmatch(value)):
        return False
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def check_routes(routes: Sequence[Route]) -> None:
    """Each route's alias (a map key and a comment), port, length and owner; aliases unique."""
    seen: set[str] = set()
    for route in routes:
        alias = route.alias
        if not (isinstance(alias, str) and _ALIAS.fullmatch(alias)):
            raise _refuse("the model alias", alias, "1-64 letters, digits, '.', '_' or '-', starting with one")
        if alias in seen:
            raise _refuse("the model alias", alias, "unique: two routes name it")
        seen.add(alias)
        if route.port is not None and not _integer(route.port, 1, MAX_PORT):
            raise _refuse(f"the port of model {alias}", route.port, f"an integer from 1 to {MAX_PORT}, or none")
        if getattr(route, "slot", "a") not in ("a", "b") or (route.slot == "b" and route.port is not None):
            raise _refuse(
                f"the socket slot of model {alias}", route.slot, "a or b (b only for an engine on its socket)"
            )
        if not _integer(route.max_model_len, 1, MAX_MODEL_LEN):
            raise _refuse(f"the context length of model {alias}", route.max_model_len, "a positive integer")
        if not (isinstance(route.owned_by, str) and _OWNER.fullmatch(route.owned_by)):
            raise _refuse(f"the engine of model {alias}", route.owned_by, "an engine name such as vllm")


def check_adapters(adapters: Iterable[AdapterRoute], routes: Sequence[Route]) -> None:
    """Each adapter route's alias and its base's (map keys, Lua and JSON words): an adapter never
    shares a name with a model or another adapter. An adapter whose base is not routed right now (apply
    adds the models' routes one by one) is left out of the files, not refused."""
    models = {route.alias for route in routes}
    seen: set[str] = set()
    for adapter in adapters:
        alias, base = adapter.alias, adapter.base
        for what, name in (("the adapter alias", alias), (f"the base model of adapter {alias!r}", base)):
            if not (isinstance(name, str) and _ALIAS.fullmatch(name)):
                raise _refuse(what, name, "1-64 letters, digits, '.', '_' or '-', starting with one")
        if alias in models or alias in seen:
            raise _refuse("the adapter alias", alias, "unique among the routed models and adapters")
        seen.add(alias)


_LUA_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def check_lua_value(what: str, value: Checked) -> Checked:
    """A value about to go into the Lua service (models.lua): a word of letters, digits, '.', '_'
    or '-' (it can neither end a Lua or JSON string literal nor start a comment or a new line), or
    an integer in HAProxy's range. Returned unchanged, so the check sits where the value is used."""
    if type(value) is int:
        if not _integer(value, 0, MAX_MODEL_LEN):
            raise _refuse(what, value, f"an integer from 0 to {MAX_MODEL_LEN}")
        return value
    if not (isinstance(value, str) and _LUA_WORD.fullmatch(value)):
        raise _refuse(what, value, "1-128 letters, digits, '.', '_' or '-', starting with a letter or digit")
    return value


def check_conf(conf: object) -> None:
    """The folder the config names its files in: an absolute path of plain characters."""
    if not (isinstance(conf, str) and _CONF.fullmatch(conf) and ".." not in conf.split("/")):
        raise _refuse("the config folder", conf, "an absolute path of letters, digits, '/', '.', '_' or '-'")


def parse_keys(raw: str) -> list[str]:
    """The keys a secret holds: one per line or comma-separated; ASCII blanks around each trimmed
    (anything else, non-ASCII spaces included, stays part of the key and is judged by its rules)."""
    return [k for k in (part.strip(" \t\r\f\v") for part in re.split(r"[,\n]", raw)) if k]


def key_problem(key: str) -> str | None:
    """Why a key cannot go into HAProxy's key file (never quoting the key), or None."""
    if "\x00" in key:
        return "holds a NUL character (HAProxy would cut the key there, so its prefix would be accepted)"
    if any(c in " \t" for c in key):
        return "holds a space or a tab"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in key):
        return "holds a control character"
    if any(ord(c) > 0x7F for c in key):
        return "holds a non-ASCII character"
    if len(key) > MAX_KEY_CHARS:
        return f"is longer than {MAX_KEY_CHARS} characters"
    return None


def key_problems(keys: list[str]) -> list[str]:
    """Every reason the keys cannot be used, naming keys by position only."""
    if not keys:
        return ["the referenced secret holds no key"]
    if len(keys) > MAX_KEYS:
        return [f"the referenced secret holds {len(keys)} keys; at most {MAX_KEYS} are allowed"]
    problems = []
    for number, key in enumerate(keys, 1):
        problem = "is not text" if not isinstance(key, str) else key_problem(key)
        if problem:
            problems.append(f"key {number} of {len(keys)} {problem}")
    return problems


def check_keys(keys: list[str]) -> None:
    problems = key_problems(keys)
    if problems:
        raise RouterError(f"router.api_keys: {'; '.join(problems)}; keys must be {KEY_CHARS} (nothing was changed)")


def keys_digest(project: str, keys: list[str]) -> str:
    """What the router's files record of the keys: a slow hash salted with the project, so a
    changed key is a planned reload, equal keys of two projects do not show, and no key is stored."""
    basis = "\n".join(sorted(set(keys))).encode()
    salt = f"aigo-apply router api_keys {project}".encode()
    return hashlib.pbkdf2_hmac("sha256", basis, salt, DIGEST_ROUNDS).hex()
