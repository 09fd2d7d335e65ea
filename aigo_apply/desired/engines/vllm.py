"""vLLM v0.31.0: the `vllm serve` command line and container for one model.

Order of the command line (DESIGN.md section 3): model path (positional; the image's entrypoint is
`vllm serve`), --served-model-name, --max-model-len, --gpu-memory-utilization, the tool-calling
flags, then one flag per setting that is set (none for unset), the LoRA adapters, then where it listens: its Unix socket
(`--uds`, in a folder of the project's state that only it and the router mount), or the fixed
in-container port for a model that asks for a port (and on a cluster).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from aigo_apply.config.engine_kinds import VLLM
from aigo_apply.config.env_names import SLEEP_MODE_ENV, SLEEP_MODE_FLAG
from aigo_apply.config.names import ALIAS_RE
from aigo_apply.config.vllm_facts import (
    COMPILATION_FLAGS,
    ENUM_SETTINGS,
    checked_release,
    names,
    optimization_levels,
    speculative_methods,
    unknown_compilation,
)
from aigo_apply.config.vllm_flags import BOOL_FLAGS, FLAG_KEYS, VALUE_FLAGS, SpeculativeSettings, VllmSettings
from aigo_apply.desired.adapters import ADAPTER_MOUNT, MAX_LORA_RANKS
from aigo_apply.desired.engines.common import (
    ENGINE_SOCKET,
    MODEL_MOUNT,
    SOCKET_MOUNT,
    cache_mount,
    check_command,
    engine_container,
)
from aigo_apply.desired.engines.common import number as _number
from aigo_apply.desired.spec import AdapterSpec, ModelSpec
from aigo_apply.desired.types import ContainerSpec, Mount
from aigo_apply.errors import UnsafeSetting

MAX_LORAS = 64  # the schema's bound on vllm.max_loras (and on a model's adapters)
# The image's `vllm serve`, started so that its socket is one the router (another user) may connect to
# and a restart finds no stale socket in its way: vLLM binds the path itself (launcher.py's
# create_server_unix_socket: no chmod, and it fails when the file exists). The socket's folder is
# setgid to the router's group and lets no other account in (adapters/engine_sockets.py), so the
# group-writable socket (umask 007) reaches exactly the router and this tool.
SOCKET_ENTRYPOINT = (
    "/bin/sh",
    "-c",
    f'umask 007 && rm -f {ENGINE_SOCKET} && exec vllm serve "$@"',
    "vllm",
)
# Every flag a command line may hold (check_command's list): those of the table config/vllm_flags.py
# keeps, so that a flag written here that the table (and `validate`'s hints) does not know is refused.
_KNOWN_FLAGS = frozenset(FLAG_KEYS) - {"--model"}
# The one JSON value we build ourselves (--speculative-config) from checked names, numbers and paths.
_SAFE_JSON = re.compile(r'^\{[A-Za-z0-9_":,./-]*\}\Z')


def render(project: str, alias: str, spec: ModelSpec) -> ContainerSpec:
    settings = spec.get("vllm", {})
    _recheck(alias, settings, checked_release(spec["image"].rpartition(":")[2] if ":" in spec["image"] else None))
    model_path = f"{MODEL_MOUNT}/{alias}"
    command = [
        model_path,
        "--served-model-name",
        alias,
        "--max-model-len",
        str(spec["context_length"]),
        # always written: the GPU ledger counts this fraction, and vLLM's own default is 0.92 up to v0.33
        # and, from v0.34.0, all of the GPU's free memory (docs/configuration.md)
        "--gpu-memory-utilization",
        _number(settings["gpu_memory_utilization"]),
    ]
    if settings.get("tool_calling"):
        command.append("--enable-auto-tool-choice")
    if settings.get("tool_call_parser"):
        command += ["--tool-call-parser", settings["tool_call_parser"]]
    values: Mapping[str, object] = settings  # read by the tables' keys
    for key, flag in VALUE_FLAGS:
        if key in values:
            command += [flag, _number(values[key])]
    for key, flag in BOOL_FLAGS:
        if key in values:
            command.append(flag if values[key] else "--no-" + flag[2:])
    command += _start_flags(settings.get("compilation") or {})
    mounts = [Mount(spec["model_dir"], model_path, True)]
    if spec.get("adapters"):
        lora_flags, lora_mounts = _adapters(alias, spec["adapters"], settings)
        command += lora_flags
        mounts += lora_mounts
    if "speculative" in settings:
        config, draft_mount = _speculative(alias, settings["speculative"])
        command += ["--speculative-config", config]
        mounts += draft_mount
    # a swap group's member: the router sleeps and wakes it (config/swap_groups.py); `update: sleep`: a
    # replace puts it to sleep while the new engine starts (platforms/docker/sleep_replace.py)
    sleeps = bool(spec.get("on_demand") or spec.get("sleep_mode"))
    if sleeps:
        command.append(SLEEP_MODE_FLAG)
    socket = spec.get("socket")
    if socket:
        command += ["--uds", ENGINE_SOCKET]
        mounts.append(Mount(socket, SOCKET_MOUNT, False))
    else:
        command += ["--port", str(VLLM.container_port)]
    check_command("vLLM", alias, command, _KNOWN_FLAGS, _SAFE_JSON)
    return engine_container(
        project,
        alias,
        spec,
        command,
        mounts + [cache_mount(project, spec["image"])],
        None if socket else VLLM.container_port,
        entrypoint=SOCKET_ENTRYPOINT if socket else None,
        tool_env=SLEEP_MODE_ENV if sleeps else None,
    )


def _start_flags(compilation: Mapping[str, object]) -> list[str]:
    """`vllm.compilation` as vLLM's own flags, in the table's order (each checked by _recheck)."""
    out: list[str] = []
    for key, flag in COMPILATION_FLAGS.items():
        value = compilation.get(key)
        if isinstance(value, list):
            out += [flag, *(_number(size) for size in value)]
        elif value is not None:
            out += [flag, _number(value)]
    return out


def _recheck(alias: str, settings: VllmSettings, release: str) -> None:
    """Refuse names the checked release does not know, again, right before a container is made."""
    for key, value in settings.items():
        if key in ENUM_SETTINGS and value not in names(key, release):
            raise UnsafeSetting(f"model '{alias}': vllm.{key} {value!r} is not a name vLLM v{release} accepts")
    _recheck_compilation(alias, settings.get("compilation") or {}, release)
    speculative = settings.get("speculative")
    if speculative is not None:
        method, tokens = speculative.get("method"), speculative.get("num_speculative_tokens", 1)
        if method not in speculative_methods(release):
            raise UnsafeSetting(
                f"model '{alias}': vllm.speculative.method {method!r} is not a name vLLM v{release} accepts"
            )
        if not isinstance(tokens, int) or isinstance(tokens, bool) or not 1 <= tokens <= 64:
            raise UnsafeSetting(f"model '{alias}': vllm.speculative.num_speculative_tokens {tokens!r} is not 1-64")


def _recheck_compilation(alias: str, compilation: Mapping[str, object], release: str) -> None:
    """The start-up settings again: flags the release has, a level it knows, whole sizes 1-65536."""
    for key, value in compilation.items():
        why = unknown_compilation(key, release) if key in COMPILATION_FLAGS else "not a setting aigo-apply knows"
        if why:
            raise UnsafeSetting(f"model '{alias}': vllm.compilation.{key}: {why}")
        if key == "optimization_level":
            if value not in optimization_levels(release) or isinstance(value, bool):
                raise UnsafeSetting(
                    f"model '{alias}': vllm.compilation.{key} {value!r} is not a level vLLM v{release} has"
                )
            continue
        sizes = value if isinstance(value, list) else [value]
        if not sizes or any(not _size(size) for size in sizes):
            raise UnsafeSetting(f"model '{alias}': vllm.compilation.{key} {value!r} is not whole numbers 1-65536")


def _size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65536


def _adapters(alias: str, adapters: dict[str, AdapterSpec], settings: VllmSettings) -> tuple[list[str], list[Mount]]:
    """--enable-lora, one --lora-modules with every adapter as NAME=PATH (vLLM v0.31.0's LoRAParserAction
    keeps only the last --lora-modules it is given: repeating the flag would drop adapters), --max-loras,
    --max-lora-rank; each adapter's folder mounted read-only at /adapters/NAME. Checked again here: a
    name with '=' or ',' would be read as another name and path, or as JSON."""
    modules, mounts = [], []
    for name, adapter in sorted(adapters.items()):
        if not ALIAS_RE.match(name):
            raise UnsafeSetting(f"model '{alias}': refusing the adapter name {name!r} on the vLLM command line")
        target = f"{ADAPTER_MOUNT}/{name}"
        modules.append(f"{name}={target}")
        mounts.append(Mount(adapter["adapter_dir"], target, True))
    loras, rank = settings.get("max_loras"), settings.get("max_lora_rank")
    if not isinstance(loras, int) or isinstance(loras, bool) or not 1 <= loras <= MAX_LORAS:
        raise UnsafeSetting(f"model '{alias}': vllm.max_loras {loras!r} is not 1-{MAX_LORAS}")
    if rank not in MAX_LORA_RANKS or isinstance(rank, bool):
        raise UnsafeSetting(f"model '{alias}': vllm.max_lora_rank {rank!r} is not a choice vLLM accepts")
    flags = ["--enable-lora", "--lora-modules", *modules, "--max-loras", str(loras), "--max-lora-rank", str(rank)]
    return flags, mounts


def _speculative(alias: str, spec: SpeculativeSettings) -> tuple[str, list[Mount]]:
    """--speculative-config as compact JSON; a draft model is mounted read-only beside the model."""
    config: dict[str, str | int] = {"method": spec["method"]}
    if "num_speculative_tokens" in spec:
        config["num_speculative_tokens"] = spec["num_speculative_tokens"]
    mounts = []
    if "draft" in spec:
        target = f"{MODEL_MOUNT}/{alias}.draft"
        config["model"] = target
        mounts.append(Mount(spec["draft"]["model_dir"], target, True))
    return json.dumps(config, separators=(",", ":")), mounts
