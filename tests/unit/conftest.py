"""Unit tests keep every project's state (its lock, journal, sockets) in a folder of their own, never
in this account's: two test runs at once (or a user's own aigo-apply) would otherwise share a project's
lock and state. A test that sets AIGO_STATE_DIR itself, or removes it to test the default, still can."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _own_state_root(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("AIGO_STATE_DIR", str(tmp_path_factory.mktemp("state")))
