"""The state root and a project's state folder are refused before anything is written (platforms/state_dir.py):
a root that is `/` or lies in a system folder once its links are resolved (`/etc`, `/proc/self`, `/usr`,
`/var/lib/docker`, ...), whichever setting chose it; a project folder that is there already but is not
this account's alone (another account's, writable by every account or by a group others are in, a
symlink, a file); a project folder that is itself a system or shared folder. Real folders throughout
(the tests run as root; another account is uid/gid 65534)."""

from __future__ import annotations

import os
import pwd
import stat
import uuid
from pathlib import Path

import pytest

from aigo_apply.errors import AigoError
from aigo_apply.platforms.state_dir import state_dir, state_root

from helpers.cli import run_cli
from helpers.configs import write_config

OTHER = 65534  # nobody / nogroup: another account, whose primary group nogroup is
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another account needs root")
FIX = "set AIGO_STATE_DIR to a folder of your own, such as ~/.local/state/aigo-apply (nothing was written)"

SYSTEM = {
    "/etc": "/etc",
    "/etc/aigo-apply-test-state": "/etc",
    "/proc/self": "/proc",
    "/proc/1": "/proc",
    "/sys/kernel": "/sys",
    "/dev/shm/aigo-apply-test-state": "/dev",
    "/usr": "/usr",
    "/usr/lib/aigo-apply-test-state": "/usr",
    "/bin": "/bin",
    "/sbin/x": "/sbin",
    "/boot/aigo": "/boot",
    "/lib/aigo": "/lib",
    "/lib64/aigo": "/lib64",
    "/var/lib/docker/aigo": "/var/lib/docker",
    "/var/log/aigo": "/var/log",
    "/run/aigo": "/run",
}


@pytest.fixture
def env(monkeypatch):
    for name in ("AIGO_STATE_DIR", "XDG_STATE_HOME"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _real(path: str) -> str:
    return str(Path(path).resolve())


@pytest.mark.parametrize("root", SYSTEM)
def test_a_state_root_in_a_system_folder_is_refused_before_anything_is_written(env, root):
    env.setenv("AIGO_STATE_DIR", root)
    existed = os.path.lexists(root)
    with pytest.raises(AigoError) as refused:
        state_root()
    real = _real(root)
    shown = root if real == root else f"{root} (which is {real})"
    system = SYSTEM[root] if Path(real).is_relative_to(SYSTEM[root]) else "/usr"  # /bin -> /usr/bin (merged /usr)
    assert str(refused.value) == (
        f"the state directory {shown} lies in the system folder {system}, where aigo-apply would keep each "
        f"project's lock, journal and router files; {FIX}"
    )
    assert os.path.lexists(root) == existed  # nothing made


def test_the_root_of_the_file_system_is_refused(env):
    env.setenv("AIGO_STATE_DIR", "/")
    with pytest.raises(AigoError) as refused:
        state_root()
    assert str(refused.value) == (
        "the state directory / is the root of the file system, where aigo-apply would keep each project's lock, "
        f"journal and router files; {FIX}"
    )


@pytest.mark.parametrize("target", ["/etc", "/proc/self", "/usr/share"])
def test_a_link_to_a_system_folder_is_resolved_first(env, tmp_path, target):
    (tmp_path / "state").symlink_to(target)
    env.setenv("AIGO_STATE_DIR", str(tmp_path / "state"))
    with pytest.raises(AigoError) as refused:
        state_root()
    assert str(refused.value).startswith(f"the state directory {tmp_path / 'state'} (which is {_real(target)}) lies ")


def test_the_message_names_the_setting_that_chose_the_root(env, tmp_path):
    env.setenv("XDG_STATE_HOME", "/etc")
    with pytest.raises(AigoError) as from_xdg:
        state_root()
    assert str(from_xdg.value).startswith("the state directory /etc/aigo-apply lies in the system folder /etc")
    assert "set AIGO_STATE_DIR (it is now XDG_STATE_HOME/aigo-apply) to a folder of your own" in str(from_xdg.value)
    env.setenv("HOME", "/usr")
    env.delenv("XDG_STATE_HOME")
    with pytest.raises(AigoError, match=r"set AIGO_STATE_DIR \(it is now under your home folder, HOME\) to"):
        state_root()


@pytest.mark.parametrize("root", ["state", "a/b/c", "link"])
def test_an_ordinary_root_is_taken_and_nothing_is_made_until_a_project_needs_it(env, tmp_path, root):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    env.setenv("AIGO_STATE_DIR", str(tmp_path / root))
    assert state_root() == (tmp_path / root).resolve()
    assert not (tmp_path / root).resolve().exists() or root == "link"
    folder = state_dir("lab")
    assert folder == (tmp_path / root).resolve() / "lab"
    assert folder.is_dir() and stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert state_dir("lab") == folder  # again: its own folder is taken


def _refusal(path: Path, project: str, problem: str) -> str:
    return (
        f"the state directory {path} of project '{project}' {problem}; aigo-apply keeps a project's lock, journal "
        "and router files only in a folder this account alone controls: remove it (or ask its owner to) and run "
        "again, or set AIGO_STATE_DIR to a folder of your own (nothing was written)"
    )


def _name(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _other_accounts(folder: Path) -> None:
    os.chown(folder, OTHER, -1)


def _every_account(folder: Path) -> None:
    os.chmod(folder, 0o777)


def _sticky_every_account(folder: Path) -> None:
    os.chmod(folder, 0o1777)


def _shared_group(folder: Path) -> None:
    os.chown(folder, -1, OTHER)  # nogroup: the primary group of another account
    os.chmod(folder, 0o770)


def _symlink(folder: Path) -> None:
    folder.rmdir()
    (folder.parent / "elsewhere").mkdir()
    folder.symlink_to(folder.parent / "elsewhere")


def _dangling(folder: Path) -> None:
    folder.rmdir()
    folder.symlink_to(folder.parent / "missing")


def _file(folder: Path) -> None:
    folder.rmdir()
    folder.write_text("x")


FOREIGN = {
    "another-account": (_other_accounts, f"belongs to {_name(OTHER)}, not to you, {_name(os.geteuid())}: another account made it first"),
    "world-writable": (_every_account, "is writable by every account (mode 0777)"),
    "world-writable-sticky": (_sticky_every_account, "is writable by every account (mode 1777)"),
    "shared-group": (_shared_group, "is writable by the group nogroup (gid 65534) (mode 0770), which other accounts are in"),
    "symlink": (_symlink, None),
    "dangling-symlink": (_dangling, None),
}  # fmt: skip


@ROOT_ONLY
@pytest.mark.parametrize("case", FOREIGN)
def test_a_project_folder_not_this_accounts_alone_is_refused_and_left_as_it_is(env, tmp_path, case):
    root = tmp_path / "shared"
    folder = root / "lab"
    folder.mkdir(parents=True, mode=0o755)
    make, problem = FOREIGN[case]
    make(folder)
    if problem is None:
        problem = f"is a symbolic link (to {os.readlink(folder)}), not a folder"
    env.setenv("AIGO_STATE_DIR", str(root))
    before = os.lstat(folder)
    with pytest.raises(AigoError) as refused:
        state_dir("lab")
    assert str(refused.value) == _refusal(folder, "lab", problem)
    after = os.lstat(folder)
    assert (after.st_mode, after.st_uid, after.st_gid) == (before.st_mode, before.st_uid, before.st_gid)
    if folder.is_dir() and not folder.is_symlink():
        assert list(folder.iterdir()) == []  # nothing written in it
    if case == "symlink":
        assert list((root / "elsewhere").iterdir()) == []


@ROOT_ONLY
def test_a_folder_writable_by_this_accounts_own_private_group_is_taken(env, tmp_path):
    """Debian's and Fedora's umask 002 makes a user's folders group-writable by a group only they are in."""
    group = os.getegid()
    others = [p for p in pwd.getpwall() if p.pw_gid == group and p.pw_uid != os.geteuid()]
    if others:
        pytest.skip("this account's primary group is not its own here")
    folder = tmp_path / "lab"
    folder.mkdir()
    os.chown(folder, -1, group)
    os.chmod(folder, 0o775)
    env.setenv("AIGO_STATE_DIR", str(tmp_path))
    assert state_dir("lab") == folder


@pytest.mark.parametrize(
    "root, project", [("/var", "lib"), ("/var", "log"), ("/", "etc"), ("/", "home"), ("/var", "tmp")]
)
def test_a_project_folder_that_is_a_system_or_shared_folder_is_refused(env, root, project):
    with pytest.raises(AigoError) as refused:
        state_dir(project, Path(root))
    assert str(refused.value) == (
        f"the state directory {Path(root) / project} of project '{project}' is a system or shared folder, not one "
        f"of aigo-apply's; {FIX}"
    )


@ROOT_ONLY
def test_apply_and_destroy_stop_at_another_accounts_project_folder_with_the_error(tmp_path):
    project = f"state-refused-{uuid.uuid4().hex[:8]}"  # (never one a real run uses: the lock comes first)
    root = tmp_path / "shared"
    (root / project).mkdir(parents=True)
    os.chown(root / project, OTHER, OTHER)
    text = f"version: 1\nproject: {project}\nmodels:\n  a: {{source: {{repo: org/m}}, context_length: 4096}}\n"
    config = write_config(tmp_path, text)
    for command in (("apply", "-y"), ("destroy", "-y")):
        result = run_cli(*command, "-f", str(config), env={"AIGO_STATE_DIR": str(root)})
        assert result.returncode == 1, result.stdout + result.stderr
        assert (
            f"error: the state directory {root / project} of project '{project}' belongs to {_name(OTHER)}"
            in result.stderr
        )
        assert "Traceback" not in result.stderr
    assert list((root / project).iterdir()) == []


def test_a_command_stops_at_a_state_root_in_a_system_folder(tmp_path):
    config = write_config(
        tmp_path, "version: 1\nproject: lab\nmodels:\n  a: {source: {repo: org/m}, context_length: 4096}\n"
    )
    result = run_cli("plan", "-f", str(config), env={"AIGO_STATE_DIR": "/proc/self"})
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "error: the state directory /proc/self (which is /proc/" in result.stderr
    assert ") lies in the system folder /proc," in result.stderr and FIX in result.stderr
