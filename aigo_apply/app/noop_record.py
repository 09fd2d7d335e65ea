"""Writes the no-op memo (app/noop_memo.py) after a full `plan` or `apply` that found nothing to
change: the files and folders the plan depended on, the digest of everything it was made from,
and what it printed. One recording per process, begun by the CLI for the command lines the memo
serves (noop_memo.qualifies); without one every call here does nothing (tests, benchmarks).

No memo is written for a plan whose answer is not on this machine alone: one that asked the
Hugging Face Hub (a download missing, aigo.lock naming a branch or tag) or NVML (a model wants a
GPU: memory in use moves by itself), one with changes or blockers, or one during which a file it
depends on changed (the signatures taken after loading and after planning must be equal), or a
mount path that no longer resolves to where the plan mounts it."""

from __future__ import annotations

import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from aigo_apply.app import noop_memo
from aigo_apply.app.host_context import current_host
from aigo_apply.apply.secrets import hub_token_files
from aigo_apply.apply.state_dir import state_path
from aigo_apply.config.host_paths import expand_home, listed_homes
from aigo_apply.config.mount_rules import mount_places
from aigo_apply.desired.model_store import downloads, is_commit, is_complete, read_markers
from aigo_apply.desired.types import DesiredState, SecretRef
from aigo_apply.plan.lockfile import path_for

# host files the checks read: the account databases (private homes), /home, the lowest port a user may bind
HOST_DEPS = [["stat", "/etc/passwd"], ["stat", "/etc/group"], ["stat", "/home"]]
HOST_DEPS += [["read", "/proc/sys/net/ipv4/ip_unprivileged_port_start"]]


class Recording:
    def __init__(self, argv: list[str]):
        self.argv = argv
        self.who, self.stamp = noop_memo.context(argv), noop_memo.code_stamp()  # as the run starts
        self.out, self.err = io.StringIO(), io.StringIO()
        self.deps: list[list[str]] | None = None
        self.signed: list[Any] | None = None
        self.written: list[str] = []
        self.ready: dict[str, Any] | None = None


_current: Recording | None = None


def begin(argv: list[str]) -> Recording | None:
    """Start recording this process's run when its command line is one the memo serves."""
    global _current
    _current = Recording(list(argv)) if noop_memo.qualifies(list(argv)) else None
    return _current


def loaded(config: Any, desired: DesiredState) -> None:
    """Right after the file is loaded: what the plan will depend on, signed now."""
    if _current is None:
        return
    deps, written = dependencies(config, desired)
    _current.deps, _current.written = deps, written
    _current.signed = [noop_memo.sign(d) for d in deps]


def watch(runtime: Any) -> Any:
    """The runtime the plan reads through keeps its answers while this run is being recorded."""
    if _current is not None and hasattr(runtime, "answers"):
        runtime.answers = {}
    return runtime


def planned(desired: DesiredState, plan: Any, runtime: Any, has_lock: bool, lock_file: str | None = None) -> None:
    """After a plan with nothing to change (and, for apply, aigo.lock written): the memo's content,
    when nothing it depends on moved while the plan was made."""
    rec = _current
    if rec is None or rec.deps is None or plan.has_changes or plan.blockers:
        return
    if volatile(desired, has_lock) or not _answers_agree(runtime):
        return
    if [noop_memo.sign(d) for d in rec.deps] != rec.signed or not _mounts_hold(rec.written, desired):
        return
    if not signed_whole(rec.signed):
        return
    answers = {path: found[0] for path, found in runtime.answers.items()}
    rec.ready = {"deps": rec.deps, "signed": rec.signed, "answers": answers, "lock": lock_file}


def finish(code: int) -> None:
    """At the end of the command: the memo, written when the run made one ready and exited 0."""
    global _current
    rec, _current = _current, None
    if rec is None or rec.ready is None or code != 0:
        return
    memo = {
        "format": noop_memo.FORMAT,
        "digest": noop_memo.digest_of(rec.who, rec.stamp, rec.ready["signed"], rec.ready["answers"]),
        "deps": rec.ready["deps"],
        "lock": rec.ready["lock"],
        "stdout": rec.out.getvalue(),
        "stderr": rec.err.getvalue(),
        "code": code,
    }
    _write(noop_memo.memo_path(rec.argv), json.dumps(memo))


def volatile(desired: DesiredState, has_lock: bool) -> bool:
    """Whether the plan asked something outside this machine's files and Docker: NVML (a model
    wants a GPU) or the Hub (a download not complete here, or aigo.lock with a branch or tag)."""
    if any(m.spec.get("gpus") != "none" for m in desired.models.values()):
        return True
    markers = read_markers(desired.specs())
    for d in downloads(desired.specs()):
        if not is_complete(markers.get(d["dest"]) or {}, d["file"]):
            return True
        if has_lock and not is_commit(d["revision"]):
            return True
    return False


def _answers_agree(runtime: Any) -> bool:
    """The plan saw one state of the engine: each read answered alike every time it was made."""
    answers = getattr(runtime, "answers", None)
    if not isinstance(answers, dict) or len(answers) != 3:
        return False
    for path, found in answers.items():
        shown = [json.dumps(noop_memo.projected({path: f}), sort_keys=True) for f in found]
        if len(set(shown)) != 1:
            return False
    return True


def dependencies(config: Any, desired: DesiredState) -> tuple[list[list[str]], list[str]]:
    """[kind, path] of everything the plan reads or resolves, and the mount paths as written."""
    deps: dict[str, str] = {}
    rank = {"stat": 0, "read": 1, "list": 2, "tree": 3}  # a path named twice is signed the fuller way

    def add(kind: str, path: Any) -> None:
        """`path` and every folder above it (whose owner and mode the store and secret checks read)."""
        text = os.path.abspath(str(path))
        above = [os.path.dirname(text)]
        while above[-1] != os.path.dirname(above[-1]):
            above.append(os.path.dirname(above[-1]))
        for each, how in [(text, kind)] + [(a, "stat") for a in above]:
            if rank[how] >= rank.get(deps.get(each, "stat"), 0):
                deps[each] = how

    add("read", Path(config.file).expanduser())
    add("read", path_for(desired.file))
    written = []
    for _, raw in mount_places(config.data, config.data.get("models") or {}):  # as config/mount_rules reads them
        path = config.base_dir / expand_home(raw, Path.home())
        written.append(os.path.abspath(path))
        add("list", path)
    for model in desired.models.values():
        for mount in model.container.mounts:
            if mount.source.startswith("/"):
                add("list", mount.source)
        if isinstance(model.spec.get("model_dir"), str):
            add("list", model.spec["model_dir"])
        for _, value in model.container.env:
            if isinstance(value, SecretRef) and value.kind == "from_file":
                add("stat", os.path.expanduser(value.target))
    keys = desired.router.spec.get("api_keys")
    if isinstance(keys, dict) and isinstance(keys.get("from_file"), str):
        add("stat", os.path.expanduser(keys["from_file"]))
    if desired.models_dir is not None:
        add("stat", desired.models_dir)
    host = current_host()  # the places the mount policy judges paths against: a link retargeted moves them
    for place in (host.home, host.state_root, host.models_dir, host.hf_home, *hub_token_files(), *account_homes()):
        if place is not None:
            add("stat", place)
    add("tree", state_path(desired.project) / "router")
    return [[kind, path] for path, kind in sorted(deps.items())] + HOST_DEPS, written


def account_homes() -> list[str]:
    """Every home the mount policy holds private, as written (a link made there later is followed
    by the signature): the sources config/host_paths.known_homes reads."""
    return [home for home in listed_homes() if home.startswith("/")]


def signed_whole(signed: list[Any]) -> bool:
    """Every dependency could be signed in full: a config or lock that is not a regular file (a FIFO
    gives other bytes on each read), or a folder too large or deep, leaves no memo."""
    for sig in signed:
        if sig[0] == "read" and sig[4][0] != "error" and sig[5] is None:
            return False
    return json.dumps(noop_memo.PARTIAL)[1:-1] not in json.dumps(signed)


def _mounts_hold(written: list[str], desired: DesiredState) -> bool:
    """Each mount path as written still resolves to a folder the plan mounts or reads."""
    places = {m.source for model in desired.models.values() for m in model.container.mounts}
    places |= {str(model.spec.get("model_dir")) for model in desired.models.values()}
    if desired.models_dir is not None:
        places.add(str(desired.models_dir))
    draft = [
        str(d["path"])
        for model in desired.models.values()
        if isinstance(d := model.spec.get("vllm", {}).get("speculative", {}).get("draft"), dict) and "path" in d
    ]
    places |= set(draft)
    return all(os.path.realpath(w) in places for w in written)


KEEP = 256  # memos kept per state root (one per folder and command line): the oldest go first


def _write(path: str, text: str) -> None:
    """Atomically, private to this user; a memo that cannot be written only costs time next run.
    The folder keeps the KEEP most recent memos (CI jobs in fresh folders would otherwise pile up)."""
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        _prune(folder)
        fd, tmp = tempfile.mkstemp(prefix=".memo.", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write(text)
            os.replace(tmp, path)
        except OSError:
            Path(tmp).unlink(missing_ok=True)
    except OSError:
        pass


def _prune(folder: str) -> None:
    try:
        with os.scandir(folder) as found:
            memos = [(e.stat(follow_symlinks=False).st_mtime_ns, e.path) for e in found if e.name.endswith(".json")]
    except OSError:
        return
    for _, old in sorted(memos)[: max(0, len(memos) - KEEP + 1)]:
        try:
            os.unlink(old)
        except OSError:
            pass


class Tee(io.TextIOBase):
    """A standard stream that also keeps what is written to it (for the memo)."""

    def __init__(self, stream: Any, copy: io.StringIO):
        self._stream, self._copy = stream, copy

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError("write() argument must be str")
        self._copy.write(text)
        return self._stream.write(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._stream.encoding

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return self._stream.errors

    @property
    def buffer(self) -> Any:
        raise AttributeError("buffer")  # bytes written under the text layer would escape the copy
