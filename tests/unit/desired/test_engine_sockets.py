"""The engines' Unix sockets: where the desired state puts them, the folders the Docker adapter makes
for them (adapters/engine_sockets.py) and what it refuses, the reason a plan gives for moving an
engine from its port to its socket, and the rule that keeps on-demand engines off ports."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from aigo_apply.adapters.engine_sockets import prepare_socket_mounts
from aigo_apply.desired.build import build_desired, served_on_ports
from aigo_apply.desired.engines.common import SOCKET_MOUNT
from aigo_apply.desired.types import ROUTER_SOCKETS, EngineAddress, Mount, Route
from aigo_apply.errors import AigoError, ConfigInvalid, UnsafeSetting
from aigo_apply.observe.config_file import load_config
from aigo_apply.observe.containers import parse_state
from aigo_apply.plan.planner import build_plan

from helpers.configs import host_context, write_config
from helpers.planner_inputs import CONFIG, IMAGES, desired, running


def _containers(tmp_path):
    d = desired(tmp_path)
    return d, d.models["alpha"].container, d.router.container


def _rebased(container, tmp_path):
    """The container with its socket mounts moved below tmp_path (the test's own state folder)."""
    mounts = []
    for m in container.mounts:
        if m.target in (SOCKET_MOUNT, ROUTER_SOCKETS):
            m = Mount(str(tmp_path / "state" / "lab" / "sockets" / Path(m.source).name), m.target, m.read_only)
            if m.target == ROUTER_SOCKETS:
                m = Mount(str(tmp_path / "state" / "lab" / "sockets"), m.target, m.read_only)
        mounts.append(m)
    return replace(container, mounts=tuple(mounts))


def test_a_vllm_engine_serves_on_its_socket_in_the_projects_state_and_the_router_sees_them_all(tmp_path):
    d, engine, router = _containers(tmp_path)
    sockets = d.router.spec["sockets_dir"]
    assert d.models["alpha"].spec["socket"] == f"{sockets}/alpha" and "port" not in d.models["alpha"].spec
    assert Mount(f"{sockets}/alpha", SOCKET_MOUNT, False) in engine.mounts  # its own folder only
    assert Mount(sockets, ROUTER_SOCKETS, True) in router.mounts  # all of them, read-only
    assert EngineAddress.of(d.models["alpha"].spec) == EngineAddress(socket=f"{sockets}/alpha/engine.sock")
    assert Route.of("alpha", d.models["alpha"].spec).router_socket == "/run/aigo-engines/alpha/engine.sock"
    # on a cluster every engine listens on the port chosen for it, as before
    cluster = served_on_ports(d).models["alpha"]
    assert cluster.spec["port"] == d.models["alpha"].port and "socket" not in cluster.spec
    assert cluster.container.command[-2:] == ("--port", "8000") and cluster.container.entrypoint is None


def test_the_folders_are_made_with_modes_no_other_account_can_enter(tmp_path):
    _, engine, router = _containers(tmp_path)
    old = os.umask(0o022)
    try:
        prepare_socket_mounts(_rebased(router, tmp_path))
        prepare_socket_mounts(_rebased(engine, tmp_path))
    finally:
        os.umask(old)
    root, own = tmp_path / "state" / "lab" / "sockets", tmp_path / "state" / "lab" / "sockets" / "alpha"
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE(own.stat().st_mode) == 0o2770 and own.stat().st_gid == os.getgid()
    own.chmod(0o777)  # put right on the next create
    prepare_socket_mounts(_rebased(engine, tmp_path))
    assert stat.S_IMODE(own.stat().st_mode) == 0o2770


def test_a_symlink_a_file_or_someone_elses_folder_in_its_place_is_refused(tmp_path):
    _, engine, _ = _containers(tmp_path)
    engine = _rebased(engine, tmp_path)
    own = tmp_path / "state" / "lab" / "sockets" / "alpha"
    own.parent.mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    own.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(AigoError, match="is not a folder"):
        prepare_socket_mounts(engine)
    own.unlink()
    own.write_text("x")
    with pytest.raises(AigoError, match="is not a folder"):
        prepare_socket_mounts(engine)
    own.unlink()
    if os.getuid() == 0:
        own.mkdir()
        os.chown(own, 54321, 54321)
        with pytest.raises(AigoError, match="belongs to user 54321"):
            prepare_socket_mounts(engine)


@pytest.mark.parametrize("source", ["relative/sockets/a", "/tmp/not-sockets/a", "/tmp/sockets/a\n", "/etc"])
def test_only_a_folder_the_tool_makes_is_ever_created(tmp_path, source):
    _, engine, _ = _containers(tmp_path)
    forged = replace(engine, mounts=(Mount(source, SOCKET_MOUNT, False),))
    with pytest.raises(UnsafeSetting, match="not one aigo-apply makes"):
        prepare_socket_mounts(forged)


def test_an_engine_that_published_a_port_is_replaced_once_with_the_reason(tmp_path):
    with_port = desired(tmp_path, CONFIG.replace("    gpus: none\n", "    gpus: none\n    port: 8101\n", 1))
    now = desired(tmp_path)
    plan = build_plan(now, parse_state("lab", running(with_port), IMAGES, {}, {}))
    (alpha,) = [a for a in plan.actions if a.address == "model.alpha"]
    assert alpha.kind == "recreate"
    assert alpha.reasons == (
        "the engine now serves on a Unix socket only the router reaches: 127.0.0.1:8101, where any local account "
        "could reach it without a key, is no longer published",
    )
    assert {(c.path, c.before, c.after) for c in alpha.changes} == {
        ("port", 8101, None),
        ("socket", None, now.models["alpha"].spec["socket"]),
    }
    again = build_plan(now, parse_state("lab", running(now), IMAGES, {}, {}))
    assert [a.kind for a in again.actions if a.model == "alpha"] == ["noop"]


def test_a_port_is_noted_for_every_engine_that_publishes_one(tmp_path):
    d = desired(tmp_path, CONFIG.replace("    gpus: none\n", "    gpus: none\n    port: 8101\n", 1))
    assert d.models["alpha"].notes[-1].startswith("served on 127.0.0.1:8101 (models.alpha.port asks for it)")
    assert not [n for n in d.models["beta"].notes if "served on" in n]


def test_a_port_on_an_on_demand_model_is_refused_where_it_is_written(tmp_path):
    text = CONFIG.replace("    gpus: none\n", "    gpus: none\n    on_demand: true\n    port: 8101\n", 1)
    with pytest.raises(ConfigInvalid) as info:
        build_desired(load_config(str(write_config(tmp_path, text))), host_context(Path("/store")))
    (problem,) = [p for p in info.value.problems if p.path.startswith("models.alpha.port")]
    assert "development endpoints" in problem.message and "remove port" in problem.message
