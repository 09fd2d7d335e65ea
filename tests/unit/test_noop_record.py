"""What the no-op memo's writer (app/noop_record.py) depends on and when it writes nothing: every
path the plan reads (config, aigo.lock, mount paths as written and where they lead, secret files,
the router's files, the host's account files), no memo for a plan that asks NVML or the Hub, or
when a dependency moved while the plan was made, or a mount path now leads elsewhere."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest

from aigo_apply.app import noop_memo, noop_record
from aigo_apply.app.planning import load_desired
from aigo_apply.config.load import load_config
from tests.helpers.configs import model_folder, router_yaml, write_config

SECRET_DIR = ".aigo/secrets"


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("AIGO_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    monkeypatch.delenv(noop_memo.OFF, raising=False)
    yield tmp_path
    noop_record._current = None


def _config(tmp_path, models: str) -> str:
    model_folder(tmp_path / "m")
    return str(
        write_config(
            tmp_path,
            f"""
            version: 1
            project: memo
            engines: {{vllm: {{image: aigo-test-idle, image_tag: "1"}}}}
            {router_yaml(18123)}
            models:
            {models}
            """,
        )
    )


def test_the_dependencies_name_every_path_the_plan_reads(state):
    secret = state / "home" / SECRET_DIR / "token"
    secret.parent.mkdir(parents=True)
    secret.write_text("x")
    os.chmod(secret, 0o600)
    path = _config(
        state,
        f"""  chat:
                source: {{path: m}}
                context_length: 4096
                gpus: none
                env: {{WANDB_API_KEY: {{from_file: {secret}}}}}""",
    )
    desired = load_desired(path)
    deps, written = noop_record.dependencies(load_config(path), desired)
    kinds = {p: k for k, p in deps}
    assert kinds[path] == "read" and kinds[str(state / "aigo.lock")] == "read"
    assert kinds[str(state / "m")] == "list" and written == [str(state / "m")]
    assert kinds[str(secret)] == "stat"
    assert kinds[str(state / "state" / "memo" / "router")] == "tree"
    assert {"/etc/passwd", "/etc/group", "/home"} <= set(kinds)


def test_a_gpu_model_or_a_missing_download_or_a_moving_lock_is_never_memoised(state):
    gpu = load_desired(_config(state, "  a: {source: {path: m}, context_length: 4096, gpus: all}"))
    assert noop_record.volatile(gpu, has_lock=False)
    local = load_desired(_config(state, "  a: {source: {path: m}, context_length: 4096, gpus: none}"))
    assert not noop_record.volatile(local, has_lock=True)
    hub = load_desired(_config(state, "  a: {source: {repo: org/model}, context_length: 4096, gpus: none}"))
    assert noop_record.volatile(hub, has_lock=False)  # not downloaded: the Hub is asked


def _plan(changes=False, blockers=()):
    return SimpleNamespace(has_changes=changes, blockers=blockers)


def _runtime(answers=None):
    ok = {"/containers/json": [[]], "/images/json": [[]], "/info": [{"ServerVersion": "1"}]}
    return SimpleNamespace(answers=answers or ok)


def test_a_memo_is_written_only_for_a_clean_no_op_whose_inputs_held_still(state, monkeypatch):
    path = _config(state, "  a: {source: {path: m}, context_length: 4096, gpus: none}")
    argv = ["plan", "-f", path]

    def run(plan, runtime, between=None, code=0):
        rec = noop_record.begin(argv)
        desired = load_desired(path)  # calls noop_record.loaded
        if between:
            between()
        noop_record.planned(desired, plan, runtime, has_lock=False)
        rec.out.write("No changes.\n")
        noop_record.finish(code)
        return os.path.exists(noop_memo.memo_path(argv))

    assert not run(_plan(changes=True), _runtime())
    assert not run(_plan(blockers=("x",)), _runtime())
    assert not run(_plan(), _runtime(), code=1)
    two_states = {"/containers/json": [[], [{"Id": "a"}]], "/images/json": [[]], "/info": [{}]}
    assert not run(_plan(), _runtime(two_states))  # the engine answered two ways during one plan
    assert not run(_plan(), _runtime(), between=lambda: (state / "m" / "new").write_text("x"))
    assert run(_plan(), _runtime())
    memo = json.loads(open(noop_memo.memo_path(argv)).read())
    assert memo["stdout"] == "No changes.\n" and memo["code"] == 0
    assert os.stat(noop_memo.memo_path(argv)).st_mode & 0o077 == 0


def test_a_mount_path_that_now_leads_elsewhere_writes_no_memo(state):
    path = _config(state, "  a: {source: {path: m}, context_length: 4096, gpus: none}")
    desired = load_desired(path)
    _, written = noop_record.dependencies(load_config(path), desired)
    assert noop_record._mounts_hold(written, desired)
    model_folder(state / "other")
    os.rename(state / "m", state / "m-old")
    os.symlink(state / "other", state / "m")
    assert not noop_record._mounts_hold(written, desired)


def test_the_tee_keeps_what_it_passes_on():
    import io

    seen, out = io.StringIO(), io.StringIO()
    tee = noop_record.Tee(out, seen)
    tee.write("a\n")
    with pytest.raises(TypeError):
        tee.write(b"bytes")  # type: ignore[arg-type]
    assert out.getvalue() == seen.getvalue() == "a\n"


def test_a_fifo_is_never_opened_and_a_config_that_is_not_a_regular_file_leaves_no_memo(tmp_path):
    fifo = tmp_path / "aigo.yaml"
    os.mkfifo(fifo)
    signed = noop_memo.sign(["read", str(fifo)])
    with pytest.raises(OSError):  # ENXIO: no reader has it open, so no writer was ever released
        os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    assert signed[5] is None and not noop_record.signed_whole([signed])
    missing = noop_memo.sign(["read", str(tmp_path / "aigo.lock")])  # no aigo.lock: fine
    assert noop_record.signed_whole([missing])


def test_a_folder_too_large_to_sign_leaves_no_memo(tmp_path, monkeypatch):
    for i in range(5):
        (tmp_path / f"f{i}").write_text("x")
    assert noop_record.signed_whole([noop_memo.sign(["list", str(tmp_path)])])
    monkeypatch.setattr(noop_memo, "MAX_LISTED", 4)
    assert not noop_record.signed_whole([noop_memo.sign(["list", str(tmp_path)])])
    (tmp_path / "partial").write_text("a file named like the marker is only a name")
    monkeypatch.setattr(noop_memo, "MAX_LISTED", 100)
    assert noop_record.signed_whole([noop_memo.sign(["list", str(tmp_path)])])


def test_the_store_the_hub_token_files_and_every_home_are_dependencies_with_the_folders_above(state, monkeypatch):
    monkeypatch.setenv("HF_TOKEN_PATH", str(state / "tok" / "token"))
    store = state / "s1" / "s2" / "models"
    path = str(
        write_config(
            state,
            f"""
            version: 1
            project: memo
            engines: {{vllm: {{image: aigo-test-idle, image_tag: "1"}}}}
            {router_yaml(18123)}
            defaults: {{models_dir: {store}}}
            models:
              a: {{source: {{path: m}}, context_length: 4096, gpus: none}}
            """,
        )
    )
    model_folder(state / "m")
    deps, _ = noop_record.dependencies(load_config(path), load_desired(path))
    named = {p for _, p in deps}
    assert {str(store), str(state / "s1" / "s2"), str(state / "s1"), str(state), "/"} <= named
    assert str(state / "tok" / "token") in named and str(state / "home" / ".huggingface" / "token") in named
    assert "/root" in named and set(noop_record.account_homes()) <= named


def test_the_apply_lock_is_taken_as_an_apply_takes_it(tmp_path):
    import fcntl

    lock = tmp_path / "apply.lock"
    assert not noop_memo._apply_lock(str(lock)).__enter__()  # none yet: the full run makes it
    lock.write_text("")
    with noop_memo._apply_lock(str(lock)) as free:
        assert free and json.loads(lock.read_text())["command"] == "apply"
    assert lock.read_text() == ""
    with open(lock, "r+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with noop_memo._apply_lock(str(lock)) as free:
            assert not free
    folder = tmp_path / "dir.lock"
    folder.mkdir()
    with noop_memo._apply_lock(str(folder)) as free:  # cannot be opened for writing: the full run says why
        assert not free


def test_the_memo_folder_keeps_only_the_most_recent(tmp_path, monkeypatch):
    monkeypatch.setattr(noop_record, "KEEP", 3)
    folder = tmp_path / ".memo"
    for i in range(5):
        noop_record._write(str(folder / f"m{i}.json"), "{}")
        os.utime(folder / f"m{i}.json", ns=(i * 10**9, i * 10**9))
    assert sorted(p.name for p in folder.iterdir()) == ["m2.json", "m3.json", "m4.json"]


def test_a_lock_file_that_cannot_be_opened_is_a_clear_error_not_a_traceback(tmp_path):
    from aigo_apply.apply.project_lock import ProjectLock
    from aigo_apply.errors import AigoError

    (tmp_path / "apply.lock").mkdir()  # what the memo's lock check also refuses (test above)
    with pytest.raises(AigoError, match="cannot open the lock file .*nothing was changed"):
        with ProjectLock(tmp_path, "memo", "apply"):
            pass
