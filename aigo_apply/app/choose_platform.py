"""Which platform a run acts on, chosen once from the file's `platform:` or `--platform`, with the
file read once: Docker on this machine (platforms/docker/platform.py) or a Kubernetes cluster
(platforms/kubernetes/platform.py), both the Platform of platforms/platform.py."""

from __future__ import annotations

from typing import Any

from aigo_apply.adapters.runtime import Runtime
from aigo_apply.config.load import choose_file
from aigo_apply.config.platforms import platform_of
from aigo_apply.observe.config_file import load_config
from aigo_apply.platforms.docker.platform import DockerPlatform
from aigo_apply.platforms.host_context import current_host, desired_state
from aigo_apply.platforms.platform import Platform


def open_platform(
    file: str | None,
    platform: str | None = None,
    runtime: Runtime | None = None,
    plans: bool = False,
    locked: bool = False,
) -> Platform[Any]:
    """The platform `file` deploys to (`platform` overrides its `platform:`), with the file read
    once. `runtime`: the Docker runtime to use (tests; default Docker's own). `plans`: the run makes
    a plan from the file (plan, apply), not only reads or removes what runs (status, destroy);
    `locked`: that plan pins the downloads to aigo.lock (apply --locked)."""
    config = load_config(choose_file(file))
    if (platform or platform_of(config.data)) == "kubernetes":
        from aigo_apply.platforms.kubernetes.platform import (
            KubePlatform,
        )  # lightkube's client: only a cluster's path needs it

        return KubePlatform(config, plans)
    host = current_host()
    if plans:
        return DockerPlatform.planning(config, host, runtime, locked)
    desired = desired_state(config, host)
    return DockerPlatform(desired.project, desired.file, desired, runtime, False, host.state_root)
