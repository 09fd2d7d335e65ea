"""The last checks before Docker sees a container, whatever the plan or the spec said: the name is
the tool's own, the image a plain reference, the environment plain names and values, engines
published on 127.0.0.1 only, and every mount a path that exists, is plainly written and is still
the path that was planned. Validation and the desired state refuse all of this earlier; this is
the line that holds if they were bypassed (a hand-edited plan, a bug). Its logs are rotated, by a
size and a count aigo-apply writes (desired/logs.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from aigo_apply.config import env_names, invisible
from aigo_apply.config.host_paths import path_text_problem, unsafe_mount
from aigo_apply.desired.adapters import ADAPTER_MOUNT
from aigo_apply.desired.engines.common import MODEL_MOUNT
from aigo_apply.desired.logs import rotation_problem
from aigo_apply.desired.types import ContainerSpec, SecretRef
from aigo_apply.errors import UnsafeSetting
from aigo_apply.observe import host_paths
from aigo_apply.observe.host_paths import env_protected, own_homes, resolve_or_why, try_resolve

_NAME = re.compile(r"aigo-[A-Za-z0-9][A-Za-z0-9._-]{0,150}\Z")
# registry[:port]/path[:tag] or @sha256:digest; no whitespace, no leading '-', nothing a shell or the API would split
_IMAGE = re.compile(r"[a-z0-9][a-z0-9._/:-]{0,250}(@sha256:[0-9a-f]{64})?\Z", re.I)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}\Z")
_USER = re.compile(r"\d{1,10}:\d{1,10}\Z")


def check_container(spec: ContainerSpec) -> None:
    """Refuse (UnsafeSetting) a container definition the tool would never make."""
    why = _definition_problem(spec)
    if why:
        raise UnsafeSetting(f"refusing to create {spec.name!r}: {why}; nothing was created. Make a new plan")
    check_mounts(spec)


def _definition_problem(spec: ContainerSpec) -> str | None:
    if not _NAME.match(spec.name):
        return "its name is not one aigo-apply makes (aigo-PROJECT-NAME)"
    if not _IMAGE.match(spec.image) or spec.image.startswith("-"):
        return f"{spec.image!r} is not a plain image reference"
    for name, value in spec.env:
        if not _ENV_NAME.match(name):
            return f"the environment name {name!r} is not a plain name"
        if not isinstance(value, (str, SecretRef)) or (isinstance(value, str) and "\x00" in value):
            return f"the environment value of {name} is not plain text"
        if (why := env_names.refused_name(name)) and not _tool_set(spec, name, value):
            return f"the environment variable {name} is one aigo.yaml never sets ({why})"
        if isinstance(value, str) and (hidden := invisible.hidden_character(value)):
            return f"the environment value of {name} holds {hidden}"
    if spec.network_mode == "bridge" and spec.host_port is not None and spec.host_ip != "127.0.0.1":
        return f"an engine is published on {spec.host_ip}, not on 127.0.0.1"
    if spec.ipc_mode != "private":
        return f"IPC mode {spec.ipc_mode!r} would share another namespace's memory; aigo-apply uses private only"
    if spec.network_mode == "none" and spec.host_port is not None:
        return "an engine without a network cannot publish a port"
    if spec.network_mode not in ("bridge", "host", "none"):
        return f"network mode {spec.network_mode!r} is not one aigo-apply uses"
    if spec.network_mode == "host" and not spec.confined:
        return "a container on the host's network must run confined (no capabilities, no new privileges)"
    if spec.user is not None and not _USER.match(spec.user):
        return f"user {spec.user!r} is not UID:GID"
    if spec.cpu_shares is not None and not (type(spec.cpu_shares) is int and 2 <= spec.cpu_shares <= 262144):
        return f"CPU shares {spec.cpu_shares!r} are not an integer from 2 to 262144 (the kernel's range)"
    return rotation_problem(spec.logs)


def _tool_set(spec: ContainerSpec, name: str, value: object) -> bool:
    """A refused name that aigo-apply sets itself: HF_HUB_OFFLINE=1 on every engine, and
    VLLM_SERVER_DEV_MODE=1 only beside --enable-sleep-mode (an on-demand vLLM engine)."""
    if env_names.TOOL_ENV.get(name) == value:
        return True
    return env_names.SLEEP_MODE_ENV.get(name) == value and env_names.SLEEP_MODE_FLAG in spec.command


_VOLUME_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\Z")


def check_mounts(spec: ContainerSpec) -> None:
    """The last check before Docker sees a mount, whatever the plan said: a host path must be
    absolute, plainly written, exist (Docker would create a missing folder, as root) and still be
    the path that was planned (resolving it gives itself: no symlink swapped in since); a model
    mount (or a LoRA adapter's) must not be a system or private folder; anything else must be a plain
    volume name."""
    for mount in spec.mounts:
        source, why = mount.source, None
        if not source.startswith("/"):
            why = None if _VOLUME_NAME.match(source) else "is neither an absolute path nor a volume name"
        elif path_text_problem(source):
            why = path_text_problem(source)
        elif not os.path.lexists(source):
            why = "does not exist (Docker would create an empty folder in its place)"
        else:
            why = _host_path_problem(source, mount.target.startswith((f"{MODEL_MOUNT}/", f"{ADAPTER_MOUNT}/")))
        if why or path_text_problem(mount.target) or not mount.target.startswith("/"):
            raise UnsafeSetting(
                f"refusing to mount {source!r} into {spec.name}: it {why or 'has an unsafe target'}; "
                "nothing was created. Check the path and run `aigo-apply plan` again"
            )


def _host_path_problem(source: str, model: bool) -> str | None:
    """Why an existing host path must not be mounted: it cannot be resolved, it no longer resolves
    to itself (a symlink swapped in since the plan), or (a model's) it is a private place."""
    real = resolve_or_why(Path(source))
    if isinstance(real, str):
        return f"cannot be resolved: {real}"
    if str(real) != source:
        return f"now leads to {real} (a symlink was put in its place since it was planned)"
    if not model:
        return None
    home = try_resolve(Path.home())
    reason = unsafe_mount(real, home, env_protected(), homes=host_paths.known_homes(), mine=own_homes(home))
    return f"is {reason}" if reason else None
