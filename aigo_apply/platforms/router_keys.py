"""The router's API keys where they are read (plan and apply; never stored, printed or labelled):
resolved from their reference, checked against what HAProxy's key file can hold, and digested so
that a changed key is a planned reload. Also the plan's checks on where the router listens."""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import replace
from pathlib import Path

from aigo_apply.config.secret_names import KEY_FIX, guessable_key
from aigo_apply.desired.spec import RouterSpec
from aigo_apply.desired.types import DesiredState, SecretRef
from aigo_apply.errors import AigoError, SecretUnavailable
from aigo_apply.plan.host_checks import Check
from aigo_apply.platforms.secrets import resolve
from aigo_apply.router.haproxy import KEYS_DIGEST_FILE
from aigo_apply.router.haproxy_safety import KEY_CHARS, check_keys, keys_digest, parse_keys

_KEY_FIX = f"give each key of router.api_keys {KEY_CHARS}"
UNPRIVILEGED_PORT_START = Path("/proc/sys/net/ipv4/ip_unprivileged_port_start")


def read_keys(spec: RouterSpec) -> list[str] | None:
    """The keys the router's spec refers to, checked; None when it uses none. Raises AigoError
    (naming the reference, never a key) when they cannot be read or used."""
    ref = spec.get("api_keys")
    if not ref:
        return None
    kind, target = next(iter(ref.items()))
    keys = parse_keys(resolve(SecretRef(kind, target), "router.api_keys", multiline=True))
    check_keys(keys)
    guessable = [f"key {n} of {len(keys)} {why}" for n, key in enumerate(keys, 1) if (why := guessable_key(key))]
    if guessable:
        raise SecretUnavailable(f"router.api_keys ({kind}: {target}): {'; '.join(guessable)}", KEY_FIX)
    return keys


def digest_of(project: str, keys: list[str] | None) -> str:
    return keys_digest(project, keys) if keys else ""


def router_checks(
    desired: DesiredState, live_files: dict[str, str] | None = None, port_start: int | None = None
) -> tuple[DesiredState, list[Check]]:
    """Before the plan: the keys read and checked (a blocker when they cannot be used, so nothing
    goes live), their digest put into the router's settings (a changed key plans a reload), and
    warnings or blockers about the address and port the router listens on. Keys that cannot be
    read here (a CI shell without them) keep the deployed digest (`live_files`), so they plan no
    reload of their own; a plan that changes anything needs them (platforms/docker/secret_checks.py)."""
    spec = desired.router.spec
    checks = exposure_checks(spec, port_start if port_start is not None else unprivileged_port_start())
    checks += on_demand_exposure(desired)
    try:
        keys = read_keys(spec)
    except SecretUnavailable as exc:
        if not _absent(spec["api_keys"] or {}):  # present but unusable: refused whatever the plan changes
            return desired, checks + [Check("router.api_keys", "blocking", exc.problem, exc.fix or _KEY_FIX)]
        deployed = deployed_digest(live_files or {})
        settings = replace(desired.router.settings, keys_digest=deployed)
        return replace(desired, router=replace(desired.router, settings=settings)), checks
    except AigoError as exc:
        return desired, checks + [Check("router.api_keys", "blocking", str(exc), _KEY_FIX)]
    settings = replace(desired.router.settings, keys_digest=digest_of(desired.project, keys))
    return replace(desired, router=replace(desired.router, settings=settings)), checks


def _absent(ref: dict[str, str]) -> bool:
    """Whether the keys' reference points at nothing on this host (an unset variable, a missing
    file): then they cannot be known here, which is not the same as keys that are wrong."""
    kind, target = next(iter(ref.items()))
    if kind == "from_env":
        return not os.environ.get(target)
    return not os.path.lexists(os.path.expanduser(target))


def deployed_digest(files: dict[str, str]) -> str:
    """The keys' digest the running router's files record ("" when none)."""
    text = files.get(KEYS_DIGEST_FILE, "")
    scheme, _, digest = text.strip().partition(" ")
    return digest if scheme == "pbkdf2-sha256" and re.fullmatch(r"[0-9a-f]{64}", digest) else ""


def exposure_checks(spec: RouterSpec, port_start: int) -> list[Check]:
    """A router reachable beyond this machine without keys is a warning; a port below the
    unprivileged start that a non-root router cannot bind is a blocker."""
    checks = []
    bind, port = spec.get("bind", ""), spec.get("port", 0)
    if not _loopback(bind) and not spec.get("api_keys"):
        checks.append(
            Check(
                "router.open",
                "warning",
                f"the router listens on {bind} port {port} without router.api_keys: anyone who can reach "
                "this machine can use every model",
                "set router.api_keys: {from_env: NAME}, or bind: 127.0.0.1",
            )
        )
    uid = str(spec.get("user", "0")).partition(":")[0]
    if isinstance(port, int) and port < port_start and uid != "0":
        checks.append(
            Check(
                "router.port",
                "blocking",
                f"router.port {port} is below {port_start}, which only root may listen on, and the router "
                f"runs as user {uid}",
                f"choose a router.port of {port_start} or more",
            )
        )
    return checks


def on_demand_exposure(desired: DesiredState) -> list[Check]:
    """On-demand models open vLLM's development endpoints (sleep, wake, collective_rpc) to the
    router's clients' reach; a router bound beyond loopback without keys offers them to anyone who
    can reach this machine: a blocker, not a warning."""
    spec = desired.router.spec
    on_demand = sorted(alias for group in desired.swap_groups for alias in group.members)
    if not on_demand or spec.get("api_keys") or _loopback(spec.get("bind", "")):
        return []
    return [
        Check(
            "router.on_demand_open",
            "blocking",
            f"the router listens on {spec.get('bind')} port {spec.get('port')} without router.api_keys, and the "
            f"on-demand models {', '.join(on_demand)} run engines whose development endpoints (sleep, wake) "
            "anyone who reaches this machine could then drive",
            "set router.api_keys: {from_env: NAME} (keys of 16 characters or more), or bind: 127.0.0.1",
        )
    ]


def _loopback(bind: str) -> bool:
    try:
        return ipaddress.ip_address(bind).is_loopback
    except ValueError:
        return False


def unprivileged_port_start() -> int:
    """The lowest port a non-root process may listen on here (the router shares the host's network)."""
    try:
        return int(UNPRIVILEGED_PORT_START.read_text().strip())
    except (OSError, ValueError):
        return 1024
