"""A vLLM model's LoRA adapters in its canonical spec: each adapter's source and host folder (a repo
adapter in the model store's folder of adapters, never a model's; a local one resolved and judged by the mount
rules like a local model), and the two settings that size the engine's room for them, filled in:
`max_loras` (default: how many adapters it has) and `max_lora_rank` (default: the largest rank the
adapters' adapter_config.json declare, rounded up to one of vLLM v0.31.0's choices; vLLM's own 16
while one of them cannot be read). Pure: the adapters' files were read before (AdapterFiles, by
folder), so the same file and the same facts always give the same spec."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import partial
from pathlib import Path

from aigo_apply.config.document import Adapter
from aigo_apply.config.engine_choice import engine_of
from aigo_apply.config.engine_kinds import ENGINES
from aigo_apply.config.load import Config
from aigo_apply.desired.model_store import Download, Mounts, mountable, repo_dir
from aigo_apply.desired.spec import AdapterSpec, ModelSpec, SourceSpec
from aigo_apply.desired.store_folder import store_folder
from aigo_apply.desired.types import AdapterFiles, HostContext
from aigo_apply.errors import UnsafeSetting

ADAPTER_MOUNT = "/adapters"  # each adapter at /adapters/ALIAS in its engine's container, read-only
# vLLM v0.31.0's --max-lora-rank choices (vllm/config/lora.py MaxLoRARanks) and its default.
MAX_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
VLLM_DEFAULT_RANK = 16


def adapter_specs(
    adapters: Mapping[str, Adapter], base_dir: Path, store: Path, mounts: Mounts
) -> dict[str, AdapterSpec]:
    """alias -> {source, adapter_dir}, sorted by alias: what the engine mounts and names."""
    out: dict[str, AdapterSpec] = {}
    for name in sorted(adapters):
        source = adapters[name]["source"]
        canonical: SourceSpec
        if "repo" in source:
            canonical = {"repo": source["repo"], "revision": source.get("revision", "main")}
            folder = repo_dir(store, source["repo"], canonical["revision"], "adapter")
        else:
            folder = mountable(base_dir, source["path"], f"adapters.{name}.source.path", mounts)
            canonical = {"path": str(folder)}
        out[name] = {"source": canonical, "adapter_dir": str(folder)}
    return out


def rank_choice(rank: int) -> int | None:
    """The smallest --max-lora-rank choice that holds `rank` (None: above vLLM's largest, 512)."""
    return next((choice for choice in MAX_LORA_RANKS if choice >= rank), None)


def lora_settings(
    settings: Mapping[str, object], adapters: Mapping[str, AdapterSpec], files: Mapping[str, AdapterFiles]
) -> tuple[dict[str, object], tuple[str, ...]]:
    """The vLLM settings with max_loras and max_lora_rank filled for a model with adapters, and the
    plan's notes on how the rank was chosen."""
    out = dict(settings)
    out.setdefault("max_loras", len(adapters))
    if "max_lora_rank" in settings:
        return dict(sorted(out.items())), ()
    ranks = {name: files[a["adapter_dir"]].rank if a["adapter_dir"] in files else None for name, a in adapters.items()}
    unread = sorted(name for name, rank in ranks.items() if rank is None)
    known = [rank for rank in ranks.values() if rank is not None]
    # a rank above vLLM's largest choice gets the largest (the plan's adapter.files check then blocks)
    largest = max((rank_choice(r) or MAX_LORA_RANKS[-1] for r in known), default=None)
    if unread:
        out["max_lora_rank"] = max(VLLM_DEFAULT_RANK, largest or 0)
        notes: tuple[str, ...] = (
            f"max_lora_rank {out['max_lora_rank']}: the rank of adapter {', '.join(unread)} is not known "
            "(its adapter_config.json is neither on this machine nor given by the Hub); set vllm.max_lora_rank to choose",
        )
    else:
        out["max_lora_rank"] = largest
        notes = (f"max_lora_rank {out['max_lora_rank']}: the largest rank the adapters declare is {max(known)}",)
    return dict(sorted(out.items())), notes


def adapter_folders(specs: Mapping[str, ModelSpec]) -> list[str]:
    """Every adapter folder the models' specs name (what observe/adapter_files.py reads), sorted."""
    return sorted({a["adapter_dir"] for spec in specs.values() for a in spec.get("adapters", {}).values()})


def _file_adapters(config: Config, host: HostContext) -> Iterator[tuple[str, str, Adapter, Callable[[], AdapterSpec]]]:
    """(model alias, adapter name, the adapter as written, its spec as the build makes it) of each
    adapter of the file's enabled models whose engine serves adapters, in the build's order (models,
    then adapters, by name). The spec is made when asked (a local adapter's folder is judged by the
    mount rules then: UnsafeSetting); a model store that cannot be used is refused first, as the build
    refuses it."""
    paths = host.paths_with(config.paths)
    store = store_folder(config, host, paths)
    mounts = Mounts(host, paths, store)
    defaults, models = config.data.get("defaults", {}), config.data.get("models", {})
    for alias in sorted(models):
        model = models[alias]
        kind = ENGINES.get(engine_of(model, defaults))
        if model.get("enabled") is False or not model.get("adapters") or kind is None or not kind.adapters:
            continue
        for name in sorted(model["adapters"]):
            adapter = model["adapters"][name]
            yield alias, name, adapter, partial(_one_spec, name, adapter, config.base_dir, store, mounts)


def _one_spec(name: str, adapter: Adapter, base_dir: Path, store: Path, mounts: Mounts) -> AdapterSpec:
    return adapter_specs({name: adapter}, base_dir, store, mounts)[name]


def adapter_dirs(config: Config, host: HostContext) -> list[str]:
    """Every adapter folder the desired state of `config` on `host` will name (adapter_folders of its
    specs), sorted, found from the file without building it: what observe/adapter_files.py reads
    before the one build (platforms/host_context.desired_state). A local adapter whose folder the
    mount rules refuse is left out (the build refuses it, with the model's name)."""
    found: set[str] = set()
    for _, _, _, spec in _file_adapters(config, host):
        try:
            found.add(spec()["adapter_dir"])
        except UnsafeSetting:
            continue
    return sorted(found)


def adapter_downloads(config: Config, host: HostContext) -> list[Download]:
    """The downloads of the file's repo LoRA adapters, found from the file as model_store.downloads finds
    them in the built specs (same entries, same order): what a plan asks the Hub about before the
    desired state is built once, with the answers (platforms/docker/platform.DockerPlatform.planning,
    platforms/kubernetes/platform.py)."""
    found: dict[tuple[str, str, str], Download] = {}
    for alias, name, adapter, spec in _file_adapters(config, host):
        if "repo" not in adapter["source"]:
            continue  # a local adapter: nothing to download (one the mount rules refuse, the build refuses)
        made = spec()
        source = made["source"]
        key = (source["repo"], source.get("revision", "main"), made["adapter_dir"])
        entry = found.setdefault(
            key,
            {"repo": key[0], "revision": key[1], "file": None, "dest": key[2], "models": [], "kind": "adapter"},
        )
        if alias not in entry["models"]:
            entry["models"].append(alias)
        entry.setdefault("adapters", []).append(name)
    return list(found.values())
