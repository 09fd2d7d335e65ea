"""The files by which a running apply tells the router to hold something (a model's requests while its
engine is replaced, or a swap group's swaps while one of its models starts), kept alive by a lease.

A hold file reads `aigo-apply pid P until T lease L` (Unix seconds): T bounds the hold whatever
happens; L is renewed every RENEW_S by the apply that holds it, while it holds it. An apply that is
killed (SIGKILL, a power cut of the terminal's host) cannot remove its files; its lease then lapses
within LEASE_S, and the router's Lua stops waiting for it: a model's held requests go on as soon as
its engine answers /health (models.lua), a swap group swaps again (swap.lua). Without the lease such
a hold lasted until T: the longest start plus margins, about 40 minutes, every request waiting its
router.hold_seconds and then failing while the new engine served.

Each file is replaced whole (a temporary file renamed over it), so the router never reads half of one."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

LEASE_S = 15  # a hold whose apply has not renewed it for this long is no one's
RENEW_S = 3.0


def hold_text(until: float, lease: float, pid: int | None = None) -> str:
    return f"aigo-apply pid {os.getpid() if pid is None else pid} until {int(until)} lease {int(lease)}\n"


def write_hold(path: Path, until: float, now: float | None = None) -> None:
    """Write (or renew) one hold file; OSError as the system says it."""
    moment = time.time() if now is None else now
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(hold_text(until, moment + LEASE_S), encoding="utf-8")
    os.replace(tmp, path)


def lapsed(text: str, now: float) -> bool:
    """Whether a hold file's text holds no more: past its bound, past its lease, or unreadable."""
    words = text.split()
    try:
        until = int(words[words.index("until") + 1])
        lease = int(words[words.index("lease") + 1]) if "lease" in words else until
    except (ValueError, IndexError):
        return True
    return now >= min(until, lease)


def clear_lapsed(folder: Path, now: float | None = None) -> list[str]:
    """Remove the hold files in `folder` no apply keeps any more (a killed one's); the names removed."""
    moment = time.time() if now is None else now
    removed = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    for name in names:
        path = folder / name
        try:
            if path.is_symlink() or not path.is_file() or name.startswith("."):
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read(256)
            if lapsed(text, moment):
                path.unlink()
                removed.append(name)
        except OSError:
            continue
    return removed


class Leases:
    """The holds one apply keeps: written on `hold`, renewed by one daemon thread while any is kept,
    removed on `release` (a hold whose file is already gone is not written again)."""

    def __init__(self, renew_s: float = RENEW_S):
        self._held: dict[Path, float] = {}  # path -> until
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._renew_s = renew_s
        self._thread: threading.Thread | None = None

    def hold(self, path: Path, seconds: float) -> None:
        until = time.time() + seconds
        path.parent.mkdir(parents=True, exist_ok=True)
        write_hold(path, until)
        with self._lock:
            self._held[path] = until
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._renew, daemon=True, name="aigo-hold-lease")
                self._thread.start()

    def release(self, path: Path) -> None:
        with self._lock:
            self._held.pop(path, None)
        try:
            path.unlink()
        except FileNotFoundError:
            pass

    def held(self) -> list[Path]:
        with self._lock:
            return sorted(self._held)

    def _renew(self) -> None:
        while True:
            self._wake.wait(self._renew_s)
            with self._lock:
                if not self._held:
                    self._thread = None
                    return
                for path, until in list(self._held.items()):
                    if not path.exists():  # released by someone else (a stale-hold sweep): stays released
                        del self._held[path]
                        continue
                    try:
                        write_hold(path, until)
                    except OSError:
                        pass  # the next turn tries again; the lease lapsing only ends the hold early


LEASES = Leases()  # the process's one keeper: every hold of one apply renews together
