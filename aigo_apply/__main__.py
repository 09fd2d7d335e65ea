"""Allows `python -m aigo_apply`."""

from aigo_apply.cli import entry

entry()
