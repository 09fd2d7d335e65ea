"""A DOCKER_HOST whose host name no connection can be made to (`tcp://a..b:1`, a label over 63
characters, a name over 253, `é..x`), in every form the Docker client takes (tcp://, http://, ssh://),
is one line naming DOCKER_HOST with exit 1 for every command that talks to Docker, on the light
client's path (plan, status, logs, destroy) and the SDK's (image inspect, image pull): urllib3 refused
such a name with a LocationParseError only when it connected, and that was a traceback. A DOCKER_HOST
holding a line feed stays on its line in the message, and a password in it is never printed."""

from __future__ import annotations

import pytest

from aigo_apply.adapters import docker_http
from aigo_apply.adapters.docker_engine import DockerRuntime
from aigo_apply.errors import DockerUnavailable

from helpers.cli import run_cli
from helpers.paths import ROOT

DEMO = str(ROOT / "examples" / "demo.yaml")
NO_NAME = "its host"  # "its host X is no name: ...", "its host is 256 characters long, more than the 253 ..."
BAD_NAMES = [
    "tcp://a..b:1",
    "tcp://.a:2375",
    "tcp://" + "a" * 64 + ":2375",
    "tcp://" + "a." * 127 + "com:2375",
    "tcp://é..x:1",
    "http://a..b:1/path",
    "https://a..b:2376",
    "ssh://me@a..b",
    "ssh://me:pw-hidden@a..b:22",
]
COMMANDS = [
    ["image", "inspect", "vllm"],
    ["image", "pull", "vllm"],
    ["plan"],
    ["status"],
    ["logs"],
    ["destroy", "-y"],
    ["top", "--once"],
]


@pytest.mark.parametrize("host", BAD_NAMES)
def test_a_host_name_no_connection_can_be_made_to_is_one_line_for_every_command(host):
    shown = docker_http.shown_host(host)
    for command in COMMANDS:
        result = run_cli(*command, "-f", DEMO, env={"DOCKER_HOST": host})
        err = result.stderr
        assert result.returncode == 1 and "Traceback" not in err and "internal error" not in err, (command, err)
        last = err.strip().splitlines()[-1]
        assert last.startswith("error: ") and f"DOCKER_HOST={shown}" in last and NO_NAME in last, (command, err)
        assert "pw-hidden" not in result.stdout + err


@pytest.mark.parametrize("host", BAD_NAMES)
def test_each_call_of_the_runtime_names_docker_host(monkeypatch, host):
    monkeypatch.setenv("DOCKER_HOST", host)
    runtime = DockerRuntime()
    for call in (
        runtime.list_containers,
        runtime.info,
        lambda: runtime.inspect_image("x:1"),
        lambda: runtime.pull("x:1"),
    ):
        with pytest.raises(DockerUnavailable, match="is no name|more than the 253") as caught:
            call()
        assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "host", ["tcp://127.0.0.1:2375", "tcp://docker.internal.example:2376", "tcp://[::1]:2375", "ssh://me@build-box"]
)
def test_names_a_connection_can_be_made_to_pass(host):
    assert docker_http.host_problem(host) is None


@pytest.mark.parametrize("command", [["plan"], ["image", "inspect", "vllm"], ["status"]])
def test_a_docker_host_holding_a_line_feed_stays_on_its_line(command):
    host = "unix:///nowhere/x\n::warning::injected"
    result = run_cli(*command, "-f", DEMO, env={"DOCKER_HOST": host})
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "injected" in lines[0] and "\\n" in lines[0], result.stderr
