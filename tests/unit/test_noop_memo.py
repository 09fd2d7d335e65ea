"""The no-op memo (app/noop_memo.py): which command lines it serves, where it lives, what of the
Docker engine's answers it compares, how it signs files and folders, which memo files it refuses,
and a replay against a fake engine on a Unix socket that stops the moment any input moves."""

from __future__ import annotations

import copy
import io
import json
import os
import sys

import pytest

from aigo_apply.adapters import docker_http
from aigo_apply.adapters.host import docker_facts_from_info
from aigo_apply.app import noop_memo
from aigo_apply.config.host_paths import state_root_of
from aigo_apply.observe.containers import parse_container
from tests.helpers import fake_docker
from tests.helpers.fake_docker import FakeEngine


@pytest.mark.parametrize(
    "argv, served",
    [
        (["plan"], True),
        (["plan", "-f", "a.yaml", "--detailed-exitcode"], True),
        (["plan", "--file=a.yaml"], True),
        (["apply", "-f", "a.yaml", "-y"], True),
        (["apply", "--yes"], True),
        (["plan", "-o", "json"], False),
        (["plan", "--out", "p.json"], False),
        (["apply", "saved.plan", "-y"], False),
        (["apply", "-y", "--target", "chat"], False),
        (["apply", "--detailed-exitcode"], False),
        (["plan", "-y"], False),
        (["plan", "-f", "a.yaml", "-f", "b.yaml"], False),
        (["plan", "-f"], False),
        (["validate"], False),
        ([], False),
    ],
)
def test_only_the_plain_plan_and_apply_command_lines_are_served(argv, served, monkeypatch):
    monkeypatch.delenv(noop_memo.OFF, raising=False)
    assert noop_memo.qualifies(argv) is served


def test_the_switch_turns_it_off(monkeypatch):
    monkeypatch.setenv(noop_memo.OFF, "1")
    assert not noop_memo.qualifies(["plan"])
    monkeypatch.setenv(noop_memo.OFF, "0")
    assert noop_memo.qualifies(["plan"])


@pytest.mark.parametrize(
    "env",
    [
        {"HOME": "/home/u"},
        {"HOME": "/home/u", "AIGO_STATE_DIR": "~/s"},
        {"HOME": "/home/u", "AIGO_STATE_DIR": "/var/x"},
        {"HOME": "/home/u", "XDG_STATE_HOME": "/xdg"},
        {"HOME": "/home/u", "XDG_STATE_HOME": "", "AIGO_STATE_DIR": ""},
    ],
)
def test_the_state_root_is_where_the_rest_of_the_tool_puts_it(env, monkeypatch):
    for name in ("AIGO_STATE_DIR", "XDG_STATE_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert noop_memo.state_root() == str(state_root_of())


def test_the_container_list_is_compared_without_uptime_health_or_mount_order():
    raw = copy.deepcopy(fake_docker.CONTAINERS[0])
    raw["Mounts"] = [{"Source": "/a"}, {"Source": "/b"}]
    later = copy.deepcopy(raw) | {"Status": "Up 3 hours (healthy)", "Mounts": raw["Mounts"][::-1]}
    assert noop_memo.projected({"/containers/json": [raw]}) == noop_memo.projected({"/containers/json": [later]})
    stopped = raw | {"State": "exited", "Status": "Exited (137) 2 minutes ago"}
    assert docker_http.project_containers([stopped])[0]["Status"] == "Exited (137)"
    assert docker_http.project_containers([stopped]) != docker_http.project_containers([raw])
    relabelled = copy.deepcopy(raw)
    relabelled["Labels"]["x"] = "z"
    assert docker_http.project_containers([relabelled]) != docker_http.project_containers([raw])


def test_the_projection_keeps_everything_a_plan_reads_of_a_container():
    stopped = copy.deepcopy(fake_docker.CONTAINERS[0]) | {"State": "exited", "Status": "Exited (3) 1 second ago"}
    for raw in (fake_docker.CONTAINERS[0], stopped):
        full, seen = parse_container(raw), parse_container(docker_http.project_containers([raw])[0])
        assert (full.id, full.name, full.state, full.exit_code, full.image, full.image_id, full.labels, full.ports) == (
            seen.id,
            seen.name,
            seen.state,
            seen.exit_code,
            seen.image,
            seen.image_id,
            seen.labels,
            seen.ports,
        )


def test_info_is_compared_on_what_the_host_checks_read():
    info = {
        "ServerVersion": "28.2.2",
        "Runtimes": {"runc": {}, "nvidia": {}},
        "DiscoveredDevices": [{"Source": "cdi", "ID": "nvidia.com/gpu=0"}],
        "Name": "host",
        "SystemTime": "2026-12-01T10:00:00Z",
        "NGoroutines": 41,
    }
    assert docker_facts_from_info(info) == docker_facts_from_info(docker_http.project_info(info))
    later = info | {"SystemTime": "2026-12-01T10:00:09Z", "NGoroutines": 44}
    assert docker_http.project_info(later) == docker_http.project_info(info)
    assert docker_http.project_info(info | {"ServerVersion": "29.0.0"}) != docker_http.project_info(info)


def test_signatures_move_with_what_they_sign(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    listed = ["list", str(folder)]
    before = noop_memo.sign(listed)
    assert noop_memo.sign(listed) == before
    (folder / "extra").write_text("x")
    assert noop_memo.sign(listed) != before
    before = noop_memo.sign(listed)
    (folder / "config.json").write_text('{"a": 1}')
    assert noop_memo.sign(listed) != before

    other = tmp_path / "other"
    other.mkdir()
    link = tmp_path / "link"
    link.symlink_to(folder)
    linked = ["stat", str(link)]
    before = noop_memo.sign(linked)
    link.unlink()
    link.symlink_to(other)
    assert noop_memo.sign(linked) != before

    text = tmp_path / "aigo.yaml"
    text.write_text("a: 1\n")
    read = ["read", str(text)]
    before = noop_memo.sign(read)
    stat = os.stat(text)
    text.write_text("a: 2\n")
    os.utime(text, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size and time, other bytes
    assert noop_memo.sign(read)[5] != before[5]

    tree = tmp_path / "router"
    (tree / "live" / "deep").mkdir(parents=True)
    signed = noop_memo.sign(["tree", str(tree)])
    (tree / "live" / "deep" / "f").write_text("x")
    assert noop_memo.sign(["tree", str(tree)]) != signed
    assert noop_memo.sign(["stat", str(tmp_path / "missing")])[3][0] == "error"


def _memo(tmp_path, **changes) -> str:
    path = tmp_path / "memo.json"
    memo = {"format": noop_memo.FORMAT, "digest": "d", "deps": [], "lock": None, "stdout": "", "stderr": "", "code": 0}
    path.write_text(json.dumps(memo | changes))
    os.chmod(path, 0o600)
    return str(path)


def test_a_memo_is_read_only_when_it_is_the_users_own_and_well_formed(tmp_path):
    assert noop_memo.read_memo(_memo(tmp_path)) is not None
    for bad in ({"code": "0"}, {"format": 99}, {"deps": [["exec", "/x"]]}, {"stdout": None}, {"lock": 3}):
        assert noop_memo.read_memo(_memo(tmp_path, **bad)) is None, bad
    os.chmod(_memo(tmp_path), 0o620)
    assert noop_memo.read_memo(str(tmp_path / "memo.json")) is None
    real = _memo(tmp_path)
    (tmp_path / "link.json").symlink_to(real)
    assert noop_memo.read_memo(str(tmp_path / "link.json")) is None
    (tmp_path / "big.json").write_text(" " * (noop_memo.MAX_MEMO + 1))
    os.chmod(tmp_path / "big.json", 0o600)
    assert noop_memo.read_memo(str(tmp_path / "big.json")) is None
    if os.geteuid() == 0:
        os.chown(real, 4321, 4321)
        assert noop_memo.read_memo(real) is None


@pytest.fixture
def engine(tmp_path, monkeypatch):
    found = FakeEngine(tmp_path / "docker.sock")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{found.path}")
    monkeypatch.setenv("AIGO_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv(noop_memo.OFF, raising=False)
    monkeypatch.chdir(tmp_path)
    yield found
    found.close()


def _replay(argv, monkeypatch) -> tuple[int | None, str, str]:
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    code = noop_memo.replay(argv)
    return code, out.getvalue(), err.getvalue()


def _record(argv, deps, stdout="No changes.\n", code=0) -> None:
    memo = {
        "format": noop_memo.FORMAT,
        "digest": noop_memo.digest(argv, deps, noop_memo.read_answers()),
        "deps": deps,
        "lock": None,
        "stdout": stdout,
        "stderr": "a warning\n",
        "code": code,
    }
    path = noop_memo.memo_path(argv)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(json.dumps(memo))


def test_a_replay_prints_the_recorded_output_until_an_input_moves(engine, tmp_path, monkeypatch):
    (tmp_path / "aigo.yaml").write_text("project: a\n")
    argv = ["plan", "-f", "aigo.yaml"]
    deps = [["read", str(tmp_path / "aigo.yaml")]]
    assert _replay(argv, monkeypatch)[0] is None  # no memo yet
    _record(argv, deps)
    assert _replay(argv, monkeypatch) == (0, "No changes.\n", "a warning\n")
    assert sorted(r.split()[1].split("?")[0] for r in engine.requests[-3:]) == [  # /info on its own thread
        "/v1.41/containers/json",
        "/v1.41/images/json",
        "/v1.41/info",
    ]

    # the uptime moves: still served; the state moves: the full run answers
    monkeypatch.setitem(fake_docker.CONTAINERS[0], "Status", "Up 3 hours")
    assert _replay(argv, monkeypatch)[0] == 0
    monkeypatch.setitem(fake_docker.CONTAINERS[0], "State", "restarting")
    assert _replay(argv, monkeypatch)[0] is None
    monkeypatch.setitem(fake_docker.CONTAINERS[0], "State", "running")
    assert _replay(argv, monkeypatch)[0] == 0

    (tmp_path / "aigo.yaml").write_text("project: b\n")  # a dependency
    assert _replay(argv, monkeypatch)[0] is None
    _record(argv, deps)
    monkeypatch.setenv("SOMETHING_NEW", "1")  # the environment
    assert _replay(argv, monkeypatch)[0] is None
    monkeypatch.delenv("SOMETHING_NEW")
    assert _replay(argv, monkeypatch)[0] == 0
    assert _replay(argv + ["--detailed-exitcode"], monkeypatch)[0] is None  # another command line
    engine.override["/v1.41/info"] = fake_docker.http_answer(500, b'{"message":"down"}')
    assert _replay(argv, monkeypatch)[0] is None  # any failure: the full run


def test_the_runtime_keeps_answers_only_while_a_memo_is_recorded(engine, monkeypatch):
    from aigo_apply.adapters.docker_engine import DockerRuntime
    from aigo_apply.app import noop_record

    runtime = DockerRuntime(base_url=f"unix://{engine.path}")
    for _ in range(3):  # `watch` lists containers for as long as it runs: nothing may pile up
        runtime.list_containers()
    assert runtime.answers is None and runtime.waited > 0
    monkeypatch.setattr(noop_record, "_current", noop_record.Recording(["plan"]))
    noop_record.watch(runtime)
    runtime.list_containers()
    assert list(runtime.answers) == ["/containers/json"]
