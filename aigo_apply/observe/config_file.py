"""Loads the config file the way every command does: config/load reads it and checks it, with what
the host says of the paths it names gathered once in between (observe/host_paths.file_facts), so
that the rules themselves read nothing."""

from __future__ import annotations

from aigo_apply.config.load import Config, load_checked
from aigo_apply.observe.host_paths import file_facts


def load_config(file: str) -> Config:
    """The checked config in `file` (ConfigInvalid with every problem found, else)."""
    return load_checked(file, file_facts)
