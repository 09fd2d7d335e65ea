"""The folders of the engines' Unix sockets, made right before Docker creates a container that
mounts one (Docker would make a missing folder itself, as root, with modes anyone may enter).

    STATE/PROJECT/sockets/          0700, this tool's user: no other account may enter
    STATE/PROJECT/sockets/ALIAS/    02770, this user and group, setgid: the engine (root in its
                                    container) creates engine.sock here; the setgid bit gives the
                                    socket this folder's group, and the engine's umask 007 makes it
                                    group-writable, so exactly the router (this user and group)
                                    and this tool may connect

The router mounts the whole sockets folder read-only; each engine mounts only its own folder."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from aigo_apply.config.host_paths import path_text_problem
from aigo_apply.desired.engines.common import SOCKET_MOUNT
from aigo_apply.desired.types import ROUTER_SOCKETS, SOCKETS_FOLDER, ContainerSpec
from aigo_apply.errors import AigoError, UnsafeSetting

ROOT_MODE = 0o700
ENGINE_MODE = 0o2770


def prepare_socket_mounts(container: ContainerSpec) -> None:
    """Make (or put right) the socket folders `container` mounts, if any: only a plainly written
    absolute path in a folder named `sockets` (what the desired state makes) is ever created."""
    for mount in container.mounts:
        if mount.target not in (ROUTER_SOCKETS, SOCKET_MOUNT):
            continue
        path = Path(mount.source)
        root = path if mount.target == ROUTER_SOCKETS else path.parent
        if not path.is_absolute() or path_text_problem(mount.source) or root.name != SOCKETS_FOLDER:
            raise UnsafeSetting(
                f"refusing to create the socket folder {mount.source!r} of {container.name}: it is not one "
                "aigo-apply makes; nothing was created. Run `aigo-apply plan` again"
            )
        _folder(root, ROOT_MODE)
        if root != path:
            _folder(path, ENGINE_MODE)


def _folder(path: Path, mode: int) -> None:
    """A real folder of this user with exactly `mode`; refuse a symlink or someone else's folder
    (its modes would not be ours to keep)."""
    try:
        os.makedirs(path.parent, 0o700, exist_ok=True)  # the project's state folder (the lock made it already)
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise AigoError(f"cannot create the engine socket folder {path}: {exc.strerror or exc}") from None
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise AigoError(f"cannot read the engine socket folder {path}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise AigoError(
            f"the engine socket folder {path} is not a folder (a symlink or a file is in its place); "
            "remove it and apply again (nothing was created)"
        )
    if info.st_uid != os.getuid():
        raise AigoError(
            f"the engine socket folder {path} belongs to user {info.st_uid}, not to you ({os.getuid()}); "
            "remove it and apply again (nothing was created)"
        )
    if stat.S_IMODE(info.st_mode) != mode or info.st_gid != os.getgid():
        try:
            os.chown(path, -1, os.getgid())
            os.chmod(path, mode)
        except OSError as exc:
            raise AigoError(f"cannot set the modes of the engine socket folder {path}: {exc.strerror or exc}") from None
