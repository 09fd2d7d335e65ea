"""One apply or destroy at a time per project: an exclusive flock on a lock file in the state
directory. The kernel releases it when the holder dies, so a crash never leaves a stale lock;
the file also names the holder (pid, host, start time, command) for whoever is refused."""

from __future__ import annotations

import fcntl
import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

from aigo_apply.errors import AigoError, LockHeld


class ProjectLock:
    def __init__(self, directory: Path, project: str, command: str, timeout: float = 0.0):
        self.path = directory / "apply.lock"
        self.project, self.command, self.timeout = project, command, timeout
        self._fd: int | None = None

    def __enter__(self) -> ProjectLock:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:  # read-only or immutable file, a full disk, a folder in its place
            raise AigoError(
                f"cannot open the lock file {self.path}: {exc.strerror or exc}; make it writable (or remove it) "
                "or set AIGO_STATE_DIR to another folder (nothing was changed)"
            ) from None
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = _read_holder(fd)
                    os.close(fd)
                    waited = f" after waiting {self.timeout:g} s" if self.timeout else ""
                    raise LockHeld(
                        f"project '{self.project}' is locked by another aigo-apply run{waited}: "
                        f"{holder}. Wait for it to finish, or pass --lock-timeout SECONDS to wait"
                    ) from None
                time.sleep(0.1)
        info = {
            "pid": os.getpid(),
            "host": os.uname().nodename,
            "command": self.command,
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(info).encode(), 0)
        except OSError as exc:
            os.close(fd)
            raise AigoError(
                f"cannot write the lock file {self.path}: {exc.strerror or exc}; free space there or set "
                "AIGO_STATE_DIR to another folder (nothing was changed)"
            ) from None
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _read_holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except ValueError:
        info = {}
    if not info:
        return "holder unknown"
    return (
        f"`aigo-apply {info.get('command', '?')}` (pid {info.get('pid', '?')} on {info.get('host', '?')}, "
        f"started {info.get('started', '?')})"
    )
