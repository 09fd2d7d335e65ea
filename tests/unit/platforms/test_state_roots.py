"""No shared folder, no service's folder and no file is taken as the state root or as a project's
state folder (platforms/state_dir.py): `/var/lib`, `/opt`, `/srv`, `/home` as the root, a root that holds
what aigo-apply did not make (`/var/lib/dpkg`, `/var/cache/apt`, `/opt/containerd`), a project folder
that holds another program's files (`state_dir("dpkg", /var/lib-like root)`). A folder of your own
stays accepted: a new one, one aigo-apply made (its mark), one an older aigo-apply made (nothing but
what it writes; marked then). Real folders; the tests run as root, as the attack did (a service's
folders are root's)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aigo_apply.errors import AigoError
from aigo_apply.platforms.state_dir import MARKER, state_dir, state_root

from helpers.cli import run_cli
from helpers.configs import write_config

OTHER = 65534
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another account needs root")
SHARED = ["/var", "/var/lib", "/var/cache", "/var/tmp", "/home", "/opt", "/srv", "/tmp", "/mnt", "/media", "/root"]
SERVICES = ["/var/lib/dpkg", "/var/lib/apt", "/var/cache/apt", "/opt/containerd", "/var/lib/systemd"]


@pytest.fixture
def env(monkeypatch):
    for name in ("AIGO_STATE_DIR", "XDG_STATE_HOME"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize("root", SHARED)
def test_a_shared_folder_is_no_state_root(env, root):
    env.setenv("AIGO_STATE_DIR", root)
    before = sorted(os.listdir(root)) if os.path.isdir(root) else None
    with pytest.raises(AigoError, match="is a shared folder that holds other programs' and accounts' folders"):
        state_root()
    with pytest.raises(AigoError, match="is a system or shared folder"):
        state_dir("lab", Path(root))  # given the root directly, as the platforms are
    assert (sorted(os.listdir(root)) if os.path.isdir(root) else None) == before


@pytest.mark.parametrize("root", SERVICES)
def test_a_services_folder_on_this_machine_is_no_state_root(env, root):
    if not os.path.isdir(root) or not any(p.is_file() or any(p.iterdir()) for p in Path(root).iterdir()):
        pytest.skip(f"{root} is not here, or holds only empty folders (which a project may be given)")
    env.setenv("AIGO_STATE_DIR", root)
    with pytest.raises(AigoError, match=r"holds '.+', which aigo-apply did not make \(another program's folder\)"):
        state_root()


def _service(folder: Path) -> Path:
    """A folder as a package leaves one below /var/lib: its files and folders, root's."""
    (folder / "info").mkdir(parents=True)
    (folder / "info" / "x.list").write_text("/usr/bin/x\n")
    (folder / "status").write_text("Package: x\n")
    return folder


def test_a_services_folder_is_no_state_root_and_no_project_folder(env, tmp_path):
    lib = tmp_path / "lib"
    dpkg = _service(lib / "dpkg")
    env.setenv("AIGO_STATE_DIR", str(dpkg))
    with pytest.raises(AigoError, match=r"holds 'info', which aigo-apply did not make"):
        state_root()
    with pytest.raises(AigoError) as refused:
        state_dir("dpkg", lib)  # the attack: root /var/lib, project dpkg
    assert f"the state directory {dpkg} of project 'dpkg' holds 'info', which aigo-apply does not write" in str(
        refused.value
    )
    assert sorted(p.name for p in dpkg.iterdir()) == ["info", "status"]  # no mark, nothing written


def test_a_file_is_no_state_root_nor_project_folder(env, tmp_path):
    (tmp_path / "state").write_text("x")
    env.setenv("AIGO_STATE_DIR", str(tmp_path / "state"))
    with pytest.raises(AigoError, match="the state directory .+ is not a folder"):
        state_root()
    root = tmp_path / "root"
    root.mkdir()
    (root / "lab").write_text("x")
    with pytest.raises(AigoError, match="of project 'lab' is not a folder"):
        state_dir("lab", root)
    env.setenv("AIGO_STATE_DIR", str(root))
    with pytest.raises(AigoError, match="holds 'lab', which aigo-apply did not make"):
        state_dir("lab")  # the root that holds it is no state root
    assert (root / "lab").read_text() == "x"


def test_a_new_project_folder_is_marked_and_taken_again(env, tmp_path):
    env.setenv("AIGO_STATE_DIR", str(tmp_path / "home" / "ada" / "state"))
    folder = state_dir("lab")
    assert (folder / MARKER).is_file() and oct((folder / MARKER).stat().st_mode & 0o777) == "0o600"
    (folder / "journal.jsonl").write_text("{}\n")
    (folder / "router").mkdir()
    assert state_root() == tmp_path / "home" / "ada" / "state"  # it holds only aigo-apply's projects
    assert state_dir("lab") == folder
    assert state_dir("other") == folder.parent / "other"


def test_an_older_aigo_apply_s_project_folder_is_taken_and_marked(env, tmp_path):
    root = tmp_path / "state"
    older = root / "lab"
    (older / "router" / "gen-1").mkdir(parents=True)
    for name in ("apply.lock", "journal.jsonl"):
        (older / name).write_text("")
    (root / "empty").mkdir(mode=0o700)
    env.setenv("AIGO_STATE_DIR", str(root))
    assert state_root() == root
    assert state_dir("lab") == older and (older / MARKER).is_file()
    assert state_dir("empty") == root / "empty" and (root / "empty" / MARKER).is_file()


def test_a_project_folder_holding_other_files_is_refused_and_left_alone(env, tmp_path):
    root = tmp_path / "state"
    (root / "lab").mkdir(parents=True, mode=0o700)
    (root / "lab" / "notes.txt").write_text("mine")
    (root / "lab" / "journal.jsonl").write_text("")
    with pytest.raises(AigoError, match="holds 'notes.txt', which aigo-apply does not write"):
        state_dir("lab", root)
    assert sorted(p.name for p in (root / "lab").iterdir()) == ["journal.jsonl", "notes.txt"]


@ROOT_ONLY
def test_another_accounts_folder_holding_its_files_is_no_state_root(env, tmp_path):
    theirs = tmp_path / "srv" / "theirs"
    (theirs / "data").mkdir(parents=True)
    (theirs / "data" / "x").write_text("x")
    os.chown(theirs, OTHER, OTHER)
    env.setenv("AIGO_STATE_DIR", str(theirs))
    with pytest.raises(AigoError, match="holds 'data', which aigo-apply did not make"):
        state_root()


@pytest.mark.parametrize("root", ["/var/lib", "/opt", "/srv", "/home"])
def test_plan_refuses_a_shared_state_root_before_anything_is_written(tmp_path, root):
    config = write_config(
        tmp_path, "version: 1\nproject: lab\nmodels:\n  a: {source: {repo: org/m}, context_length: 4096}\n"
    )
    result = run_cli("plan", "-f", str(config), env={"AIGO_STATE_DIR": root})
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"error: the state directory {root} is a shared folder" in result.stderr
