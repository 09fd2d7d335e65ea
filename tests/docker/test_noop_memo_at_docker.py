"""On the real engine: a no-op `plan` or `apply` is answered from its memo (app/noop_memo.py) only
while nothing it was made from has changed. To see which run answered, the memo's recorded output
is replaced by a marker: the marker printed means the memo answered; a full run prints the plan
(and writes a fresh memo). Each input class is changed in turn: the engine's containers, another
container, the model folder, a mount path's symlink, the config, aigo.lock, the router's files,
the environment, and a memo that is not the user's own or is writable by others."""

from __future__ import annotations

import json
import os

import pytest

from aigo_apply.app import noop_memo

from helpers import stub_project
from helpers.cli import run_cli
from helpers.configs import free_port, model_folder
from helpers.paths import ROOT

MARK = "ANSWERED FROM THE MEMO\n"


def _memo(args):
    return noop_memo.memo_path(list(args), cwd=str(ROOT))


def _mark(args) -> None:
    """Replace the recorded output with MARK (the file stays the user's own, mode 600)."""
    path = _memo(args)
    memo = json.loads(open(path).read())
    memo["stdout"] = MARK
    with open(path, "w") as f:
        f.write(json.dumps(memo))


def _answered_by_memo(args, env=None) -> bool:
    done = run_cli(*args, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    if done.stdout == MARK:
        return True
    assert "No changes." in done.stdout or done.stdout.strip(), done.stdout
    return False


def _ready(args) -> None:
    """Run until the memo is recorded, then mark it and check that it answers."""
    for _ in range(3):
        run_cli(*args)
        if os.path.exists(_memo(args)):
            break
    _mark(args)
    assert _answered_by_memo(args)


@pytest.fixture
def applied(runtime, project, tmp_path):
    path = stub_project.config(tmp_path, project, load="0")
    done = run_cli("apply", "-f", str(path), "-y")
    assert done.returncode == 0, done.stdout + done.stderr
    return path


def test_a_noop_plan_is_answered_from_its_memo_until_an_input_changes(runtime, project, tmp_path, applied, foreign):
    args = ("plan", "-f", str(applied), "--detailed-exitcode")
    _ready(args)

    # the engine's container stops: the full run plans a start (exit 2 with --detailed-exitcode)
    engine = f"aigo-{project}-chat"
    runtime.api.stop(engine, timeout=1)
    done = run_cli(*args)
    assert done.returncode == 2 and "start" in done.stdout and MARK not in done.stdout
    runtime.api.start(engine)
    _ready(args)

    # another container appears on the engine
    foreign(f"memo-other-{project}", free_port())
    assert not _answered_by_memo(args)
    _ready(args)

    # the model folder changes (a file added), then a file in it (config.json rewritten)
    (tmp_path / "m" / "tokenizer.json").write_text("{}")
    assert not _answered_by_memo(args)
    _ready(args)
    (tmp_path / "m" / "config.json").write_text('{"model_type": "llama", "architectures": ["X"]}')
    assert not _answered_by_memo(args)
    _ready(args)

    # the mount path becomes a symlink to another folder (validated again by the full run)
    model_folder(tmp_path / "m2")
    os.rename(tmp_path / "m", tmp_path / "m-old")
    os.symlink(tmp_path / "m2", tmp_path / "m")
    done = run_cli(*args)
    assert MARK not in done.stdout
    os.unlink(tmp_path / "m")
    os.rename(tmp_path / "m-old", tmp_path / "m")
    _ready(args)

    # the config's bytes (a comment), aigo.lock's, and the router's live files
    applied.write_text(applied.read_text() + "# a comment\n")
    assert not _answered_by_memo(args)
    _ready(args)
    lock = applied.parent / "aigo.lock"
    lock.write_text(lock.read_text().replace("\n}", " \n}", 1) if lock.exists() else "{}\n")
    assert MARK not in run_cli(*args).stdout
    run_cli("apply", "-f", str(applied), "-y")  # puts aigo.lock back as it should be
    _ready(args)

    # the environment
    assert not _answered_by_memo(args, env={"AIGO_MEMO_TEST": "1"})
    _ready(args)

    # a memo writable by others, or not the user's own, is never read
    os.chmod(_memo(args), 0o666)
    assert not _answered_by_memo(args)
    _ready(args)
    if os.geteuid() == 0:  # only root can give a file away
        os.chown(_memo(args), 12345, 12345)
        assert not _answered_by_memo(args)


def test_a_noop_apply_is_answered_from_its_memo_but_never_while_an_apply_holds_the_lock(
    runtime, project, tmp_path, applied
):
    import fcntl

    from aigo_apply.apply.state_dir import state_path

    args = ("apply", "-f", str(applied), "-y")
    _ready(args)
    # a file in the router's folder is edited: the full run looks at it again
    live = state_path(project) / "router" / "live"
    victim = next(p for p in sorted(live.rglob("*")) if p.is_file())
    victim.write_text(victim.read_text() + "\n# edited\n")
    done = run_cli(*args)
    assert done.returncode == 0 and MARK not in done.stdout
    _ready(args)
    with open(state_path(project) / "apply.lock") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        done = run_cli(*args, "--lock-timeout", "0")  # another command line: never from the memo
        assert MARK not in done.stdout
        done = run_cli(*args)  # the memo is not used while the lock is held: the full run waits and fails
        assert MARK not in done.stdout and done.returncode != 0
    assert _answered_by_memo(args)


def test_no_memo_with_the_switch_off(runtime, project, tmp_path, applied):
    args = ("plan", "-f", str(applied))
    _ready(args)
    assert not _answered_by_memo(args, env={noop_memo.OFF: "1"})
