"""A property over hostile config files: a valid file with one value replaced, one key
added, or its bytes damaged, is either a clear refusal (an AigoError: the CLI prints it and exits
1) or a plan that touches nothing outside the project, mounts only what the mount policy allows and
puts only checked words on a command line. Never a traceback.

The machine runs the project's containers and one foreign container the plan must never touch."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aigo_apply.config.host_paths import path_text_problem, unsafe_mount
from aigo_apply.desired.build import build_desired
from aigo_apply.desired.engines.common import SOCKET_MOUNT
from aigo_apply.errors import AigoError
from aigo_apply.observe.config_file import load_config
from aigo_apply.observe.containers import parse_state
from aigo_apply.plan.planner import build_plan

from helpers.configs import host_context
from helpers.planner_inputs import IMAGES, running

BASE: dict[str, Any] = {
    "version": 1,
    "project": "lab",
    "engines": {"vllm": {"image": "local/engine", "image_tag": "1"}, "llama.cpp": {"image_tag": "server"}},
    "router": {"port": 19555, "bind": "127.0.0.1", "timeout": 600, "max_body_mb": 16},
    "defaults": {"gpu_memory_utilization": 0.4, "ready_timeout": 60},
    "models": {
        "alpha": {
            "source": {"path": "/srv/m/alpha"},
            "context_length": 4096,
            "gpus": "none",
            "env": {"LOG_LEVEL": "info", "KEY": {"from_env": "MY_KEY"}},
        },
        "beta": {
            "source": {"repo": "org/beta", "revision": "v1"},
            "context_length": "8K",
            "gpus": [0],
            "port": 19401,
            "vllm": {"tool_call_parser": "hermes", "max_num_seqs": 8, "gpu_memory_utilization": 0.5},
        },
        "gamma": {"engine": "llama.cpp", "source": {"path": "/srv/m/g.gguf"}, "context_length": 2048, "gpus": "none"},
    },
}
FOREIGN = {
    "Id": "id-foreign",
    "Names": ["/postgres"],
    "State": "running",
    "Status": "Up",
    "Image": "postgres:16",
    "ImageID": "sha256:pg",
    "Labels": {"com.example": "x"},
    "Ports": [],
}
HOSTILE = st.one_of(
    st.sampled_from(
        [
            "/",
            "/etc",
            "~",
            "~/.ssh",
            "../../..",
            "/var/lib/docker",
            "a:b",
            "m1\n",
            "--rm",
            "-v /:/host",
            "$(reboot)",
            "a;b",
            "x\x00y",
            "\u202e",
            "0x1A",
            "off",
            "router",
            "aigo-previous",
            "sk-" + "a" * 40,
            "http://u:p@h/",
            "1e309",
            "",
            " ",
            "a" * 5000,
        ]
    ),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.booleans(),
    st.none(),
    st.lists(st.integers(-3, 99), max_size=3),
    st.dictionaries(st.sampled_from(["from_env", "from_file", "path", "repo", "x"]), st.text(max_size=6), max_size=2),
    st.text(max_size=20),
)


def _paths(value: Any, path: tuple = ()) -> list[tuple]:
    """Every place in the document (mappings' values and list items), the root excluded."""
    out = [path] if path else []
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, path + (index,))
    return out


def _mutated(pick: int, how: str, new: Any, key: Any) -> dict:
    data = yaml.safe_load(yaml.safe_dump(BASE))
    path = _paths(data)[pick % len(_paths(data))]
    parent = data
    for step in path[:-1]:
        parent = parent[step]
    if how == "replace":
        parent[path[-1]] = new
    elif how == "add" and isinstance(parent, dict):
        parent[key] = new
    elif how == "add-model":
        data["models"][key] = {"source": {"path": new}, "context_length": 4096, "gpus": "none"}
    return data


def _check_outcome(text: str, tmp_path: Path) -> None:
    """Refused with an AigoError, or planned without touching anything outside the project."""
    file = tmp_path / "aigo.yaml"
    file.write_bytes(text.encode("utf-8", "surrogatepass"))
    try:
        desired = build_desired(load_config(str(file)), host_context(Path("/srv/store")))
        before = build_desired(load_config(_base_file(tmp_path)), host_context(Path("/srv/store")))
        observed = parse_state(desired.project, running(before) + [FOREIGN], IMAGES, {}, {})
        plan = build_plan(desired, observed)
    except AigoError as exc:
        assert str(exc).strip(), "a refusal says why"
        return
    prefix = f"aigo-{desired.project}-"
    for action in plan.actions:
        assert action.container is None or action.container.startswith(prefix), action
        assert "postgres" not in action.address and action.container != "id-foreign"
    home = Path.home().resolve()
    for model in desired.models.values():
        for mount in model.container.mounts:
            if mount.target == SOCKET_MOUNT:  # the one folder of the tool's state an engine gets: its socket's
                assert mount.source == f"{desired.router.spec['sockets_dir']}/{model.alias}", mount
            elif mount.source.startswith("/"):
                assert unsafe_mount(Path(mount.source), home) is None and not path_text_problem(mount.source), mount
        for word in model.container.command:
            assert "\n" not in word and "\x00" not in word and word.strip() == word, word
            assert word.lower() not in ("nan", "inf", "-inf"), word
        for value in model.spec.values():
            assert not (isinstance(value, float) and not math.isfinite(value))


def _base_file(tmp_path: Path) -> str:
    path = tmp_path / "base.yaml"
    if not path.exists():
        path.write_text(yaml.safe_dump(BASE), encoding="utf-8")
    return str(path)


def test_the_base_file_is_valid_and_plans(tmp_path):
    desired = build_desired(load_config(_base_file(tmp_path)), host_context(Path("/srv/store")))
    assert sorted(desired.models) == ["alpha", "beta", "gamma"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    pick=st.integers(min_value=0, max_value=10_000),
    how=st.sampled_from(["replace", "add", "add-model"]),
    new=HOSTILE,
    key=st.one_of(
        st.sampled_from(["router", "m1", "x-router", "args", "extra_args", "0x1A"]), st.integers(), st.booleans()
    ),
)
def test_one_hostile_value_is_refused_or_planned_inside_the_project(tmp_path, pick, how, new, key):
    data = _mutated(pick, how, new, key)
    try:
        text = yaml.safe_dump(data, allow_unicode=True, width=10_000)
    except (yaml.YAMLError, ValueError):
        return  # a value YAML cannot write (e.g. some floats) is not an input anyone can hand us
    _check_outcome(text, tmp_path)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    at=st.integers(min_value=0, max_value=10_000),
    cut=st.integers(min_value=0, max_value=40),
    insert=st.text(
        alphabet=st.sampled_from(list(":{}[]-&*!|>'\"%@`#,?\n\t \x00\\") + ["\u2028", "\ufeff", "a", "0"]), max_size=8
    ),
)
def test_damaged_bytes_are_refused_or_planned_inside_the_project(tmp_path, at, cut, insert):
    text = yaml.safe_dump(BASE, width=10_000)
    at %= len(text)
    _check_outcome(text[:at] + insert + text[at + cut :], tmp_path)
