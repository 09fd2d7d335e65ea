"""The host's path facts (observe/host_paths.py), read once for the pure layers: each path a file
mounts with where it leads, a store's writers, and every account's home only when the file needs it."""

from __future__ import annotations

from pathlib import Path

from aigo_apply.observe import host_paths


def _listed(monkeypatch) -> list[int]:
    calls: list[int] = []
    monkeypatch.setattr(host_paths, "known_homes", lambda: calls.append(1) or (Path("/home/zed"),))
    return calls


def test_a_file_that_mounts_nothing_lists_no_homes(tmp_path, monkeypatch):
    calls = _listed(monkeypatch)
    data = {"version": 1, "project": "p", "models": {"a": {"source": {"repo": "o/m"}}}}
    facts = host_paths.file_facts(str(tmp_path / "aigo.yaml"), data)
    assert calls == [] and facts.homes == () and facts.base_dir == tmp_path.resolve()


def test_a_file_that_mounts_a_folder_or_names_a_secret_file_gets_every_home(tmp_path, monkeypatch):
    calls = _listed(monkeypatch)
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    mounts = {"models": {"a": {"source": {"path": "link"}}}}
    facts = host_paths.file_facts(str(tmp_path / "aigo.yaml"), mounts)
    assert facts.homes == (Path("/home/zed"),)
    assert facts.real_of(tmp_path.resolve() / "link") == (tmp_path / "real").resolve()
    secret = {"models": {"a": {"source": {"repo": "o/m"}, "env": {"K": {"from_file": "/k"}}}}}
    assert host_paths.file_facts(str(tmp_path / "aigo.yaml"), secret).homes == (Path("/home/zed"),)
    assert len(calls) == 2


def test_a_store_the_file_names_has_its_writers_gathered(tmp_path, monkeypatch):
    _listed(monkeypatch)
    store = tmp_path / "store"
    store.mkdir()
    store.chmod(0o777)
    facts = host_paths.file_facts(str(tmp_path / "aigo.yaml"), {"defaults": {"models_dir": str(store)}})
    real = facts.real_of(store)
    assert isinstance(real, Path) and "every account may write" in str(facts.others(real))


def test_the_hosts_own_facts_hold_its_home_and_store(tmp_path, monkeypatch):
    _listed(monkeypatch)
    (tmp_path / "h").mkdir()
    (tmp_path / "home").symlink_to(tmp_path / "h")
    facts = host_paths.host_facts(tmp_path / "home", tmp_path / "store")
    assert facts.home_real == (tmp_path / "h").resolve()
    assert facts.mine(facts.home) == {tmp_path / "home", (tmp_path / "h").resolve()}
    assert facts.real_of(tmp_path / "store") == (tmp_path / "store").resolve()
    assert facts.others((tmp_path / "store").resolve()) is None
