"""Builds the desired state from a validated config: defaults filled, ports chosen, each model's
canonical spec and the exact container it needs.

Pure: it reads no files and calls no daemon, so the same config always gives the same result.
Where each path leads (the model store, local sources) is looked up in the host's facts, gathered
before: the file's (Config.paths) and the host's own folders' (HostContext.paths).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from aigo_apply.config.defaults import (
    AUTO_PORT_BASE,
    AUTO_PORT_SPAN,
    DEFAULT_GPU_MEMORY_UTILIZATION,
    DEFAULT_READY_TIMEOUT,
    DEFAULT_ROUTER_BIND,
    DEFAULT_ROUTER_PORT,
    DEFAULT_TOOL_CALL_PARSER,
    ROUTER_DEFAULT_TAG,
    ROUTER_IMAGE,
    ROUTER_MAX_BODY_MB,
    ROUTER_TIMEOUT,
)
from aigo_apply.config.document import Defaults, Document, EngineImage, EnvValue, ModelEntry, Router
from aigo_apply.config.engine_choice import ENGINE_NAMES, engine_of, weights_format
from aigo_apply.config.engine_kinds import ENGINES, VLLM
from aigo_apply.config.load import Config
from aigo_apply.config.swap_groups import SwapGroup, sleep_key, swap_groups
from aigo_apply.config.units import parse_token_count
from aigo_apply.config.vllm_facts import (
    VLLM_VERSION,
    checked_release,
    config_release,
    deprecated_mtp_aliases,
    known_releases,
    tag_release,
)
from aigo_apply.config.vllm_flags import SpeculativeSettings, VllmSettings
from aigo_apply.desired import engines
from aigo_apply.desired.adapters import adapter_folders, adapter_specs, lora_settings
from aigo_apply.desired.canary import canary_of
from aigo_apply.desired.engines.router import router_container, settings_of
from aigo_apply.desired.images import image_object, image_reference
from aigo_apply.desired.logs import log_settings, logs_written
from aigo_apply.desired.model_store import Mounts, mountable, repo_dir
from aigo_apply.desired.spec import ModelSpec, RouterSpec, model_spec_of, router_spec_of
from aigo_apply.desired.store_folder import store_folder
from aigo_apply.desired.types import (
    SOCKETS_FOLDER,
    AdapterFiles,
    AdapterRoute,
    DesiredModel,
    DesiredRouter,
    DesiredState,
    HostContext,
    Route,
)
from aigo_apply.errors import AigoError, UnsafeSetting


def build_desired(
    config: Config, host: HostContext, adapter_files: Mapping[str, AdapterFiles] | None = None
) -> DesiredState:
    """`adapter_files`: what each LoRA adapter's folder holds, read before (observe/adapter_files.py),
    by folder; without it the adapters' ranks are unknown (platforms/host_context.desired_state reads them)."""
    files = adapter_files or {}
    data = config.data
    paths = host.paths_with(config.paths)  # the host's own folders' facts and the file's
    defaults = data.get("defaults", {})
    router_port = data.get("router", {}).get("port", DEFAULT_ROUTER_PORT)
    store = store_folder(config, host, paths)
    models = data.get("models", {})
    ports = assign_ports(data["project"], models, router_port)
    release = config_release(data)
    desired = {}
    mounts = Mounts(host, paths, store)  # your home and the protected folders, for every model's mounts
    # a disabled model keeps its port (assigned above over every model) so enabling it again changes nothing else
    disabled = tuple(sorted(a for a, m in models.items() if m.get("enabled") is False))
    sockets = sockets_folder(host, data["project"])  # once: the same folder for every model
    for alias in sorted(set(models) - set(disabled)):
        engine = engine_of(models[alias], defaults)
        image = image_reference(data, engine)
        if image is None:  # validation requires image_tag for an engine without a built-in one
            raise AigoError(f"model '{alias}' runs on {engine}, which has no image tag: set engines.{engine}.image_tag")
        # an engine that can serves on a Unix socket only the router reaches, unless the model asks for a port
        socket = str(sockets / alias) if ENGINES[engine].serves_on_socket and "port" not in models[alias] else None
        try:
            spec = model_spec(
                models[alias],
                defaults,
                engine,
                image,
                ports[alias],
                config.base_dir,
                store,
                mounts,
                socket,
                files,
            )
        except UnsafeSetting as exc:  # a mount the host's own folders rule out (validation cannot see them all)
            raise UnsafeSetting(f"{config.file}: models.{alias}.{exc}; nothing was changed") from None
        notes = ignored_settings(models[alias], engine)
        if spec.get("adapters"):
            notes += lora_settings(models[alias].get("vllm", {}), spec["adapters"], files)[1]
        written = models[alias]["context_length"]
        if isinstance(written, str):
            notes += (f"context_length {written!r} means {spec['context_length']} tokens",)
        method = spec.get("vllm", {}).get("speculative", {}).get("method")
        if method in deprecated_mtp_aliases(release):
            notes += (
                f"speculative method {method!r} is deprecated in vLLM v{release}, which runs it as 'mtp'; "
                "write method: mtp",
            )
        timeout = models[alias].get("ready_timeout", defaults.get("ready_timeout", DEFAULT_READY_TIMEOUT))
        update, canary = models[alias].get("update", defaults.get("update", "auto")), canary_of(models[alias], defaults)
        notes += listen_notes(alias, spec)
        container = engines.render(data["project"], alias, spec)
        desired[alias] = DesiredModel(alias, spec, container, notes, float(timeout), ports[alias], update, canary)
    uses_vllm = any(m.spec["engine"] == "vllm" for m in desired.values())
    warnings = tag_warnings(data.get("engines", {}).get("vllm", {})) if uses_vllm else ()
    groups = swap_groups(models)
    return DesiredState(
        data["project"],
        config.file,
        desired_router(data, desired, host, groups),
        desired,
        warnings,
        image_object(data, "vllm"),
        store,
        disabled,
        groups,
        {f: files[f] for f in adapter_folders({a: m.spec for a, m in desired.items()}) if f in files},
        logs_written(data),
    )


def tag_warnings(engine: EngineImage) -> tuple[str, ...]:
    """Setting names are checked against the release the tag names when its facts are here (v0.31.0,
    v0.32.0, v0.33.0, v0.34.0), else against v0.31.0: say so when the tag names another release."""
    tag = str(engine.get("image_tag", VLLM.default_tag))
    release = tag_release(tag)
    known = ", ".join(f"v{r}" for r in known_releases())
    if release is not None and release != checked_release(tag):
        return (
            f"engines.vllm.image_tag {tag} is vLLM {release}, but aigo-apply has the names of {known} only, so "
            f"setting names were checked against vLLM v{VLLM_VERSION}; a release that does not know a name exits at "
            "start-up (apply then restores the previous container)",
        )
    if tag.startswith(("latest", "nightly")):
        return (
            f"engines.vllm.image_tag {tag} moves over time; setting names were checked "
            f"against vLLM v{VLLM_VERSION}, and a release that does not know a name exits at start-up",
        )
    return ()


def router_spec(project: str, router: Router, host: HostContext, defaults: Defaults) -> RouterSpec:
    """The canonical spec of the router container (API keys only as a reference; `defaults`: the file's)."""
    spec = {
        "image": f"{router.get('image', ROUTER_IMAGE)}:{router.get('image_tag', ROUTER_DEFAULT_TAG)}",
        "bind": router.get("bind", DEFAULT_ROUTER_BIND),
        "port": router.get("port", DEFAULT_ROUTER_PORT),
        "api_keys": dict(router["api_keys"]) if "api_keys" in router else None,
        "max_body_mb": router.get("max_body_mb", ROUTER_MAX_BODY_MB),
        "timeout": router.get("timeout", ROUTER_TIMEOUT),
        **({"metrics_without_key": True} if router.get("metrics_without_key") else {}),
        **({"hold_seconds": router["hold_seconds"]} if "hold_seconds" in router else {}),
        **({"stall_seconds": router["stall_seconds"]} if "stall_seconds" in router else {}),
        "config_dir": str(host.state_folder(project) / "router"),
        "sockets_dir": str(sockets_folder(host, project)),
        "user": f"{host.uid}:{host.gid}",
        "logs": log_settings(router.get("logs"), defaults),
    }
    return router_spec_of(spec)


def desired_router(
    data: Document, models: dict[str, DesiredModel], host: HostContext, groups: tuple[SwapGroup, ...] = ()
) -> DesiredRouter:
    project = data["project"]
    spec = router_spec(project, data.get("router", {}), host, data.get("defaults", {}))
    routes = tuple(Route.of(alias, m.spec) for alias, m in sorted(models.items()))
    # swap groups and adapters change the router's files, not its container
    settings = replace(settings_of(project, spec), swap_groups=groups, adapters=adapter_routes(models))
    return DesiredRouter(spec, router_container(project, spec), routes, settings)


def adapter_routes(models: dict[str, DesiredModel]) -> tuple[AdapterRoute, ...]:
    """One route per LoRA adapter of the desired models, to its base model's engine."""
    return tuple(
        sorted(AdapterRoute(name, alias) for alias, m in models.items() for name in m.spec.get("adapters") or {})
    )


def served_on_ports(desired: DesiredState) -> DesiredState:
    """The desired state with every engine on its port (a cluster's pods reach each other through
    Services): each socket-served model gets its port back, loses `sleep_mode` (a socket's way to be
    replaced, config/swap_groups.sleep_key), and its container and route are made again from that spec."""
    models = {}
    for alias, model in desired.models.items():
        if "socket" not in model.spec:
            models[alias] = model
            continue
        spec = model.spec.copy()
        del spec["socket"]
        spec.pop("sleep_mode", None)
        spec = model_spec_of({**spec, "port": model.port}, f"model '{alias}'")  # the port where the socket was
        models[alias] = replace(model, spec=spec, container=engines.render(desired.project, alias, spec))
    routes = tuple(Route.of(alias, m.spec) for alias, m in sorted(models.items()))
    return replace(desired, models=models, router=replace(desired.router, routes=routes))


def sockets_folder(host: HostContext, project: str) -> Path:
    """The project's engine sockets: one folder per model, mounted into its engine and (all of them,
    read-only) into the router; no other account may enter it (adapters/engine_sockets.py)."""
    return host.state_folder(project) / SOCKETS_FOLDER


def listen_notes(alias: str, spec: ModelSpec) -> tuple[str, ...]:
    """What the plan says of an engine published on a port: any local account reaches it there."""
    if "port" not in spec:
        return ()
    why = (
        f"models.{alias}.port asks for it"
        if ENGINES[spec["engine"]].serves_on_socket
        else f"the {spec['engine']} server cannot listen on a Unix socket"
    )
    return (
        f"served on 127.0.0.1:{spec['port']} ({why}): any account on this machine can reach it there without an "
        "API key, bypassing the router",
    )


def ignored_settings(model: ModelEntry, engine: str) -> tuple[str, ...]:
    """A note for each engine's settings block that this model's engine does not read."""
    blocks: Mapping[str, object] = model  # read by each engine's name
    return tuple(
        f"{other} settings ({', '.join(sorted(block))}) are ignored: this model runs on {engine}"
        for other in ENGINE_NAMES
        if other != engine and isinstance(block := blocks.get(other), dict) and block
    )


def model_spec(
    model: ModelEntry,
    defaults: Defaults,
    engine: str,
    image: str,
    port: int,
    base_dir: Path,
    store: Path,
    mounts: Mounts,
    socket: str | None = None,
    adapter_files: Mapping[str, AdapterFiles] | None = None,
) -> ModelSpec:
    """The canonical spec of one model: every value that shapes its container, defaults filled.
    `socket`: the host folder of its Unix socket, for an engine served on one (it then has no port).
    Only the settings of the engine that runs it are part of it (others cannot cause a recreate).
    `mounts`: the build's view of the host's folders (model_store.Mounts)."""
    source = model["source"]
    model_file = None
    if "repo" in source:
        canonical_source = {"repo": source["repo"], "revision": source.get("revision", "main")}
        model_dir = repo_dir(store, canonical_source["repo"], canonical_source["revision"])
        if "file" in source:
            canonical_source["file"] = model_file = source["file"]
    else:
        model_dir = mountable(base_dir, source["path"], "source.path", mounts)
        canonical_source = {"path": str(model_dir)}
        if weights_format(source) == "gguf":
            model_dir, model_file = model_dir.parent, model_dir.name
    gpus = model.get("gpus", "all")
    spec: dict[str, object] = {
        "engine": engine,
        "image": image,
        "source": canonical_source,
        "model_dir": str(model_dir),
        "context_length": parse_token_count(model["context_length"]),
        "gpus": sorted(gpus) if isinstance(gpus, list) else gpus,
        **({"socket": socket} if socket else {"port": port}),
        "env": {name: _env_value(value) for name, value in sorted(model.get("env", {}).items())},
        "logs": log_settings(model.get("logs"), defaults),
    }
    if model_file is not None:
        spec["model_file"] = model_file
    if key := sleep_key(model, defaults, engine, bool(socket)):  # only when set: other models' specs stay as they were
        spec[key] = True  # on_demand, or sleep_mode (update: sleep): the engine starts with vLLM's sleep mode
    if engine == "vllm":
        written = model.get("vllm", {})
        settings = vllm_settings(written, defaults)
        if "speculative" in written:
            settings["speculative"] = speculative_spec(written["speculative"], base_dir, store, mounts)
        if model.get("adapters"):  # only when set: the specs of models without adapters stay as they were
            spec["adapters"] = adapters = adapter_specs(model["adapters"], base_dir, store, mounts)
            settings = lora_settings(settings, adapters, adapter_files or {})[0]
        spec["vllm"] = settings
    elif engine == "sglang":
        sglang: dict[str, object] = {**model.get("sglang", {})}
        sglang["gpu_memory_utilization"] = float(
            model.get("sglang", {}).get(
                "gpu_memory_utilization", defaults.get("gpu_memory_utilization", DEFAULT_GPU_MEMORY_UTILIZATION)
            )
        )
        spec["sglang"] = dict(sorted(sglang.items()))
    else:
        spec["llama.cpp"] = dict(sorted({"gpu_layers": "all", **model.get("llama.cpp", {})}.items()))
    order = ["engine", "image", "source", "model_dir", "model_file", "context_length", "gpus", "port", "socket"]
    order += ["on_demand", "sleep_mode", engine, "adapters", "env", "logs"]
    return model_spec_of({key: spec[key] for key in order if key in spec}, f"a {engine} model")


def speculative_spec(spec: SpeculativeSettings, base_dir: Path, store: Path, mounts: Mounts) -> dict[str, object]:
    """The speculative settings with the draft model resolved to its host folder (mounted read-only)."""
    out: dict[str, object] = {k: v for k, v in spec.items() if k != "draft"}
    draft = spec.get("draft")
    if draft and "repo" in draft:
        revision = draft.get("revision", "main")
        out["draft"] = {
            "repo": draft["repo"],
            "revision": revision,
            "model_dir": str(repo_dir(store, draft["repo"], revision)),
        }
    elif draft:
        folder = str(mountable(base_dir, draft["path"], "vllm.speculative.draft.path", mounts))
        out["draft"] = {"path": folder, "model_dir": folder}
    return dict(sorted(out.items()))


def vllm_settings(settings: VllmSettings, defaults: Defaults) -> dict[str, object]:
    """The vLLM settings as the spec holds them: the file's, with the fraction and tool calling filled."""
    out: dict[str, object] = {**settings}
    out["gpu_memory_utilization"] = float(
        settings.get("gpu_memory_utilization", defaults.get("gpu_memory_utilization", DEFAULT_GPU_MEMORY_UTILIZATION))
    )
    out["tool_calling"] = settings.get("tool_calling", True)
    if out["tool_calling"] and "tool_call_parser" not in settings:
        out["tool_call_parser"] = DEFAULT_TOOL_CALL_PARSER
    return dict(sorted(out.items()))


def _env_value(value: EnvValue) -> str | dict[str, str]:
    if isinstance(value, dict):
        return {kind: target for kind, target in value.items() if isinstance(target, str)}
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def assign_ports(project: str, models: Mapping[str, ModelEntry], router_port: int) -> dict[str, int]:
    """Explicit ports as written; the others get a port derived from project and alias, so it
    stays the same run after run and does not move when other models come and go (collisions,
    rare in a 10000-port range, are settled in a fixed order). More models than free ports is an
    error, never an endless search (the schema allows far fewer models than the range holds)."""
    taken = {router_port}
    ports: dict[str, int] = {}
    for alias, model in models.items():
        if "port" in model:
            ports[alias] = model["port"]
            taken.add(model["port"])
    slots = {
        a: int(hashlib.sha256(f"{project}/{a}".encode()).hexdigest(), 16) % AUTO_PORT_SPAN
        for a in models
        if a not in ports
    }
    free = AUTO_PORT_SPAN - sum(1 for p in taken if AUTO_PORT_BASE <= p < AUTO_PORT_BASE + AUTO_PORT_SPAN)
    if len(slots) > free:
        raise AigoError(
            f"{len(slots)} models need a port chosen for them but only {free} of ports "
            f"{AUTO_PORT_BASE}-{AUTO_PORT_BASE + AUTO_PORT_SPAN - 1} are free; set models.ALIAS.port for some"
        )
    for alias in sorted(slots, key=lambda a: (slots[a], a)):
        slot = slots[alias]
        while AUTO_PORT_BASE + slot in taken:
            slot = (slot + 1) % AUTO_PORT_SPAN
        ports[alias] = AUTO_PORT_BASE + slot
        taken.add(ports[alias])
    return ports
