"""The one way aigo-apply writes a file a user sees: `init`, `fmt`, `image tag`, `import --write`,
`schema --write`, `plan --out`, `export -o`, `aigo.lock` and the model store's download marker.

Why one module: a command may run as root in a folder another account can write, and the file may be
one the user is editing at that moment. So every write here
- never goes through a symbolic link at the target (a dangling one included: it would create a file
  wherever the link points), and never into a FIFO, socket, device or folder (nor blocks opening one:
  the target is never opened for writing, and it is read by aigo_apply/safe_read.py's rules, which
  use O_NONBLOCK and O_NOFOLLOW);
- writes a temporary file in the same folder and renames it over the target, so a reader sees the old
  file or the new one, never half of one;
- keeps an existing file's owner, group and mode (a root-run `image tag` leaves a user's config
  theirs); when this account cannot give the new file that owner, nothing is written;
- is refused, with nothing written, when the file's bytes are no longer the ones the command read
  (`expect`): an edit made while `fmt` or `image tag` ran is never silently dropped. `expect=None`
  means the file must not exist (and the new file is linked in place, which fails if one appeared).

Each refusal is one AigoError (or the caller's subclass) naming the file and what to do. The router's
own files are not written here: platforms/docker/router_deploy.py writes each configuration into a fresh generation
folder it creates itself and swaps a `live` link, a scheme of another kind.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Final

from aigo_apply.errors import AigoError
from aigo_apply.safe_read import file_kind, read_checked, shown


class _Any:
    def __repr__(self) -> str:
        return "ANY"


ANY: Final = _Any()  # `expect=ANY`: replace whatever regular file is there (a file the command did not read)
MAX_READ = 64 * 1024 * 1024  # what read_current() reads at most: every file written here is far smaller

_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)

Expect = bytes | None | _Any


def _refuse_kind(path: Path, display: str, info: os.stat_result, error: type[AigoError]) -> None:
    """A symlink or anything but a regular file at the target: the refusal, saying what to do."""
    if stat.S_ISREG(info.st_mode):
        return
    if stat.S_ISLNK(info.st_mode):
        try:
            points = f" (it points to {shown(os.readlink(path))})"
        except OSError:
            points = ""
        raise error(
            f"{display}: is a symbolic link{points}; aigo-apply never writes through one: name the file "
            "itself, or remove the link; nothing was written"
        )
    raise error(
        f"{display}: is {file_kind(info.st_mode)}, not a regular file; aigo-apply writes regular files only: "
        "choose a file's path; nothing was written"
    )


def _lstat(path: Path, display: str, error: type[AigoError]) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise error(f"{display}: cannot be checked: {getattr(exc, 'strerror', None) or exc}") from None


def read_current(path: Path, display: str, error: type[AigoError] = AigoError, limit: int = MAX_READ) -> bytes | None:
    """The bytes of the regular file at `path`, None when nothing is there; a symlink, FIFO, device or
    folder is refused without waiting (O_NONBLOCK, O_NOFOLLOW). Pass the result to write() as `expect`."""
    try:
        data = read_checked(path, lambda info: _refuse_kind(path, display, info, error), limit)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        if getattr(exc, "errno", None) == errno.ELOOP:  # became a symlink since the lstat
            raise error(f"{display}: became a symbolic link while it was read; nothing was written") from None
        raise error(f"{display}: cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    if len(data) > limit:
        raise error(f"{display}: is larger than {limit} bytes, more than aigo-apply reads from it; check the path")
    return data


def write(
    path: Path,
    content: str | bytes,
    display: str | None = None,
    *,
    expect: Expect,
    new_mode: int = 0o666,
    check: Callable[[str], None] | None = None,
    error: type[AigoError] = AigoError,
    what: str = "file",
) -> None:
    """Put `content` at `path` the safe way (see the module's docstring). `expect`: the bytes the
    command read (read_current), None (the file must not exist yet) or ANY. `new_mode`: a new file's
    mode, less the umask. `check(temporary path)` may validate the written file and raise. `what`
    names the file in an I/O error ("the plan file")."""
    display = display or shown(path)
    data = content.encode("utf-8") if isinstance(content, str) else content
    before = _lstat(path, display, error)
    _compare(path, display, before, expect, error)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, _TEMP_FLAGS, 0o600 if before is not None else new_mode & 0o777)
    except OSError as exc:
        raise error(f"{display}: cannot write the {what}: {exc.strerror or exc}; nothing was written") from None
    try:
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                if before is not None:
                    _keep_owner_and_mode(f.fileno(), display, before, error)
                os.fsync(f.fileno())
            if check is not None:
                check(str(tmp))
            _compare(path, display, _lstat(path, display, error), expect, error)  # last look, just before
            _put_in_place(tmp, path, display, expect, error)
        except OSError as exc:
            raise error(f"{display}: cannot write the {what}: {exc.strerror or exc}; nothing was written") from None
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        except OSError:
            pass  # the folder became unwritable: nothing more can be done about a temporary file
    _sync_folder(path.parent)


def unchanged(path: Path, display: str, expect: Expect, error: type[AigoError] = AigoError) -> None:
    """Raise, naming the file, when it is no longer what read_current() returned (`expect`)."""
    _compare(path, display, _lstat(path, display, error), expect, error)


def _compare(path: Path, display: str, info: os.stat_result | None, expect: Expect, error: type[AigoError]) -> None:
    """The target is still what the command read: its kind, and (unless ANY) its bytes or its absence."""
    if info is not None:
        _refuse_kind(path, display, info, error)
    if isinstance(expect, _Any):
        return
    if expect is None:
        if info is not None:
            raise error(
                f"{display}: appeared while aigo-apply wrote it; nothing was written: look at it, then run again"
            ) from None
        return
    if info is None:
        raise error(f"{display}: was removed since aigo-apply read it; nothing was written: run the command again")
    if info.st_size != len(expect) or read_current(path, display, error, limit=len(expect)) != expect:
        raise error(
            f"{display}: changed since aigo-apply read it (an editor or another program wrote it); nothing "
            "was written, so that change is kept: run the command again"
        )


def _keep_owner_and_mode(fd: int, display: str, before: os.stat_result, error: type[AigoError]) -> None:
    now = os.fstat(fd)
    if (now.st_uid, now.st_gid) != (before.st_uid, before.st_gid):
        try:
            os.fchown(fd, before.st_uid, before.st_gid)
        except PermissionError:
            raise error(
                f"{display}: belongs to uid {before.st_uid} (group {before.st_gid}), and this account (uid "
                f"{os.geteuid()}) cannot give the rewritten file that owner; nothing was written: run the "
                "command as the file's owner (or as root)"
            ) from None
    os.fchmod(fd, stat.S_IMODE(before.st_mode) & 0o777)  # after chown, which may clear bits


def _put_in_place(tmp: Path, path: Path, display: str, expect: Expect, error: type[AigoError]) -> None:
    if expect is not None:
        os.rename(tmp, path)  # replaces a symlink or FIFO that appeared since: never writes through it
        return
    try:  # a new file: link() fails when anything (even a dangling symlink) took the name meanwhile
        os.link(tmp, path, follow_symlinks=False)
    except FileExistsError:
        raise error(
            f"{display}: appeared while aigo-apply wrote it; nothing was written: look at it, then run again"
        ) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.ENOSYS):
            raise
        if os.path.lexists(path):  # a file system without hard links: check, then rename
            raise error(
                f"{display}: appeared while aigo-apply wrote it; nothing was written: look at it, then run again"
            ) from None
        os.rename(tmp, path)


def _sync_folder(folder: Path) -> None:
    """The rename itself survives a crash once the folder is synced (best effort: not every file system can)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
