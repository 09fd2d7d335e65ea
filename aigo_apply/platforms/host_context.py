"""Reads the host context the desired state depends on (user and group ids, home, the state and
model-store folders, and what the host says of them: observe/host_paths.host_facts) from this
process, once, so that `desired/` reads nothing itself; and builds the desired state with the facts
of the adapters' folders read before."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from aigo_apply.config.load import Config
from aigo_apply.desired.adapters import adapter_dirs
from aigo_apply.desired.build import build_desired
from aigo_apply.desired.types import AdapterFiles, DesiredState, HostContext
from aigo_apply.observe.adapter_files import adapter_files
from aigo_apply.observe.host_paths import hf_home, host_facts, models_dir_of
from aigo_apply.platforms.state_dir import state_root


def default_models_dir() -> Path:
    """Where downloaded models live unless defaults.models_dir says otherwise (one definition:
    observe/host_paths.models_dir_of, which the private-places policy also protects)."""
    return models_dir_of()


def current_host() -> HostContext:
    home, store = Path.home(), default_models_dir()
    return HostContext(os.getuid(), os.getgid(), home, state_root(), store, hf_home(), host_facts(home, store))


def desired_state(config: Config, host: HostContext, hub: Mapping[str, AdapterFiles] | None = None) -> DesiredState:
    """The desired state, built once, with what each LoRA adapter's folder holds read first (its rank
    sizes the engine's --max-lora-rank): the folders are found from the file
    (desired/adapters.adapter_dirs), read, then the state is built with their facts. `hub`: by
    folder, what the Hub says of repo adapters not downloaded yet (platforms/hub_facts.adapter_answers),
    over what their folders hold now."""
    folders = adapter_dirs(config, host)
    files = {**adapter_files(folders), **(hub or {})} if folders else None
    return build_desired(config, host, files)
