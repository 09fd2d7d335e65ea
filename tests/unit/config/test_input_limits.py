"""Every input finishes in seconds (stated limits instead of hangs and
RecursionErrors) and a config file is read once, quoting at most the offending line (class 8)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time

import pytest
import yaml

from aigo_apply.config import file_read, yaml_source
from aigo_apply.config.defaults import AUTO_PORT_SPAN
from aigo_apply.config.schema import schema
from aigo_apply.desired.build import assign_ports
from aigo_apply.errors import AigoError, ConfigFileError, ConfigInvalid
from aigo_apply.observe.config_file import load_config

from helpers.paths import ROOT

HEAD = "version: 1\nproject: nm3limits\n"
MODEL = "{source: {path: /srv/models/m}, context_length: 4096, gpus: none}"


# A bound only a blow-up reaches (these inputs grew quadratically or worse before the limits: minutes);
# the real times are measured in bench/, not asserted here, so a busy 2-core CI machine cannot fail them.
HANG = 30.0


def refused(tmp_path, text: str, seconds: float = HANG) -> str:
    path = tmp_path / "aigo.yaml"
    path.write_text(text)
    start = time.perf_counter()
    with pytest.raises((ConfigFileError, ConfigInvalid)) as info:
        load_config(str(path))
    assert time.perf_counter() - start < seconds
    error = info.value
    return "\n".join(p.format() for p in error.problems) if isinstance(error, ConfigInvalid) else str(error)


def test_ten_thousand_models_are_refused_at_once(tmp_path):
    body = "".join(f"  m{i}: {MODEL}\n" for i in range(10_001))
    assert "more than 1000 entries" in refused(tmp_path, HEAD + "models:\n" + body)


def test_more_models_than_the_schema_allows_are_refused_before_any_check(tmp_path):
    limit = schema()["properties"]["models"]["maxProperties"]
    body = "".join(f"  m{i}: {MODEL}\n" for i in range(limit + 1))
    assert f"at most {limit} models are allowed" in refused(tmp_path, HEAD + "models:\n" + body)


def test_port_assignment_ends_when_ports_run_out():
    models = {f"m{i}": {} for i in range(AUTO_PORT_SPAN + 1)}
    start = time.perf_counter()
    with pytest.raises(AigoError, match="need a port chosen for them but only"):
        assign_ports("p", models, 8000)
    assert time.perf_counter() - start < 5


def test_port_assignment_counts_explicit_ports_in_the_range():
    models = {"a": {"port": 20000}, **{f"m{i}": {} for i in range(AUTO_PORT_SPAN)}}
    with pytest.raises(AigoError, match=f"only {AUTO_PORT_SPAN - 1} of ports"):
        assign_ports("p", models, 8000)


def nested(kind: str, depth: int) -> str:
    if kind == "flow-seq":
        return "x: " + "[" * depth + "]" * depth + "\n"
    if kind == "flow-map":
        return "x: " + "{a: " * depth + "1" + "}" * depth + "\n"
    return "x:\n" + "".join(" " * (i + 1) + "a:\n" for i in range(depth))


@pytest.mark.parametrize("kind", ["flow-seq", "flow-map", "block-map"])
@pytest.mark.parametrize("depth", [600, 5000])
def test_deep_nesting_is_a_clear_error(tmp_path, kind, depth):
    if kind == "block-map" and depth == 5000:
        depth = 1400  # 5000 indented lines pass the 1 MiB limit; 1400 is already past libyaml's own limit
    message = refused(tmp_path, HEAD + "models: {}\n" + nested(kind, depth))
    assert "nests deeper than 32 levels" in message or "exceeded maximum nesting depth" in message


def test_deep_nesting_with_the_pure_python_parser(tmp_path, monkeypatch):
    monkeypatch.setattr(yaml_source, "_Loader", yaml.SafeLoader)
    for depth in (600, 5000):
        assert "nests deeper than 32 levels" in refused(tmp_path, HEAD + "models: {}\n" + nested("flow-seq", depth))


@pytest.mark.parametrize("text", ["models: &a {m: *a}\n", "models: {}\nx: &a [*a]\n"])
def test_recursive_anchors_are_a_clear_error(tmp_path, text):
    assert "nests deeper than" in refused(tmp_path, HEAD + text)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("models: {}\nx: [" + ",".join(["1"] * 1001) + "]\n", ":4:4: has more than 1000 entries"),
        ("models: {}\nx: {" + ",".join(f"k{i}: 1" for i in range(1001)) + "}\n", "has more than 1000 entries"),
        ("models: {}\nx: " + "a-" * 3000 + "\n", ":4:4: this value is longer than 4096 characters"),
    ],
)
def test_big_lists_mappings_and_values_are_refused_before_the_schema(tmp_path, text, expected):
    assert expected in refused(tmp_path, HEAD + text)


def test_every_schema_pattern_is_fast_on_the_longest_value():
    patterns: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            patterns.update([node["pattern"]] if isinstance(node.get("pattern"), str) else [])
            patterns.update(node.get("patternProperties", {}))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema())
    for pattern in patterns:
        compiled = re.compile(pattern)
        for unit in ("a", "-", "a-", "a.", "a/", "0", "a_", "a:", "a--", "/a", "a__"):
            text = (unit * 4096)[: yaml_source.MAX_VALUE_CHARS - 1] + "!"
            start = time.perf_counter()
            compiled.search(text)
            assert time.perf_counter() - start < 0.2, (pattern, unit)


# class 8: files and pipes


def test_a_pipe_is_read_once_and_remembered(tmp_path, monkeypatch):
    monkeypatch.setattr(file_read, "_piped", {})
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    text = HEAD + "models: {}\nrouter: {port: 0}\n"

    def writer():
        with open(fifo, "w") as f:
            f.write(text)

    threading.Thread(target=writer, daemon=True).start()
    first = yaml_source.load(fifo)
    assert first.data["router"] == {"port": 0}
    assert yaml_source.load(fifo).digest == first.digest  # a second look sees the same bytes, not an empty pipe


def test_a_fifo_nobody_writes_to_does_not_hang(tmp_path, monkeypatch):
    monkeypatch.setattr(file_read, "PIPE_DEADLINE_S", 0.3)
    monkeypatch.setattr(file_read, "_piped", {})
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ConfigFileError, match="sent no end of file within 0.3 seconds"):
        yaml_source.load(tmp_path / "fifo")


@pytest.mark.parametrize(
    "path, expected",
    [("/dev/zero", "is larger than 1048576 bytes"), ("/dev/null", "is empty"), ("/", "is a directory")],
)
def test_devices_and_directories_are_refused_in_bounded_time(path, expected, monkeypatch):
    monkeypatch.setattr(file_read, "_piped", {})
    with pytest.raises(ConfigFileError, match=expected):
        yaml_source.load(__import__("pathlib").Path(path))


SECRET_FILES = {
    "shadow": "root:$6$saltsalt$hashhash:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\nbob:SECRET2:19000:0::::\n",
    "key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "-----END OPENSSH PRIVATE KEY-----\n",
    "dotenv": "API_KEY=abc123\nOTHER=SECRET2\n",
    "json": '{"auths": {"registry": {"auth": "SECRET2"}}}\n',
    "kube": "apiVersion: v1\nusers:\n- name: me\n  user: {token: SECRET2}\n",
    "one-line": "hunter2-SECRET2\n",
}


@pytest.mark.parametrize("name", sorted(SECRET_FILES))
def test_a_file_that_is_not_an_aigo_yaml_is_not_printed(tmp_path, name):
    text = SECRET_FILES[name]
    message = refused(tmp_path, text)
    assert "SECRET2" not in message and "hashhash" not in message and "b3BlbnNz" not in message, message
    assert len(message.splitlines()) == 1


def cli(*args: str, stdin: str | None = None, tmp_path) -> subprocess.CompletedProcess:
    env = {**os.environ, "AIGO_STATE_DIR": str(tmp_path / "state"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    return subprocess.run(
        [sys.executable, "-m", "aigo_apply", *args], input=stdin, capture_output=True, text=True, env=env, cwd=ROOT
    )


def test_an_invalid_file_piped_through_dev_stdin_is_refused(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    good = f"version: 1\nproject: nm3pipe\nmodels:\n  m: {{source: {{path: {tmp_path / 'm'}}}, context_length: 4096}}\n"
    bad = good.replace("4096", "-1")
    assert cli("validate", "-f", "/dev/stdin", stdin=good, tmp_path=tmp_path).returncode == 0
    for _ in range(2):  # the second time the cache of valid files is warm: an invalid file is still refused
        result = cli("apply", "-y", "-f", "/dev/stdin", stdin=bad, tmp_path=tmp_path)
        assert result.returncode == 1, result.stderr
        assert "/dev/stdin:4:" in result.stderr and "context_length: -1 tokens is out of range" in result.stderr
        assert "Traceback" not in result.stderr


def test_process_substitution_is_read_once(tmp_path):
    bad = f"version: 1\nproject: nm3pipe\nmodels:\n  m: {{source: {{path: {tmp_path}}}, context_length: -1}}\n"
    (tmp_path / "bad.yaml").write_text(bad)
    script = f'"{sys.executable}" -m aigo_apply apply -y -f <(cat "{tmp_path / "bad.yaml"}")'
    env = {**os.environ, "AIGO_STATE_DIR": str(tmp_path / "state"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, cwd=ROOT)
    assert result.returncode == 1 and "context_length: -1 tokens is out of range" in result.stderr, result.stderr
