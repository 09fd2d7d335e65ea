"""Where a file's downloads live (defaults.models_dir, else the host's model store), resolved and
judged once per build: desired/build.build_desired and desired/adapters.adapter_dirs both start
from it. Pure: the folders' facts were gathered before (HostPaths)."""

from __future__ import annotations

from pathlib import Path

from aigo_apply.config.host_paths import unsafe_mount
from aigo_apply.config.load import Config
from aigo_apply.config.path_facts import HostPaths
from aigo_apply.desired.types import HostContext
from aigo_apply.errors import UnsafeSetting


def store_folder(config: Config, host: HostContext, paths: HostPaths) -> Path:
    """The model store of `config` on `host` (`paths`: the host's facts with the file's), or an
    UnsafeSetting when it cannot be resolved or is not a folder of its own."""
    defaults = config.data.get("defaults", {})
    store = host.expand_home(defaults["models_dir"]) if "models_dir" in defaults else host.models_dir
    if not store.is_absolute():
        real = paths.real_of(config.base_dir / store)
        if isinstance(real, str):
            raise UnsafeSetting(f"{config.file}: defaults.models_dir: {store} cannot be resolved: {real}")
        store = real
    _check_store(config.file, store, host, paths)
    return store


def _check_store(file: str, store: Path, host: HostContext, paths: HostPaths) -> None:
    """The model store is never mounted itself, but every download below it is: not a system or
    private folder, nor inside the tool's state or the Hugging Face cache."""
    around = tuple(p for p in host.protected(store) if p.inside_too)
    real = paths.real_of(store)
    if isinstance(real, str):
        raise UnsafeSetting(
            f"{file}: defaults.models_dir: {store} cannot be resolved: {real}; choose a folder of its own"
        )
    home = paths.home_real
    mine, others = paths.mine(home), paths.others(real)
    why = unsafe_mount(real, home, around, store=True, homes=paths.homes, mine=mine, others=others)
    if why:
        raise UnsafeSetting(
            f"{file}: defaults.models_dir: {store} is {why}; downloads go there and are mounted into engines: "
            "choose a folder of their own"
        )
