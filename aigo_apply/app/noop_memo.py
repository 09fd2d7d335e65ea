"""The no-op memo: `plan` and `apply` with nothing to change answer in about the time Python takes
to start, by printing again what the last full run printed when nothing it was made from changed.

A full run that finds nothing to change writes a memo (app/noop_record.py): a digest of what the
plan was made from, the files and folders it depended on, and what it printed. The next run with
the same command line, before importing anything else, computes that digest afresh: the command
line, working folder, environment, user and terminals; this installation's own files; the bytes
of the config file and aigo.lock; the stat (and, for folders, the entries) of every path the plan
read or resolved; and the Docker engine's three answers, read now (docker_http.project_* leave out
only what changes by itself: uptime text, clocks, counters). When every part is equal the output
is printed again with the same exit code; any difference, anything unreadable, or any error leaves
the work to the full run. This module imports only the standard library and docker_http."""

from __future__ import annotations

import _thread  # not threading: its module set-up costs more start-up than one thread needs
import fcntl
import json
import os
import pwd
import stat
import sys
import time
from _blake2 import blake2b  # not hashlib: it loads OpenSSL first, a few ms of start-up

from aigo_apply import __version__
from aigo_apply.adapters import docker_http

TYPE_CHECKING = False  # typing costs start-up time this path has not got
if TYPE_CHECKING:
    from typing import Any

FORMAT = 1
MAX_MEMO = 4 * 1024 * 1024  # a memo larger than this was not written by this tool: ignored
MAX_LISTED = 65536  # entries of one folder signed one by one; beyond this (or 8 levels) the signature is PARTIAL
MAX_READ = 1024 * 1024  # a `read` dependency larger than this cannot be signed: PARTIAL
PARTIAL = "\x00partial"  # in a signature: it could not cover everything (no file name holds a NUL)
OFF = "AIGO_NO_MEMO"  # set (to anything but "" or 0): every plan and apply is made in full
_PLAN_FLAGS = {"--detailed-exitcode"}
_APPLY_FLAGS = {"-y", "--yes"}


def qualifies(argv: list[str]) -> bool:
    """Only the plain forms: `plan [-f FILE] [--detailed-exitcode]` and `apply [-f FILE] [-y]` (a
    saved plan, --output, --target, --replace and the rest always run in full)."""
    if not argv or argv[0] not in ("plan", "apply") or os.environ.get(OFF, "") not in ("", "0"):
        return False
    flags = _PLAN_FLAGS if argv[0] == "plan" else _APPLY_FLAGS
    rest, given = argv[1:], False
    while rest:
        word = rest.pop(0)
        if word in ("-f", "--file") and rest and not given:
            rest.pop(0)
            given = True
        elif word.startswith("--file=") and not given:
            given = True
        elif word not in flags:
            return False
    return True


def state_root(env: Any = None) -> str:
    """The tool's state root, as config/host_paths.state_root_of finds it (a test holds them equal)."""
    env = os.environ if env is None else env
    root = env.get("AIGO_STATE_DIR") or os.path.join(
        env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state"), "aigo-apply"
    )
    return os.path.expanduser(root)


def memo_path(argv: list[str], cwd: str | None = None) -> str:
    """One memo per working folder and command line, in `.memo/` of the state root (no project
    name can start with a dot)."""
    key = _blake(json.dumps([FORMAT, cwd or os.getcwd(), argv]).encode("utf-8", "surrogateescape"))
    return os.path.join(state_root(), ".memo", key[:32] + ".json")


def _blake(data: bytes) -> str:
    return blake2b(data, digest_size=32).hexdigest()


def _stat(path: str, follow: bool = True) -> list[Any]:
    try:
        st = os.stat(path, follow_symlinks=follow)
    except OSError as exc:
        return ["error", exc.errno]
    except ValueError:
        return ["error", "value"]
    return [st.st_mode, st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_uid, st.st_gid]


def sign(dep: list[str]) -> list[Any]:
    """What one dependency is now: [kind, path] -> its real path, lstat and stat; `read` adds a digest
    of the bytes (small files: the config, aigo.lock, a /proc setting); `list` adds each entry of
    the folder (name, lstat, and stat where it is a link); `tree` does so for every folder below."""
    kind, path = dep
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        real = None
    out: list[Any] = [kind, path, real, _stat(path, follow=False), _stat(path)]
    if kind == "read":
        out.append(_read_digest(path))
    elif kind in ("list", "tree"):
        out.append(_entries(path, kind == "tree", 0))
    return out


def _read_digest(path: str) -> str | None:
    """The digest of a regular file's bytes (or a /proc setting's); None for anything else, which
    is never opened: opening a FIFO would release its writer and lose what it sends."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, MAX_READ + 1)
        return _blake(data) if len(data) <= MAX_READ else PARTIAL
    except OSError:
        return None
    finally:
        os.close(fd)


def _entries(path: str, deep: bool, depth: int) -> Any:
    try:
        with os.scandir(path) as found:
            entries = sorted(found, key=lambda e: e.name)
    except (OSError, ValueError) as exc:
        return ["error", getattr(exc, "errno", None)]
    if len(entries) > MAX_LISTED:
        return [PARTIAL, len(entries)]
    out = []
    for entry in entries:
        full = os.path.join(path, entry.name)
        lst = _stat(full, follow=False)
        row = [entry.name, lst]
        if entry.is_symlink():
            row.append(_stat(full))
        elif deep and entry.is_dir(follow_symlinks=False):
            row.append(_entries(full, True, depth + 1) if depth < 8 else [PARTIAL, "depth"])
        out.append(row)
    return out


def code_stamp() -> list[Any]:
    """This installation: the version, the interpreter, and the size and time of every file of the
    package and its data (an edited checkout is a different program)."""
    package = os.path.dirname(os.path.abspath(__file__ + "/.."))
    places = [package] + [
        p
        for p in (
            os.path.join(package, "_data"),
            os.path.join(package, "..", "schemas"),
            os.path.join(package, "..", "templates"),
        )
        if os.path.isdir(p)
    ]
    files: list[Any] = []
    for place in places:
        for root, dirs, names in os.walk(place):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(names):
                if not name.endswith((".pyc", ".pyo")):
                    st = os.stat(os.path.join(root, name))
                    files.append([os.path.relpath(os.path.join(root, name), package), st.st_size, st.st_mtime_ns])
    libraries = [[p, _stat(p)] for p in sys.path if p.endswith("-packages")]  # pip (un)installs change them
    return [__version__, sys.version, sys.executable, files, libraries]


def context(argv: list[str]) -> list[Any]:
    """Who runs what, where: command line, working folder, environment, ids and terminals."""
    ttys: list[bool | None] = []
    for fd in (0, 1, 2):
        try:
            ttys.append(os.isatty(fd))
        except OSError:
            ttys.append(None)
    return [
        FORMAT,
        argv,
        os.getcwd(),
        sorted(os.environ.items()),
        [os.getuid(), os.geteuid(), os.getgid(), os.getegid(), sorted(os.getgroups())],
        ttys,
        _homes(),
    ]


def _homes() -> list[str]:
    """Every account's home as the account databases list it now (local files, LDAP or sssd alike):
    the mount policy holds each one private, and a new account moves that line."""
    try:
        return sorted({entry.pw_dir for entry in pwd.getpwall()})
    except (OSError, KeyError):
        return []


def projected(answers: dict[str, Any]) -> list[Any]:
    """The three answers as a plan can depend on them."""
    return [
        docker_http.project_containers(answers.get(docker_http.LIST_CONTAINERS[0])),
        docker_http.project_images(answers.get(docker_http.LIST_IMAGES[0])),
        docker_http.project_info(answers.get(docker_http.INFO[0])),
    ]


def digest(argv: list[str], deps: list[list[str]], answers: dict[str, Any]) -> str:
    """The digest of everything, read now."""
    return digest_of(context(argv), code_stamp(), [sign(d) for d in deps], answers)


def digest_of(who: list[Any], stamp: list[Any], signed: list[Any], answers: dict[str, Any]) -> str:
    """The digest of parts read before (the writer's: what its plan was made from)."""
    basis = [who, stamp, signed, projected(answers)]
    return _blake(json.dumps(basis, sort_keys=True, separators=(",", ":")).encode("utf-8", "surrogateescape"))


def read_answers() -> dict[str, Any] | None:
    """The three reads, now, over the bare socket; None where DOCKER_HOST is not one it speaks."""
    client = docker_http.for_host(os.environ.get("DOCKER_HOST"), os.environ, docker_http.API_VERSION, 10)
    if client is None:
        return None
    info: dict[str, Any] = {}
    done = _thread.allocate_lock()
    done.acquire()

    def fetch() -> None:  # /info takes the engine longest: asked on its own connection meanwhile
        try:
            info["found"] = client.get(*docker_http.INFO)
        except BaseException as exc:
            info["error"] = exc
        finally:
            done.release()

    _thread.start_new_thread(fetch, ())
    answers = {
        path: client.get(path, params) for path, params in (docker_http.LIST_CONTAINERS, docker_http.LIST_IMAGES)
    }
    done.acquire()
    if "error" in info:
        raise info["error"]
    return answers | {docker_http.INFO[0]: info["found"]}


def read_memo(path: str) -> dict[str, Any] | None:
    """The memo at `path` when it is a regular file of this user's, writable by no one else, and
    well formed; else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022 or st.st_size > MAX_MEMO:
            return None
        memo = json.loads(os.read(fd, MAX_MEMO + 1))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    ok = (
        isinstance(memo, dict)
        and memo.get("format") == FORMAT
        and isinstance(memo.get("digest"), str)
        and isinstance(memo.get("stdout"), str)
        and isinstance(memo.get("stderr"), str)
        and type(memo.get("code")) is int
        and isinstance(memo.get("deps"), list)
        and all(
            isinstance(d, list) and len(d) == 2 and d[0] in ("stat", "read", "list", "tree") and isinstance(d[1], str)
            for d in memo["deps"]
        )
        and (memo.get("lock") is None or isinstance(memo.get("lock"), str))
    )
    return memo if ok else None


def replay(argv: list[str]) -> int | None:
    """The exit code after printing the memo's output again, or None (nothing printed) when the
    full run must answer. Never raises."""
    try:
        if not qualifies(list(argv)):
            return None
        memo = read_memo(memo_path(argv))
        if memo is None:
            return None
        with _apply_lock(memo.get("lock")) as free:
            if not free:
                return None  # an apply is running: the full run waits for it
            answers = read_answers()
            if answers is None or digest(argv, memo["deps"], answers) != memo["digest"]:
                return None
    except Exception:  # the memo only ever saves time: any surprise means the full run
        return None
    try:
        sys.stdout.write(memo["stdout"])
        sys.stderr.write(memo["stderr"])
    except (OSError, ValueError):  # a closed pipe (`| head`): as the CLI, nothing more to say
        pass
    return int(memo["code"])


class _apply_lock:
    """The project's apply lock, taken as apply/project_lock.ProjectLock takes it (read-write, without
    waiting, naming the holder, emptied on release) for as long as the digest is made: an apply that
    holds it is changing the machine right now, and a lock file the full run could not take or
    write (read-only, immutable, a full disk) must give the full run's error, not the memo's answer."""

    def __init__(self, path: str | None):
        self.path = path
        self.fd: int | None = None

    def __enter__(self) -> bool:
        if self.path is None:
            return True
        try:
            self.fd = fd = os.open(self.path, os.O_RDWR | os.O_NOFOLLOW)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            holder = {
                "pid": os.getpid(),
                "host": os.uname().nodename,
                "command": "apply",
                "started": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
            }
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(holder).encode(), 0)
        except OSError:
            return False
        return True

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            try:
                os.ftruncate(self.fd, 0)
            except OSError:
                pass
            os.close(self.fd)
