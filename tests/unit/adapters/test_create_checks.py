"""The Docker adapter's last check on a container definition: whatever reaches
`create` (a bug, a plan edited by hand) is refused unless it is a container aigo-apply makes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from aigo_apply.adapters.create_checks import check_container
from aigo_apply.desired.build import build_desired
from aigo_apply.desired.engines.common import SOCKET_MOUNT
from aigo_apply.desired.types import LogRotation
from aigo_apply.errors import UnsafeSetting
from aigo_apply.observe.config_file import load_config

from helpers.configs import host_context, model_folder, write_config


@pytest.fixture
def containers(tmp_path):
    model_folder(tmp_path / "m")
    path = write_config(
        tmp_path,
        "version: 1\nproject: cc\nmodels:\n  Qwen3.5_x: {source: {path: m}, context_length: 4096, gpus: none,"
        " env: {A: b, K: {from_env: K}}}\n",
    )
    desired = build_desired(load_config(str(path)), host_context(Path("/srv/store")))
    return desired.models["Qwen3.5_x"].container, desired.router.container


def test_what_the_tool_makes_passes(containers):
    model, router = containers
    # the socket folders are made by the Docker adapter just before (adapters/engine_sockets.py), the
    # router's config folder by the apply
    check_container(replace(model, mounts=tuple(m for m in model.mounts if m.target != SOCKET_MOUNT)))
    check_container(replace(router, mounts=()))


def test_the_router_runs_confined_and_only_confined_may_use_the_hosts_network(containers):
    router = containers[1]
    assert router.network_mode == "host" and router.confined and router.definition()["confined"] is True
    with pytest.raises(UnsafeSetting, match="must run confined"):
        check_container(replace(router, mounts=(), confined=False))


@pytest.mark.parametrize(
    "change, why",
    [
        ({"name": "postgres"}, "its name is not one aigo-apply makes"),
        ({"name": "aigo-cc-x\n"}, "its name is not one aigo-apply makes"),
        ({"image": "--privileged"}, "is not a plain image reference"),
        ({"image": "vllm/vllm-openai:v1 --rm"}, "is not a plain image reference"),
        ({"env": (("A\nB", "x"),)}, "is not a plain name"),
        ({"env": (("LD_PRELOAD=x", "y"),)}, "is not a plain name"),
        ({"env": (("A", "x\x00y"),)}, "is not plain text"),
        (
            {"host_ip": "0.0.0.0", "host_port": 8101, "container_port": 8000, "network_mode": "bridge"},
            "published on 0.0.0.0, not on 127.0.0.1",
        ),
        ({"host_port": 8101, "container_port": 8000}, "an engine without a network cannot publish a port"),
        ({"network_mode": "container:other"}, "is not one aigo-apply uses"),
        ({"ipc_mode": "host"}, "would share another namespace's memory"),
        ({"user": "0:0 --privileged"}, "is not UID:GID"),
        ({"cpu_shares": 1}, "are not an integer from 2 to 262144"),
        ({"cpu_shares": 262145}, "are not an integer from 2 to 262144"),
        ({"cpu_shares": True}, "are not an integer from 2 to 262144"),
        ({"cpu_shares": "8192"}, "are not an integer from 2 to 262144"),
        ({"network_mode": "host"}, "on the host's network must run confined"),
        ({"logs": None}, "its logs would grow without bound"),
        ({"logs": LogRotation("50m,max-file=1000", 5)}, "log size '50m,max-file=1000' is not a whole number"),
        ({"logs": LogRotation("50M", 5)}, "log size '50M' is not a whole number"),
        ({"logs": LogRotation("0k", 5)}, "log size '0k' is not a whole number"),
        ({"logs": LogRotation("50m", 0)}, "log file count 0 is not an integer from 1 to 100"),
        ({"logs": LogRotation("50m", "5")}, "log file count '5' is not an integer from 1 to 100"),
    ],
)
def test_a_forged_definition_is_refused_before_docker_sees_it(containers, change, why):
    with pytest.raises(UnsafeSetting, match="refusing to create") as caught:
        check_container(replace(containers[0], **change))
    assert why in str(caught.value)
