"""Rules that span several fields and that JSON Schema cannot say: safe aliases, context length
ranges, port clashes, GPU memory fractions that add up to more than one GPU, secrets written in clear,
a canary gate whose requests do not fit the context (config/canary_rules.py).

Every check tolerates data that failed the schema (it skips what it cannot read) so that one run
reports every problem in the file at once.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections import defaultdict
from collections.abc import Callable
from typing import TypeGuard

from aigo_apply.config import (
    adapter_rules,
    canary_rules,
    compilation_rules,
    env_rules,
    kube_rules,
    mount_rules,
    names,
    swap_groups,
    swap_rules,
)
from aigo_apply.config.defaults import (
    DEFAULT_GPU_MEMORY_UTILIZATION,
    DEFAULT_ROUTER_PORT,
    MAX_GGUF_PARTS,
    ROUTER_TIMEOUT,
)
from aigo_apply.config.engine_choice import ENGINE_BY_FORMAT, engine_of, weights_format
from aigo_apply.config.engine_kinds import ENGINES
from aigo_apply.config.finder import Finder
from aigo_apply.config.names import ALIAS_RE
from aigo_apply.config.path_facts import HostPaths
from aigo_apply.config.secret_values import unquoted
from aigo_apply.config.units import parse_token_count
from aigo_apply.config.vllm_facts import config_release, deprecated_quantizations
from aigo_apply.config.yaml_source import Path_, Source
from aigo_apply.errors import Problem
from aigo_apply.json_types import JsonMap, JsonValue

MIN_CONTEXT, MAX_CONTEXT = 1, 16 * 1024 * 1024


def check(source: Source, paths: HostPaths) -> list[Problem]:
    """Every cross-field problem of `source`; `paths`: what the host says of the paths it names
    (observe/host_paths.file_facts), for the mount and secret-file rules."""
    data = _mapping(source.data)
    models = _mapping(data.get("models"))
    finder = Finder(source)
    rules: tuple[Callable[[JsonMap, JsonMap, Finder], None], ...] = (
        _aliases,
        _context_lengths,
        _ports,
        _engines,
        _gpu_fractions,
        _tensor_parallel,
        functools.partial(env_rules.check_env, paths=paths),
        _quantization,
        _split_gguf,
        kube_rules.check,
        swap_rules.check,
        adapter_rules.check,
        canary_rules.check,
        compilation_rules.check,
    )
    for rule in rules:
        rule(data, models, finder)
    mount_rules.check_paths(data, models, finder, paths)
    _router_bind(data, finder)
    _router_hold(data, finder)
    return unquoted(finder.problems)  # a rule may quote the value it refuses: never a credential


def _mapping(value: JsonValue) -> JsonMap:
    """`value` when it is a mapping, else an empty one (what failed the schema is skipped here)."""
    return value if isinstance(value, dict) else {}


def _engine(data: JsonMap, model: JsonValue) -> str:
    return engine_of(model, data.get("defaults"))


def _settings(data: JsonMap, model: JsonValue) -> tuple[str, JsonMap]:
    """The engine that runs the model and its settings block (the other engines' blocks are ignored)."""
    engine = _engine(data, model)
    block = model.get(engine) if isinstance(model, dict) else None
    return engine, block if isinstance(block, dict) else {}


def _engines(data: JsonMap, models: JsonMap, f: Finder) -> None:
    """The engine fits the weights' format, and an engine without a built-in tag has one named."""
    engines = _mapping(data.get("engines"))
    for alias, model in models.items():
        if not isinstance(model, dict):
            continue
        engine, fmt = _engine(data, model), weights_format(model.get("source"))
        kind = ENGINES[engine]
        where = ("models", alias, "engine") if "engine" in model else ("models", alias)
        if fmt != kind.weights_format and fmt == "gguf":
            f.at_key(
                where,
                f"the model is one GGUF file, which {engine} does not serve here; "
                f"use engine: {ENGINE_BY_FORMAT[fmt]} (or point source at a safetensors folder or repo)",
            )
        elif fmt != kind.weights_format:
            others = " or ".join(k.name for k in ENGINES.values() if k.weights_format == fmt)
            f.at_key(
                where,
                f"{engine} serves one .gguf file; set source.path to a .gguf file or source.file to the "
                f".gguf file in the repo, or use engine: {others} for a safetensors model",
            )
        section = _mapping(engines.get(engine))
        if kind.default_tag is None and "image_tag" not in section:
            f.at_key(
                where,
                f"the model runs on {engine}, which has no built-in image tag; set "
                f"engines.{engine}.image_tag (for example {kind.tag_example})",
            )


_SPLIT_NAME = re.compile(r"-(\d{5})-of-(\d{5})\.gguf\Z")


def _split_gguf(data: JsonMap, models: JsonMap, f: Finder) -> None:
    """A split GGUF name must be a part that exists in a split (i of n, 1 <= i <= n <= MAX_GGUF_PARTS):
    the engine loads every part from the first, so a name like -00001-of-00000 would mount one file."""
    for alias, model in models.items():
        source = _mapping(_mapping(model).get("source"))
        for key in ("path", "file"):
            name = source.get(key)
            found = _SPLIT_NAME.search(name) if isinstance(name, str) else None
            if found is None:
                continue
            index, count = int(found.group(1)), int(found.group(2))
            if not 1 <= index <= count or count > MAX_GGUF_PARTS:
                f.at_value(
                    ("models", alias, "source", key),
                    f"names part {index} of {count} of a split GGUF file, which no split has "
                    f"(parts are 00001-of-N up to N, at most {MAX_GGUF_PARTS}); name the split's first part, "
                    "as gguf-split wrote it",
                )


def _aliases(data: JsonMap, models: JsonMap, f: Finder) -> None:
    """Safe, distinct aliases whose container names never take one the tool keeps for itself."""
    seen: dict[str, str] = {}
    project = named if isinstance(named := data.get("project"), str) else "PROJECT"
    for alias in models:
        path = ("models", alias)
        if not ALIAS_RE.match(alias):
            f.at_key(
                path,
                f"alias {alias!r} is not a safe name: use 1-64 letters, digits, '.', '_' or '-', "
                "starting with a letter or digit (clients send it as `model`)",
            )
        elif reserved := names.reserved_problem(project, alias):
            f.at_key(path, reserved)
        folded = alias.lower()
        if folded in seen:
            f.at_key(
                path,
                f"alias '{alias}' differs from '{seen[folded]}' only in case; clients would confuse them, rename one",
            )
        seen.setdefault(folded, alias)


def _context_lengths(data: JsonMap, models: JsonMap, f: Finder) -> None:
    for alias, model in models.items():
        written = model.get("context_length") if isinstance(model, dict) else None
        if not isinstance(model, dict) or not isinstance(written, (int, str)):
            continue
        path = ("models", alias, "context_length")
        try:
            tokens = parse_token_count(written)
        except ValueError as exc:
            f.at_value(path, str(exc))
            continue
        if not MIN_CONTEXT <= tokens <= MAX_CONTEXT:
            f.at_value(path, f"{tokens} tokens is out of range; use {MIN_CONTEXT} to {MAX_CONTEXT}")


def _valid_port(value: JsonValue) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535


def _ports(data: JsonMap, models: JsonMap, f: Finder) -> None:
    router = _mapping(data.get("router"))
    router_port = router.get("port", DEFAULT_ROUTER_PORT)
    owners: dict[int, str] = {}
    for alias, model in models.items():
        port = model.get("port") if isinstance(model, dict) else None
        if not _valid_port(port):
            continue
        path = ("models", alias, "port")
        if port == router_port:
            f.at_value(path, f"port {port} is the router's port (router.port); choose another port for this model")
        elif port in owners:
            f.at_value(path, f"port {port} is already used by model '{owners[port]}'; each model needs its own port")
        else:
            owners[port] = alias


def _gpus_of(model: JsonMap) -> JsonValue:
    return model.get("gpus", "all")


def _gpu_indices(gpus: JsonValue) -> list[int] | None:
    """The indices of a list the schema accepts (1-64 indices 0-63), else None: a longer one is refused
    there, not walked here."""
    if not isinstance(gpus, list) or not 0 < len(gpus) <= 64:
        return None
    indices = [g for g in gpus if isinstance(g, int) and not isinstance(g, bool) and 0 <= g <= 63]
    return indices if len(indices) == len(gpus) else None


def _gpu_fractions(data: JsonMap, models: JsonMap, f: Finder) -> None:
    defaults = _mapping(data.get("defaults"))
    default_fraction = defaults.get("gpu_memory_utilization", DEFAULT_GPU_MEMORY_UTILIZATION)
    if not isinstance(default_fraction, (int, float)) or data.get("platform") == "kubernetes":
        return  # on a cluster each pod gets GPUs of its own (kube_rules counts them per node)
    fractions: dict[str, float] = {}
    placement: dict[str, str | set[int]] = {}  # alias -> "all" or its GPU indices
    for alias, model in models.items():
        if not isinstance(model, dict) or model.get("enabled") is False:  # a disabled model holds no GPU
            continue
        gpus = _gpus_of(model)
        engine, settings = _settings(data, model)
        if not ENGINES[engine].fraction:  # llama.cpp: it takes what its layers and context need
            continue
        fraction = settings.get("gpu_memory_utilization", default_fraction)
        if gpus == "none" or not isinstance(fraction, (int, float)) or isinstance(fraction, bool):
            continue
        indices = _gpu_indices(gpus)
        if gpus == "all" or indices is not None:
            fractions[alias], placement[alias] = float(fraction), "all" if indices is None else set(indices)
    on_gpus = sorted({g for gpus in placement.values() if isinstance(gpus, set) for g in gpus}) or [0]
    every = all(g == "all" for g in placement.values())
    by_members: dict[tuple[str, ...], list[int]] = defaultdict(list)
    groups = swap_groups.membership(swap_groups.swap_groups(models))  # a group counts its max_awake largest
    for index in on_gpus:
        members = tuple(a for a, g in placement.items() if g == "all" or (isinstance(g, set) and index in g))
        if swap_groups.awake_sum(list(members), fractions, groups) > 1.0 + 1e-9:
            by_members[members].append(index)
    for members, gpu_list in by_members.items():
        where = "every GPU" if every else ("GPU " if len(gpu_list) == 1 else "GPUs ") + ", ".join(map(str, gpu_list))
        parts = " + ".join(f"{a} ({fractions[a]:g})" for a in members)
        total = swap_groups.awake_sum(list(members), fractions, groups)
        if any(a in groups for a in members):
            parts += " (a swap group counts only its max_awake largest)"
        last = members[-1]
        engine, settings = _settings(data, models[last])
        path: Path_ = ("models", last, engine, "gpu_memory_utilization")
        if "gpu_memory_utilization" not in settings:
            path = ("models", last)
        f.at_key(
            path,
            f"{where} would be over-committed: {parts} = {total:.2f} of its memory; "
            f"lower {engine}.gpu_memory_utilization (or defaults.gpu_memory_utilization) so the sum is at most 1.0, "
            "or put the models on different GPUs with `gpus:`",
        )


def _tensor_parallel(data: JsonMap, models: JsonMap, f: Finder) -> None:
    for alias, model in models.items():
        engine, settings = _settings(data, model)
        tp = settings.get("tensor_parallel_size")
        if not isinstance(tp, int) or isinstance(tp, bool) or tp <= 1:
            continue
        gpus = _gpus_of(_mapping(model))  # a mapping: it has settings
        path = ("models", alias, engine, "tensor_parallel_size")
        if gpus == "none":
            f.at_value(path, f"tensor_parallel_size {tp} needs {tp} GPUs but the model has `gpus: none`")
        elif isinstance(gpus, list) and len(gpus) < tp:
            f.at_value(
                path,
                f"tensor_parallel_size {tp} needs {tp} GPUs but `gpus` lists {len(gpus)}; list {tp} GPUs or lower it",
            )


def _quantization(data: JsonMap, models: JsonMap, f: Finder) -> None:
    deprecated = set(deprecated_quantizations(config_release(data)))
    for alias, model in models.items():
        engine, settings = _settings(data, model)
        method = settings.get("quantization") if engine == "vllm" else None
        if method in deprecated:
            f.at_value(
                ("models", alias, "vllm", "quantization"),
                f"'{method}' is deprecated in vLLM v0.31.0 and only starts behind an extra allow flag, "
                "which aigo-apply does not set; leave quantization unset to use the checkpoint's own method",
            )


def _router_hold(data: JsonMap, f: Finder) -> None:
    """A held request waits within the time any request may take."""
    router = _mapping(data.get("router"))
    hold, timeout = router.get("hold_seconds"), router.get("timeout", ROUTER_TIMEOUT)
    if type(hold) is int and type(timeout) is int and hold > timeout:
        f.at_value(
            ("router", "hold_seconds"),
            f"{hold} is longer than router.timeout ({timeout}), the most a request may take; "
            "lower it or raise router.timeout",
        )


def _router_bind(data: JsonMap, f: Finder) -> None:
    """An address the router can listen on: a unicast IP address (HAProxy cannot bind a multicast
    or broadcast address, and would only fail once its container starts)."""
    router = _mapping(data.get("router"))
    bind = router.get("bind")
    if isinstance(bind, str):
        try:
            address = ipaddress.ip_address(bind)
        except ValueError:
            f.at_value(
                ("router", "bind"), f"{bind!r} is not an IP address; use 127.0.0.1 (this machine only) or 0.0.0.0"
            )
            return
        if address.is_multicast or str(address) == "255.255.255.255":
            f.at_value(
                ("router", "bind"),
                f"{bind!r} is a multicast or broadcast address, which a router cannot listen on; "
                "use 127.0.0.1 (this machine only), 0.0.0.0 or an address of this machine",
            )
