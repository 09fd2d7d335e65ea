"""The desired-state types: what aigo.yaml asks for, as plain immutable values.

`spec` dicts are canonical (defaults filled, keys sorted, secrets as references) so that the same
file always gives the same spec; they are what the labels store and what the planner compares.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypedDict

from aigo_apply.config.document import UpdateMode
from aigo_apply.config.host_paths import HF_CACHE, Protected
from aigo_apply.config.path_facts import HostPaths
from aigo_apply.config.swap_groups import SwapGroup
from aigo_apply.desired.canary import CanarySettings
from aigo_apply.desired.images import ImageObject
from aigo_apply.desired.spec import ModelSpec, RouterSpec
from aigo_apply.errors import AigoError


@dataclass(frozen=True)
class SecretRef:
    """A secret by reference: `{from_env: NAME}` or `{from_file: PATH}`. Never holds the value."""

    kind: str
    target: str

    def as_dict(self) -> dict[str, str]:
        return {self.kind: self.target}

    def __str__(self) -> str:
        return f"<secret {self.kind}:{self.target}>"


EnvValue = str | SecretRef


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    read_only: bool = True


class LogConfig(TypedDict):
    """Docker's HostConfig.LogConfig."""

    type: str
    config: dict[str, str]


LOG_DRIVER = "json-file"  # the driver `docker logs` reads back, with files Docker rotates itself


@dataclass(frozen=True)
class LogRotation:
    """A container's logs kept bounded (desired/logs.py): Docker's json-file driver starts a new file
    when the current one reaches `max_size` and keeps at most `max_files` of them, the current one too."""

    max_size: str  # canonical: a whole number and k, m or g (1024-based, as Docker reads it), e.g. "50m"
    max_files: int

    def as_dict(self) -> dict[str, int | str]:
        return {"max_files": self.max_files, "max_size": self.max_size}

    def log_config(self) -> LogConfig:
        """Docker's HostConfig.LogConfig for it (the API takes the options as strings)."""
        return {"type": LOG_DRIVER, "config": {"max-size": self.max_size, "max-file": str(self.max_files)}}


@dataclass(frozen=True)
class ContainerSpec:
    """Exactly the container one model needs; the Docker adapter maps it 1:1 onto the API."""

    name: str
    image: str
    command: tuple[str, ...]
    env: tuple[tuple[str, EnvValue], ...]
    mounts: tuple[Mount, ...]
    host_ip: str
    host_port: int | None  # None: nothing published (host networking)
    container_port: int | None
    gpus: str | tuple[int, ...]  # "all", "none" or device indices
    labels: dict[str, str] = field(default_factory=dict, compare=False)
    ipc_mode: str = "private"  # never the host's: an image would read every account's shared memory
    shm_size: int | None = None  # bytes of its own /dev/shm (an engine's NCCL and workers need more than 64 MiB)
    restart_policy: str = "unless-stopped"
    entrypoint: tuple[str, ...] | None = None  # None keeps the image's own
    network_mode: Literal["bridge", "host", "none"] = (
        "bridge"  # "host": the router (it binds itself); "none": an engine on its socket
    )
    user: str | None = None  # None keeps the image's own user
    cpu_shares: int | None = None  # its CPU weight when the CPUs are contended (Docker's --cpu-shares); None: 1024
    # no capability but binding a low port, and no new privileges: an image the file chose that runs on the
    # host's network (the router) may neither sniff it (NET_RAW) nor gain privileges (Docker's own set otherwise)
    confined: bool = False
    logs: LogRotation | None = None  # None: the daemon's default driver, unbounded (no container aigo-apply makes)

    def definition(self) -> dict[str, object]:
        """Everything that defines the container except its labels, as JSON-ready data."""
        return {
            "name": self.name,
            "image": self.image,
            "command": list(self.command),
            "env": {k: (v.as_dict() if isinstance(v, SecretRef) else v) for k, v in self.env},
            "mounts": [[m.source, m.target, m.read_only] for m in self.mounts],
            "port": [self.host_ip, self.host_port, self.container_port],
            "gpus": self.gpus if isinstance(self.gpus, str) else list(self.gpus),
            "ipc_mode": self.ipc_mode,
            **({"shm_size": self.shm_size} if self.shm_size is not None else {}),
            "restart_policy": self.restart_policy,
            # only when set, so that engine containers keep the definition (and hash) they had
            **({"entrypoint": list(self.entrypoint)} if self.entrypoint is not None else {}),
            **({"network_mode": self.network_mode} if self.network_mode != "bridge" else {}),
            **({"user": self.user} if self.user is not None else {}),
            **({"cpu_shares": self.cpu_shares} if self.cpu_shares is not None else {}),
            **({"confined": True} if self.confined else {}),
            **({"logs": self.logs.as_dict()} if self.logs is not None else {}),
        }

    def definition_hash(self) -> str:
        return "sha256:" + hashlib.sha256(canonical_json(self.definition()).encode()).hexdigest()


CONFINED_CAPS = ("NET_BIND_SERVICE",)  # all a confined container keeps: the router binds router.port itself
SOCKETS_FOLDER = "sockets"  # in a project's state folder: one folder per socket-served engine
SOCKET_FILE = "engine.sock"  # an engine's Unix socket, in its own folder (desired/engines/common.py mounts it)
SLOTS = ("a", "b")  # a model's two sockets: a parallel replace starts the new engine on the one not in use


def whole(value: object, key: str) -> int:
    """A spec's whole number (a port, a length), or the TypeError that names it."""
    if type(value) is not int:
        raise TypeError(f"{key} {value!r} is not a whole number")
    return value


def socket_file(slot: str = "a") -> str:
    """The socket's file name in its model's folder, for each slot."""
    if slot not in SLOTS:
        raise ValueError(f"no slot {slot!r}")
    return SOCKET_FILE if slot == "a" else "engine-b.sock"


ROUTER_SOCKETS = "/run/aigo-engines"  # in the router container: the project's sockets folder, read-only


@dataclass(frozen=True, order=True)
class Route:
    """One routed model. `port` None: its engine serves on its Unix socket, in the folder named after
    the alias below the project's sockets folder (the router's path is derived, never stored)."""

    alias: str
    port: int | None
    max_model_len: int
    owned_by: str = "vllm"
    slot: str = "a"  # which of the model's two sockets (a parallel replace moves it to the other)

    @classmethod
    def of(cls, alias: str, spec: Mapping[str, object], slot: str = "a") -> Route:
        """The route of a model from its canonical spec: its socket, else its port on 127.0.0.1. `spec`
        may be the one a replace replaces (platforms/docker/previous.py), made of values it observed."""
        port = None if spec.get("socket") else whole(spec["port"], "port")
        engine = spec["engine"]
        if not isinstance(engine, str):
            raise TypeError(f"model '{alias}': engine {engine!r} is not a name")
        return cls(alias, port, whole(spec["context_length"], "context_length"), engine, slot if port is None else "a")

    @property
    def backend(self) -> str:
        """A safe HAProxy backend name; the real alias lives only in the map and the JSON."""
        safe = re.sub(r"[^A-Za-z0-9_]", "_", self.alias)[:40]
        return f"m_{safe}_{hashlib.sha256(self.alias.encode()).hexdigest()[:6]}"

    @property
    def router_socket(self) -> str | None:
        """The engine's socket as the router container sees it (None: the engine listens on a port)."""
        return None if self.port is not None else f"{ROUTER_SOCKETS}/{self.alias}/{socket_file(self.slot)}"

    def to_dict(self) -> dict[str, object]:
        """As dataclasses.asdict gives it (every field is a plain value), without its deep copy."""
        out: dict[str, object] = {
            "alias": self.alias,
            "port": self.port,
            "max_model_len": self.max_model_len,
            "owned_by": self.owned_by,
        }
        return out | ({"slot": self.slot} if self.slot != "a" else {})


@dataclass(frozen=True, order=True)
class AdapterRoute:
    """A LoRA adapter's alias, routed to its base model's engine: the router sends a request naming it
    to the base's backend (the engine serves it by that name, --lora-modules), and lists it on
    /v1/models with the base as its parent while the base's engine is healthy."""

    alias: str
    base: str


@dataclass(frozen=True)
class EngineAddress:
    """Where this machine reaches an engine: its Unix socket (a host path), or a port on 127.0.0.1.
    Always derived from the tool's own desired state or state folder, never read from a label."""

    socket: str | None = None
    port: int | None = None

    @classmethod
    def of(cls, spec: Mapping[str, object], slot: str = "a") -> EngineAddress:
        """From a canonical spec this tool built (the desired state, or a plan it just made)."""
        if spec.get("socket"):
            return cls(socket=f"{spec['socket']}/{socket_file(slot)}")
        return cls(port=int(whole(spec["port"], "port")))

    @classmethod
    def of_route(cls, route: Route, sockets_dir: str) -> EngineAddress:
        """A routed model's engine: its port, or its socket in the project's sockets folder."""
        if route.port is not None:
            return cls(port=route.port)
        return cls(socket=f"{sockets_dir}/{route.alias}/{socket_file(route.slot)}")

    def __str__(self) -> str:
        return f"unix:{self.socket}" if self.socket else f"127.0.0.1:{self.port}"


@dataclass(frozen=True)
class RouterSettings:
    project: str
    bind: str
    port: int
    api_keys: bool  # whether a key file is used (its content is written at apply time only)
    max_body_mb: int = 16
    timeout_s: int = 600
    keys_digest: str = ""  # router/haproxy_safety.keys_digest of the keys, filled in where they are read
    swap_groups: tuple[SwapGroup, ...] = ()  # on-demand models taking turns (config/swap_groups.py)
    metrics_without_key: bool = False  # with api_keys: /metrics answers without a key too (router.metrics_without_key)
    hold_s: int = 300  # router.hold_seconds: the longest a request waits while its model's engine is replaced
    stall_s: int = 120  # router.stall_seconds: running requests and no new token this long is a stall (0: off)
    adapters: tuple[AdapterRoute, ...] = ()  # LoRA adapters routed to their base's engine (models.ALIAS.adapters)


@dataclass(frozen=True)
class HostContext:
    """What the desired state depends on from the machine it is planned for. The app layer reads it
    once (platforms/host_context.py), so building the desired state reads nothing from the process: the
    same file and the same context always give the same state, whoever runs it."""

    uid: int
    gid: int
    home: Path  # for `~` in defaults.models_dir
    state_root: Path  # one state folder per project below it (the router's files live there)
    models_dir: Path  # the model store unless defaults.models_dir names another
    hf_home: Path | None = None  # the Hugging Face cache root (holds the Hub token); ~/.cache/huggingface when None
    # what the host says of `home` and `models_dir` and every account's home (observe/host_paths.host_facts)
    paths: HostPaths | None = field(default=None, compare=False)

    def protected(self, store: Path | None = None) -> tuple[Protected, ...]:
        """This host's folders no model mount may expose: the Hugging Face cache, the tool's state
        (router files, locks, journals) and the model store as a whole (`store`: the file's own)."""
        return (
            Protected(HF_CACHE, self.hf_home or self.home / ".cache" / "huggingface"),  # no environment read
            Protected("aigo-apply's state folder", self.state_root),
            Protected("the whole model store", store or self.models_dir, inside_too=False),
        )

    def paths_with(self, file: HostPaths) -> HostPaths:
        """This host's facts with a file's (config/load.Config.paths) added: what a build looks up."""
        if self.paths is None or self.paths.home != self.home:
            raise AigoError("the host context carries no host facts for its home (observe/host_paths.host_facts)")
        return self.paths.with_paths(file)

    def state_folder(self, project: str) -> Path:
        return self.state_root / project

    def expand_home(self, path: str) -> Path:
        """`~` and `~/...` against this context's home (never another user's `~name`)."""
        if path == "~" or path.startswith("~/"):
            return self.home / path[2:]
        return Path(path)


@dataclass(frozen=True)
class AdapterFiles:
    """What a LoRA adapter's folder holds, read before the desired state is built (observe/adapter_files.py),
    or, for a repo adapter not downloaded yet, what its adapter_config.json on the Hub says: its rank,
    target modules and base model, and whether it is one vLLM can load (`problem`: why not, or why it
    could not be read; None when it is fine)."""

    rank: int | None = None
    target_modules: tuple[str, ...] = ()
    base_model: str | None = None
    problem: str | None = None
    hub: bool = False  # read from the Hub's adapter_config.json: a repo adapter not downloaded yet


@dataclass(frozen=True)
class DesiredModel:
    alias: str
    spec: ModelSpec
    container: ContainerSpec
    notes: tuple[str, ...] = ()
    ready_timeout: float = 1800.0  # apply-time only: not part of the spec, so changing it recreates nothing
    port: int = 0  # the port chosen for it, used where it is not in the spec (a socket engine; a cluster's Service)
    update: UpdateMode = "auto"  # how a running engine is replaced (plan/replace_strategy.py); apply-time only
    canary: CanarySettings | None = None  # the gate on a replace (desired/canary.py); apply-time only too


@dataclass(frozen=True)
class DesiredRouter:
    """The router container, and the files it should serve once every desired model is ready."""

    spec: RouterSpec
    container: ContainerSpec
    routes: tuple[Route, ...]  # one per desired model
    settings: RouterSettings

    @property
    def port(self) -> int:
        port: int = self.spec["port"]
        return port


@dataclass(frozen=True)
class DesiredState:
    project: str
    file: str
    router: DesiredRouter
    models: dict[str, DesiredModel]
    warnings: tuple[str, ...]
    vllm_image: ImageObject  # images.image_object for the vllm engine
    models_dir: Path  # the model store (defaults.models_dir)
    disabled: tuple[str, ...] = ()  # aliases in the file with `enabled: false`: nothing of them runs
    swap_groups: tuple[SwapGroup, ...] = ()  # on-demand models that take turns (config/swap_groups.py)
    adapter_files: Mapping[str, AdapterFiles] = field(default_factory=dict)  # by adapter folder, as read
    logs_set: tuple[str, ...] = ()  # where the file sets log rotation (defaults.logs, ...): Docker's only

    def specs(self) -> dict[str, ModelSpec]:
        """alias -> canonical spec: what the model-store and lock helpers read."""
        return {alias: model.spec for alias, model in self.models.items()}

    def images(self) -> set[str]:
        return {m.container.image for m in self.models.values()} | {self.router.container.image}


# json.dumps with these options makes an encoder per call; one, made once, writes the same text.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: object) -> str:
    """Compact, key-sorted JSON: equal data always gives equal text (and hash)."""
    return _CANONICAL.encode(value)
