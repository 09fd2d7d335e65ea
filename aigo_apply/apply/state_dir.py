"""The per-project state directory (lock file, journal, the router's files): $AIGO_STATE_DIR, else
$XDG_STATE_HOME/aigo-apply, else ~/.local/state/aigo-apply; one folder per project.
It holds no desired or observed state: the labels on the containers are the state.

One state root: `state_root` is its one rule (observe/host_paths.state_root_of as written, resolved
here), read once per run into the HostContext (app/host_context.current_host); the platforms, the
watcher and the router's folder are given that root, so one run never sees two."""

from __future__ import annotations

import os
from pathlib import Path

from aigo_apply.config.host_paths import short
from aigo_apply.errors import AigoError
from aigo_apply.observe.host_paths import resolve_or_why, state_root_of


def state_root() -> Path:
    """The folder that holds one state folder per project (observe/host_paths.state_root_of, the
    one definition the private-places policy also protects), resolved; one that cannot be
    resolved (a symlink loop, a name too long) is an error that says how to choose another."""
    root = Path(os.path.abspath(state_root_of()))
    real = resolve_or_why(root)
    if isinstance(real, str):
        raise AigoError(
            f"the state directory {short(root)} cannot be resolved: {real}; set AIGO_STATE_DIR to a folder you can write"
        )
    return real


def state_path(project: str, root: Path | None = None) -> Path:
    """Where the project's state folder is (not created), below `root` (the run's; None: read it now)."""
    return (state_root() if root is None else root) / project


def state_dir(project: str, root: Path | None = None) -> Path:
    """The project's state folder, created when missing."""
    path = state_path(project, root)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AigoError(
            f"cannot create the state directory {path}: {exc.strerror or exc}; set AIGO_STATE_DIR to a writable folder"
        ) from None
    return path
