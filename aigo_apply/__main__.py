"""Allows `python -m aigo_apply`."""

from aigo_apply.cli.main import entry

entry()
