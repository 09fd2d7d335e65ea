"""The router's container: HAProxy in master-worker mode on the host network, its config folder
mounted read-only, and the settings its files are rendered from."""

from __future__ import annotations

from typing import Any

from aigo_apply.desired import labels
from aigo_apply.desired.types import ContainerSpec, Mount, RouterSettings

ROUTER_MOUNT = "/usr/local/etc/haproxy/aigo"  # the router's state folder, read-only, in the container
LIVE = ROUTER_MOUNT + "/live"  # a symlink to the generation in service


def router_container(project: str, spec: dict[str, Any]) -> ContainerSpec:
    """The router container: host networking (it binds router.bind:router.port itself and reaches
    the engines on 127.0.0.1), the config folder read-only, HAProxy in master-worker mode so a
    signal reloads it, running as the user who owns the config folder (the key file is 0600)."""
    container = ContainerSpec(
        name=f"aigo-{project}-router",
        image=spec["image"],
        command=("-W", "-db", "-f", f"{LIVE}/haproxy.cfg"),
        env=(),
        mounts=(Mount(spec["config_dir"], ROUTER_MOUNT, True),),
        host_ip=spec["bind"],
        host_port=None,
        container_port=None,
        gpus="none",
        ipc_mode="private",
        entrypoint=("haproxy",),
        network_mode="host",
        user=spec["user"],
    )
    return ContainerSpec(
        **{**container.__dict__, "labels": labels.for_router(project, spec, container.definition_hash())}
    )


def settings_of(project: str, spec: dict[str, Any]) -> RouterSettings:
    return RouterSettings(
        project, spec["bind"], spec["port"], spec["api_keys"] is not None, spec["max_body_mb"], spec["timeout"]
    )
