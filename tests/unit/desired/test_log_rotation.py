"""Bounded logs (desired/logs.py): every container aigo-apply makes, an engine of each kind and the
router, gets Docker's json-file driver with a size and a count, from the file's `logs:` (a model's own,
then defaults.logs, then 50m x 5; the router's own, then defaults.logs), in its canonical spec, its
container definition and the `render --as docker-run` line; a size is kept in the one spelling Docker
reads the same way; a forged value is refused where the container is made."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from aigo_apply.desired.build import build_desired
from aigo_apply.desired.docker_run import docker_run
from aigo_apply.desired.engines.router import router_container
from aigo_apply.desired.logs import canonical_size, rotation
from aigo_apply.desired.types import LogRotation
from aigo_apply.errors import UnsafeSetting
from aigo_apply.observe.config_file import load_config

from helpers.configs import host_context, write_config
from helpers.paths import EXAMPLES

BUILT_IN = {"max_files": 5, "max_size": "50m"}
# a model of each engine kind, so that every engine module is held to it (and the router beside them)
FILE = """
version: 1
project: lab
{defaults}router: {{port: 8000{router}}}
engines: {{sglang: {{image_tag: v0.5.6-cu129}}, llama.cpp: {{image_tag: server-cuda}}}}
models:
  v: {{source: {{repo: org/v}}, context_length: 4096, gpus: none{v}}}
  s: {{source: {{repo: org/s}}, engine: sglang, context_length: 4096, gpus: none{s}}}
  l: {{source: {{repo: org/l-GGUF, file: l.gguf}}, context_length: 4096, gpus: none{l}}}
"""


def built(tmp_path: Path, defaults: str = "", router: str = "", **own: str):
    text = FILE.format(
        defaults=f"defaults: {{logs: {defaults}}}\n" if defaults else "",
        router=f", logs: {router}" if router else "",
        **{alias: f", logs: {own[alias]}" if alias in own else "" for alias in "vsl"},
    )
    return build_desired(load_config(str(write_config(tmp_path, text))), host_context(Path("/store")))


def containers(desired):
    return {**{a: m.container for a, m in desired.models.items()}, "router": desired.router.container}


def specs(desired):
    return {**desired.specs(), "router": desired.router.spec}


def docker_argv(line: str) -> list[str]:
    """The words `sh` hands to `docker` when it runs the printed line."""
    script = "docker() { for a; do printf '%s\\0' \"$a\"; done; }\n" + line + "\n"
    return subprocess.run(["sh", "-c", script], capture_output=True, check=True).stdout.decode().split("\0")[:-1]


def log_words(line: str) -> list[str]:
    argv = docker_argv(line)
    return [f"{a} {argv[i + 1]}" for i, a in enumerate(argv) if a in ("--log-driver", "--log-opt")]


def test_every_container_is_rotated_by_default_in_its_spec_definition_and_docker_run_line(tmp_path):
    desired = built(tmp_path)
    assert {m.spec["engine"] for m in desired.models.values()} == {"vllm", "sglang", "llama.cpp"}
    for name, container in containers(desired).items():
        assert specs(desired)[name]["logs"] == BUILT_IN, name
        assert container.logs == LogRotation("50m", 5), name
        assert container.definition()["logs"] == BUILT_IN, name
        words = log_words(docker_run(container))
        assert words == ["--log-driver json-file", "--log-opt max-size=50m", "--log-opt max-file=5"], name


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_every_example_rotates_the_logs_of_all_it_makes(example, monkeypatch):
    monkeypatch.setenv("AIGO_STATE_DIR", "/state")
    desired = build_desired(load_config(str(EXAMPLES / example)), host_context(Path("/store")))
    assert all(c.logs == LogRotation("50m", 5) for c in containers(desired).values())


@pytest.mark.parametrize(
    "settings, wanted",
    [
        # defaults.logs reaches every model and the router, each key on its own
        (
            {"defaults": "{max_size: 10m}"},
            {n: {"max_files": 5, "max_size": "10m"} for n in ("v", "s", "l", "router")},
        ),
        (
            {"defaults": "{max_size: 1g, max_files: 2}"},
            {n: {"max_files": 2, "max_size": "1g"} for n in ("v", "s", "l", "router")},
        ),
        # a model's and the router's own keys win over defaults.logs, key by key
        (
            {"defaults": "{max_files: 3}", "s": "{max_size: 200m}", "router": "{max_files: 9}"},
            {
                "v": {"max_files": 3, "max_size": "50m"},
                "s": {"max_files": 3, "max_size": "200m"},
                "l": {"max_files": 3, "max_size": "50m"},
                "router": {"max_files": 9, "max_size": "50m"},
            },
        ),
        # without defaults.logs, one model's setting is that model's only
        (
            {"l": "{max_size: 512k, max_files: 1}"},
            {"v": BUILT_IN, "s": BUILT_IN, "l": {"max_files": 1, "max_size": "512k"}, "router": BUILT_IN},
        ),
        ({"router": "{}"}, dict.fromkeys(("v", "s", "l", "router"), BUILT_IN)),
    ],
)
def test_settings_come_from_the_container_s_own_then_defaults_then_built_in(tmp_path, settings, wanted):
    desired = built(tmp_path, **settings)
    assert {name: spec["logs"] for name, spec in specs(desired).items()} == wanted
    for name, container in containers(desired).items():
        rotated = wanted[name]
        assert container.logs == LogRotation(rotated["max_size"], rotated["max_files"])
        assert log_words(docker_run(container))[1:] == [
            f"--log-opt max-size={rotated['max_size']}",
            f"--log-opt max-file={rotated['max_files']}",
        ]


@pytest.mark.parametrize("written", ["50m", "50M", "50mb", "50MB", "50MiB", "50mib", '"50m"'])
def test_every_spelling_docker_reads_as_the_same_size_makes_the_same_container(tmp_path, written):
    """Docker reads k, m and g in either case, with an optional b or ib, as the same power of 1024:
    writing the size another way must not replace anything."""
    ours = built(tmp_path, defaults=f"{{max_size: {written}}}", router=f"{{max_size: {written}}}")
    plain = built(tmp_path)
    for name, container in containers(ours).items():
        assert specs(ours)[name]["logs"] == BUILT_IN
        assert container.definition_hash() == containers(plain)[name].definition_hash()


@pytest.mark.parametrize(
    "size, canonical", [("1k", "1k"), ("512K", "512k"), ("10m", "10m"), ("2G", "2g"), ("999999gB", "999999g")]
)
def test_canonical_sizes(size, canonical):
    assert canonical_size(size) == canonical


@pytest.mark.parametrize(
    "logs, why",
    [
        (None, "would grow without bound"),
        ("50m", "would grow without bound"),
        ({"max_size": "50m"}, "log file count None"),
        ({"max_files": 5}, "log size None"),
        ({"max_size": "50M", "max_files": 5}, "log size '50M'"),  # a spec holds the canonical spelling only
        ({"max_size": "50m --privileged", "max_files": 5}, "is not a whole number and k, m or g"),
        ({"max_size": "0m", "max_files": 5}, "is not a whole number"),
        ({"max_size": "50", "max_files": 5}, "is not a whole number"),
        ({"max_size": 50, "max_files": 5}, "is not a whole number"),
        ({"max_size": "50m", "max_files": 0}, "not an integer from 1 to 100"),
        ({"max_size": "50m", "max_files": 101}, "not an integer from 1 to 100"),
        ({"max_size": "50m", "max_files": "5"}, "not an integer from 1 to 100"),
        ({"max_size": "50m", "max_files": True}, "not an integer from 1 to 100"),
        ({"max_size": "50m", "max_files": 5.0}, "not an integer from 1 to 100"),
    ],
)
def test_a_forged_rotation_is_refused_where_the_container_is_made(tmp_path, logs, why):
    """A hand-edited saved plan reaches the engines' and the router's containers without validation."""
    desired = built(tmp_path)
    with pytest.raises(UnsafeSetting, match=f"model 'v': refusing logs .*{why}"):
        rotation("model 'v'", {**desired.models["v"].spec, "logs": logs})
    router_spec = {k: v for k, v in desired.router.spec.items() if k != "logs" or logs is not None}
    with pytest.raises(UnsafeSetting, match=f"router: refusing logs .*{why}"):
        router_container("lab", {**router_spec, **({"logs": logs} if logs is not None else {})})
