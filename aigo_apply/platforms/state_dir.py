"""The per-project state directory (lock file, journal, the router's files): $AIGO_STATE_DIR, else
$XDG_STATE_HOME/aigo-apply, else ~/.local/state/aigo-apply; one folder per project.
It holds no desired or observed state: the labels on the containers are the state.

Refused before anything is written: a state root that is `/` or lies in a system folder once its links
are resolved (`/etc`, `/proc/self`, `/usr`, `/var/lib/docker`), that is a shared folder itself (`/var/lib`,
`/opt`, `/srv`, `/home`, `/tmp`) or not a folder, or that is there already and holds what aigo-apply did
not make (a service's folder, `/var/lib/dpkg`, `/opt/containerd`; your own folder as an account other
than root is yours to choose); and a project folder that is there already but is not this account's
alone (a symlink, another account's, writable by others) or not one aigo-apply made. aigo-apply marks
each project folder it makes (MARKER); a folder without the mark is taken only when it holds nothing
but what aigo-apply writes there (an older aigo-apply's: marked then).

One state root: `state_root` is its one rule (observe/host_paths.state_root_of as written, resolved
here), read once per run into the HostContext (platforms/host_context.current_host); the platforms, the
watcher and the router's folder are given that root, so one run never sees two."""

from __future__ import annotations

import grp
import os
import pwd
import stat
from pathlib import Path

from aigo_apply.config.host_paths import shared_folder, short, system_folder
from aigo_apply.errors import AigoError
from aigo_apply.observe.host_paths import resolve_or_why, state_root_of

FAILED_STARTS = "failed-starts"  # in a project's state folder: platforms/docker/failed_starts.py
STARTS = "starts"  # in a project's state folder: platforms/docker/start_records.py
MARKER = ".aigo-apply-state"  # written in each project folder aigo-apply makes (or takes over)
# Everything aigo-apply writes in a project folder: the lock (platforms/project_lock.py), the journal
# (platforms/journal.py), the router's files (platforms/docker/router_deploy.py), the engines' sockets (desired/types.py
# SOCKETS_FOLDER), failed starts, start records, a cluster's files (platforms/kubernetes/platform.py), the mark.
OURS = frozenset({"apply.lock", "journal.jsonl", "router", "sockets", FAILED_STARTS, STARTS, "kubernetes", MARKER})
MAX_LISTED = 1000  # entries of a state root looked at: more, and it is nobody's state root


def state_root() -> Path:
    """The folder that holds one state folder per project (observe/host_paths.state_root_of, the
    one definition the private-places policy also protects), resolved; one that cannot be
    resolved (a symlink loop, a name too long), or that is `/` or lies in a system folder once
    resolved (`/etc`, `/proc/self`, `/usr/lib`, `/var/lib/docker`: config/host_paths.SYSTEM_DIRS), is an
    error that says how to choose another, before anything is written."""
    root = Path(os.path.abspath(state_root_of()))
    real = resolve_or_why(root)
    if isinstance(real, str):
        raise AigoError(
            f"the state directory {short(root)} cannot be resolved: {real}; set AIGO_STATE_DIR to a folder you can write"
        )
    system = Path("/") if real == Path("/") else system_folder(real)
    shown = short(root) + ("" if real == root else f" (which is {short(real)})")
    where = None
    if system is not None:
        where = "is the root of the file system" if real == Path("/") else f"lies in the system folder {system}"
    elif shared_folder(real):
        where = "is a shared folder that holds other programs' and accounts' folders"
    else:
        where = _foreign_root(real)
    if where is not None:
        raise AigoError(
            f"the state directory {shown} {where}, where aigo-apply would keep each project's lock, journal and "
            f"router files; {_chosen_by()} a folder of your own, such as ~/.local/state/aigo-apply (nothing was written)"
        )
    return real


def _foreign_root(root: Path) -> str | None:
    """Why the state root `root` (resolved) is not one aigo-apply may keep projects in, or None: a
    file, or a folder there already that holds something other than aigo-apply's project folders (a
    service's: /var/lib/dpkg), unless it is the folder of the account running (not root's: root owns
    every service's folder too)."""
    try:
        info = os.stat(root)
    except FileNotFoundError:
        return None  # made with the first project's folder
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a folder"
    if info.st_uid == os.geteuid() != 0:
        return None  # your own folder, as an account that owns no service's
    try:
        with os.scandir(root) as entries:
            names = [entry.name for _, entry in zip(range(MAX_LISTED + 1), entries, strict=False)]
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if len(names) > MAX_LISTED:
        return f"holds more than {MAX_LISTED} entries, which aigo-apply did not make (another program's folder)"
    other = next((name for name in sorted(names) if _foreign_entry(root / name)), None)
    if other is not None:
        return f"holds {short(other)!r}, which aigo-apply did not make (another program's folder)"
    return None


def _chosen_by() -> str:
    """What to change: the setting that chose the state root (observe/host_paths.state_root_of)."""
    if os.environ.get("AIGO_STATE_DIR"):
        return "set AIGO_STATE_DIR to"
    if os.environ.get("XDG_STATE_HOME"):
        return "set AIGO_STATE_DIR (it is now XDG_STATE_HOME/aigo-apply) to"
    return "set AIGO_STATE_DIR (it is now under your home folder, HOME) to"


def state_path(project: str, root: Path | None = None) -> Path:
    """Where the project's state folder is (not created), below `root` (the run's; None: read it now)."""
    return (state_root() if root is None else root) / project


def state_dir(project: str, root: Path | None = None) -> Path:
    """The project's state folder, created when missing (mode 0700: only this account enters it). One
    that is there already must be one this account made: a real folder (not a symlink), owned by this
    account, that no other account may write to (neither world- nor group-writable, unless the group is
    this account's own private group); else it is refused before anything is written in it, as is a
    project folder that is itself a system or shared folder (a state root of /var and a project `lib`)."""
    path = state_path(project, root)
    if path == Path("/") or system_folder(path) is not None or shared_folder(path) or shared_folder(path.parent):
        raise AigoError(
            f"the state directory {short(path)} of project '{project}' is a system or shared folder, not one of "
            "aigo-apply's; set AIGO_STATE_DIR to a folder of your own, such as ~/.local/state/aigo-apply "
            "(nothing was written)"
        )
    made = False
    try:
        os.makedirs(path.parent, exist_ok=True)
        os.mkdir(path, 0o700)
        made = True
    except FileExistsError:
        pass
    except OSError as exc:
        raise AigoError(
            f"cannot create the state directory {path}: {exc.strerror or exc}; set AIGO_STATE_DIR to a writable folder"
        ) from None
    if problem := None if made else (_not_ours(path) or _not_made_by_us(path)):
        raise AigoError(
            f"the state directory {short(path)} of project '{project}' {problem}; aigo-apply keeps a project's "
            "lock, journal and router files only in a folder this account alone controls: remove it (or ask its "
            "owner to) and run again, or set AIGO_STATE_DIR to a folder of your own (nothing was written)"
        )
    _mark(path, project)
    return path


def _foreign_entry(path: Path) -> bool:
    """Whether an entry of a state root is what aigo-apply did not make: anything but a project
    folder (a link is left to the project's own check, which refuses it when the project is used)."""
    try:
        return not stat.S_ISLNK(os.lstat(path).st_mode) and _not_made_by_us(path) is not None
    except OSError:
        return True


def _not_made_by_us(path: Path) -> str | None:
    """Why the existing `path` is not a project folder aigo-apply made, or None: a real folder with
    aigo-apply's mark, or one holding nothing but what aigo-apply writes there (an older one's), or
    nothing at all (made ready for a project)."""
    try:
        info = os.lstat(path)
        if not stat.S_ISDIR(info.st_mode):
            return "is not a folder"
        if stat.S_ISREG(os.lstat(path / MARKER).st_mode):
            return None
    except FileNotFoundError:
        pass
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    try:
        with os.scandir(path) as entries:
            names = [entry.name for _, entry in zip(range(len(OURS) + 1), entries, strict=False)]
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    other = sorted(set(names) - OURS)
    if other or len(names) > len(OURS):
        shown = short(other[0]) if other else "more entries"
        return f"holds {shown!r}, which aigo-apply does not write: it is not a state folder aigo-apply made"
    return None


def _mark(path: Path, project: str) -> None:
    """aigo-apply's mark in the project folder `path` (its own now), written once, never through a link."""
    try:
        fd = os.open(path / MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return
    except OSError as exc:
        raise AigoError(
            f"cannot write in the state directory {path}: {exc.strerror or exc}; set AIGO_STATE_DIR to a writable folder"
        ) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(f"aigo-apply's state folder of project {project}: its lock, journal and router files\n")
    except OSError as exc:  # a full disk: no half-written mark is left to be taken for a whole one
        (path / MARKER).unlink(missing_ok=True)
        raise AigoError(
            f"cannot write in the state directory {path}: {exc.strerror or exc}; free space there or set "
            "AIGO_STATE_DIR to a writable folder"
        ) from None


def _not_ours(path: Path) -> str | None:
    """Why the existing folder `path` is not one only this account controls, or None."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISLNK(info.st_mode):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        return f"is a symbolic link (to {short(target)}), not a folder"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a folder"
    me = os.geteuid()
    if info.st_uid != me:
        return f"belongs to {_account(info.st_uid)}, not to you, {_account(me)}: another account made it first"
    mode = stat.S_IMODE(info.st_mode)
    if mode & stat.S_IWOTH:
        return f"is writable by every account (mode {mode:04o})"
    if mode & stat.S_IWGRP and not _own_group(info.st_gid, me):
        return f"is writable by the group {_group(info.st_gid)} (mode {mode:04o}), which other accounts are in"
    return None


def _account(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _group(gid: int) -> str:
    try:
        return f"{grp.getgrgid(gid).gr_name} (gid {gid})"
    except KeyError:
        return f"gid {gid}"


def _own_group(gid: int, uid: int) -> bool:
    """Whether `gid` is `uid`'s private group (Debian's and Fedora's default, where umask 002 makes
    folders group-writable): no other account is in it, as a member or by its primary group."""
    try:
        name, members = pwd.getpwuid(uid).pw_name, grp.getgrgid(gid).gr_mem
    except KeyError:
        return False
    return not set(members) - {name} and all(p.pw_uid == uid or p.pw_gid != gid for p in pwd.getpwall())
