"""What every engine module shares: the last safety check on a command line, and the parts of the
container that do not depend on the engine (name, environment, GPUs, published port, labels)."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable

from aigo_apply.config import env_names, invisible
from aigo_apply.desired import labels
from aigo_apply.desired.logs import rotation
from aigo_apply.desired.spec import ModelSpec
from aigo_apply.desired.types import SOCKET_FILE, ContainerSpec, Mount, SecretRef, socket_file
from aigo_apply.errors import UnsafeSetting

MODEL_MOUNT = "/models"
SOCKET_MOUNT = "/run/aigo"  # an engine's socket folder, in its container
ENGINE_SOCKET = f"{SOCKET_MOUNT}/{SOCKET_FILE}"
# Models are downloaded on the host before the engine starts: the engine must never reach the Hub
# (nor need a token). A model's env may not set these (config/env_names.py says why).
OFFLINE_ENV = env_names.TOOL_ENV
# A value: no whitespace, no control characters, no leading dash (it would read as a flag).
SAFE_VALUE = re.compile(r"^[A-Za-z0-9_./][A-Za-z0-9_.:/+=,@-]*\Z")


CACHE_DIR = "/root/.cache"  # vLLM's torch.compile and kernel caches, Triton's, FlashInfer's
# An engine's own /dev/shm (its IPC namespace is private: the host's holds every account's shared
# memory). vLLM's docs ask for --ipc=host or a large --shm-size; NCCL's tensor-parallel buffers and vLLM's
# worker queues live there. A tmpfs limit: only what is written uses memory.
SHM_BYTES = 32 * 1024**3


def cache_volume(project: str, image: str) -> str:
    """The compile-cache volume of one engine image in a project: a replaced engine on the same image
    finds its compiled graphs again, and another image (an upgrade) starts from an empty one, never
    from another release's. Named by a digest of the image reference: short, the same run after run,
    and known from the file alone (so an unchanged file plans no change)."""
    return f"{legacy_cache_volume(project)}-{hashlib.sha256(image.encode()).hexdigest()[:12]}"


def legacy_cache_volume(project: str) -> str:
    """The one cache volume per project that aigo-apply made before caches were kept per image."""
    return f"aigo-{project}-cache"


def cache_mount(project: str, image: str) -> Mount:
    """The image's cache volume at the engine's cache folder (vLLM's compiled graphs, Triton's and
    Inductor's kernels, FlashInfer's)."""
    return Mount(cache_volume(project, image), CACHE_DIR, False)


def with_slot(container: ContainerSpec, slot: str) -> ContainerSpec:
    """The same engine on its model's other socket, for a parallel replace: the socket's path in its
    command line and entry point, and the slot label. Its spec hash stays the canonical one, so the
    plan sees the same engine on either socket."""
    if slot == "a":
        return container
    if ENGINE_SOCKET not in container.command or container.entrypoint is None:
        raise UnsafeSetting(f"{container.name}: an engine that serves on no Unix socket has one slot only")
    path = f"{SOCKET_MOUNT}/{socket_file(slot)}"
    return ContainerSpec(
        **{
            **container.__dict__,
            "command": tuple(path if word == ENGINE_SOCKET else word for word in container.command),
            "entrypoint": tuple(word.replace(ENGINE_SOCKET, path) for word in container.entrypoint),
            "labels": {**container.labels, labels.SLOT: slot},
        }
    )


def container_name(project: str, alias: str) -> str:
    return f"aigo-{project}-{alias}"


def number(value: object) -> str:
    """A setting's value as one command-line word (floats without trailing zeros)."""
    if isinstance(value, bool):
        raise UnsafeSetting(f"expected a number or a name, got {value!r}")
    if isinstance(value, float):
        if not math.isfinite(value):  # the last check at the point of use: never `nan` on a command line
            raise UnsafeSetting(f"expected a finite number, got {value!r}")
        return format(value, "g")
    return str(value)


def check_command(
    engine: str, alias: str, command: list[str], flags: Iterable[str], json_value: re.Pattern[str] | None = None
) -> None:
    """Every word is one of the engine's known flags or a safe value (or, for vLLM, the one JSON
    value it builds itself): the last line of defence for a hand-edited saved plan."""
    known = flags if isinstance(flags, (set, frozenset)) else set(flags)
    for arg in command:
        if arg not in known and not SAFE_VALUE.match(arg) and not (json_value and json_value.match(arg)):
            raise UnsafeSetting(f"model '{alias}': refusing to put {arg!r} on the {engine} command line")


def engine_container(
    project: str,
    alias: str,
    spec: ModelSpec,
    command: list[str],
    mounts: list[Mount],
    container_port: int | None,
    entrypoint: tuple[str, ...] | None = None,
    tool_env: dict[str, str] | None = None,
) -> ContainerSpec:
    """The container for one model: published on 127.0.0.1 only (`container_port` None: nothing is
    published, it serves on its Unix socket, and has no network at all: the host downloads its
    weights, and no address, the host's or another container's, is reachable from it or reaches it),
    secrets kept as references, its logs rotated (desired/logs.py).
    `tool_env`: what aigo-apply itself sets besides OFFLINE_ENV (names a model's env may not set)."""
    env = []
    for name, value in spec.get("env", {}).items():  # checked again where it is used (a hand-edited plan)
        why = env_names.refused_name(name) or (isinstance(value, str) and invisible.problem(value))
        if why:
            raise UnsafeSetting(f"model '{alias}': refusing to give the engine {name}: {why}")
    for name, value in sorted({**spec.get("env", {}), **OFFLINE_ENV, **(tool_env or {})}.items()):
        env.append((name, SecretRef(*next(iter(value.items()))) if isinstance(value, dict) else value))
    gpus = spec["gpus"] if isinstance(spec["gpus"], str) else tuple(spec["gpus"])
    container = ContainerSpec(
        name=container_name(project, alias),
        image=spec["image"],
        command=tuple(command),
        env=tuple(env),
        mounts=tuple(mounts),
        host_ip="127.0.0.1",
        host_port=spec["port"] if container_port is not None else None,
        container_port=container_port,
        gpus=gpus,
        entrypoint=entrypoint,
        network_mode="bridge" if container_port is not None else "none",
        shm_size=SHM_BYTES,
        logs=rotation(f"model '{alias}'", spec),
    )
    digest = container.definition_hash()
    engine = spec.get("engine", "vllm")
    return ContainerSpec(**{**container.__dict__, "labels": labels.for_engine(project, alias, engine, spec, digest)})
