"""Reads the host context the desired state depends on (user and group ids, home, the state and
model-store folders) from this process, once, so that `desired/` reads nothing itself."""

from __future__ import annotations

import os
from pathlib import Path

from aigo_apply.apply.state_dir import state_root
from aigo_apply.config.host_paths import hf_home, models_dir_of
from aigo_apply.desired.types import HostContext


def default_models_dir() -> Path:
    """Where downloaded models live unless defaults.models_dir says otherwise (one definition:
    config/host_paths.models_dir_of, which the private-places policy also protects)."""
    return models_dir_of()


def current_host() -> HostContext:
    return HostContext(os.getuid(), os.getgid(), Path.home(), state_root(), default_models_dir(), hf_home())
