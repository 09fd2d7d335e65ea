"""The router's container: HAProxy in master-worker mode on the host network, its config folder and
the project's engine sockets mounted read-only, and the settings its files are rendered from. The values that go to the Docker
API (name, image, address, user, folder) are checked once more here, whatever validated them."""

from __future__ import annotations

import ipaddress
import re

from aigo_apply.config.defaults import ROUTER_HOLD_SECONDS, ROUTER_STALL_SECONDS
from aigo_apply.desired import labels
from aigo_apply.desired.logs import rotation
from aigo_apply.desired.spec import RouterSpec
from aigo_apply.desired.types import ROUTER_SOCKETS, ContainerSpec, Mount, RouterSettings
from aigo_apply.errors import UnsafeSetting

_CHECKS = {
    "project": re.compile(r"[a-z0-9][a-z0-9_-]{0,31}"),
    "image": re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}"),
    "user": re.compile(r"[0-9]{1,10}:[0-9]{1,10}"),
    "config_dir": re.compile(r"/[^\x00-\x1f\x7f:,]{0,4095}"),  # ':' and ',' would split a bind
    "sockets_dir": re.compile(r"/[^\x00-\x1f\x7f:,]{0,4095}"),
}

ROUTER_MOUNT = "/usr/local/etc/haproxy/aigo"  # the router's state folder, read-only, in the container
LIVE = ROUTER_MOUNT + "/live"  # a symlink to the generation in service
# The router's CPU weight, 8x an engine's (Docker's default 1024). It is the one door to every model and
# uses little CPU, but when an engine keeps every core busy (vLLM's CPU build, or tokenizing on a small
# machine) HAProxy at an equal weight waited seconds for a core: on 2 cores beside the real vLLM CPU engine
# generating, /metrics took 1.0 s at the median and 14.9 s at worst, and 4 scrapes of 60 were a 500 (the
# page's Lua stopped by HAProxy's execution timeout). With this weight: 25 ms, 262 ms, none failed; it is
# scheduled first and takes only what it uses (bench/router_contention.py).
ROUTER_CPU_SHARES = 8192


def router_container(project: str, spec: RouterSpec) -> ContainerSpec:
    """The router container: host networking (it binds router.bind:router.port itself and reaches
    the engines that publish a port on 127.0.0.1), the config folder and the engines' sockets
    read-only, HAProxy in master-worker mode so a signal reloads it, running as the user who owns
    the config folder (the key file is 0600; the sockets' folders are its group's), scheduled
    ahead of the engines when they keep the CPUs busy (ROUTER_CPU_SHARES), and confined: its image
    is the file's choice and the host's network is its own, so it keeps no capability but binding its
    port (no raw sockets to read the host's traffic) and gains no privilege."""
    check_router_spec(project, spec)
    container = ContainerSpec(
        name=f"aigo-{project}-router",
        image=spec["image"],
        command=("-W", "-db", "-f", f"{LIVE}/haproxy.cfg"),
        env=(),
        mounts=(Mount(spec["config_dir"], ROUTER_MOUNT, True), Mount(spec["sockets_dir"], ROUTER_SOCKETS, True)),
        host_ip=spec["bind"],
        host_port=None,
        container_port=None,
        gpus="none",
        entrypoint=("haproxy",),
        network_mode="host",
        user=spec["user"],
        cpu_shares=ROUTER_CPU_SHARES,
        confined=True,
        logs=rotation("router", spec),
    )
    return ContainerSpec(
        **{**container.__dict__, "labels": labels.for_router(project, spec, container.definition_hash())}
    )


def check_router_spec(project: str, spec: RouterSpec) -> None:
    """The last check before the router's values reach the Docker API (a clear error, never a
    container made from a value that validation should have refused)."""
    values = {"project": project, **{k: spec.get(k) for k in ("image", "user", "config_dir", "sockets_dir")}}
    for key, pattern in _CHECKS.items():
        value = values[key]
        if not (isinstance(value, str) and pattern.fullmatch(value)) or "/../" in f"{value}/":
            raise UnsafeSetting(f"router: refusing {key} {value!r} for the router container (nothing was changed)")
    try:
        ipaddress.ip_address(spec.get("bind", ""))  # neither None nor "" is one: a ValueError
    except ValueError:
        raise UnsafeSetting(f"router: refusing bind {spec.get('bind')!r} (not an IP address)") from None
    if not (isinstance(spec.get("bind"), str) and re.fullmatch(r"[0-9A-Fa-f:.]{2,39}", spec["bind"])):
        raise UnsafeSetting(f"router: refusing bind {spec.get('bind')!r} (not a plain IP address)")


def settings_of(project: str, spec: RouterSpec, keys_digest: str = "") -> RouterSettings:
    """The settings the router's files are rendered from; `keys_digest` once the keys were read."""
    return RouterSettings(
        project,
        spec["bind"],
        spec["port"],
        spec["api_keys"] is not None,
        spec["max_body_mb"],
        spec["timeout"],
        keys_digest,
        metrics_without_key=bool(spec.get("metrics_without_key", False)),
        hold_s=min(int(spec.get("hold_seconds", ROUTER_HOLD_SECONDS)), int(spec["timeout"])),
        stall_s=int(spec.get("stall_seconds", ROUTER_STALL_SECONDS)),
    )
