"""One writer per output format, end to end: the real command line in-process, under cli/main's
guarded standard streams, with values a file may hold that a CI runner, a YAML or JSON reader or a
shell would take for something else (`##[group]`, `::error::`, quotes, `$(...)`, backticks, `~`,
backslashes, a no-break space) in its env values, and a file name holding line breaks and commands.

Every machine output parses back to the exact values: `-o json` of validate, plan, apply (JSON lines)
and status with json.loads; `render --as kubernetes`, `export` and `import` with yaml.safe_load;
`render --as docker-run` run by `sh`, whose values equal what apply passes (a `from_file` secret under
`~/` read from the home apply reads it from). No output line is a workflow command, and a line break in
a file name or a lock key never starts a line of its own in human text."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aigo_apply.config.machine_text import is_command

from helpers.fake_kube_api import FakeKubeAPI
from helpers.output import LINES, cli, printed

PIECES = [
    "##[group]", "##[error]x", "::error::", "::add-mask::v", " ::x", "'", '"', "$(id)", "`id`", "~", "~/x", "\\",
    "\\n", "#", "[", ":", "- ", "{a: 1}", "&a", "*a", "!!str", "yes", "null", "1e3", "\xa0", "é", "\t", "$HOME",
]  # fmt: skip
WORDS = st.text(alphabet="abcXYZ019 .,=-_/", max_size=4)
VALUE = st.lists(st.sampled_from(PIECES) | WORDS, min_size=1, max_size=5).map("".join).filter(str.strip)
NAME = st.lists(st.sampled_from(["\n", "\r", "\u2028", "\x85", "##[x]", "::error::n", " ", "a", "é"]), max_size=4)
NAME = NAME.map(lambda parts: "aigo" + "".join(parts) + ".yaml")

KUBE = """version: 1
project: lab
platform: kubernetes
engines: {{vllm: {{image: local/engine, image_tag: "1"}}}}
kubernetes: {{namespace: lab}}
models:
  beta:
    source: {{repo: org/beta, revision: v1}}
    context_length: 4096
    gpus: [0]
    env: {env}
"""


@contextlib.contextmanager
def _world():
    """A fresh folder, state folder and fake cluster (no Docker is reached)."""
    import aigo_apply.platforms.docker.planning
    import aigo_apply.platforms.docker.platform
    import aigo_apply.platforms.kubernetes.platform
    from aigo_apply.adapters.kube_client import KubeClient

    api = FakeKubeAPI()

    def refuse(*_a, **_k):
        raise AssertionError("Docker was reached")

    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            aigo_apply.platforms.kubernetes.platform, "connect", lambda s: KubeClient.over_transport(api, s.namespace)
        )
        patch.setattr(aigo_apply.platforms.docker.platform, "_docker", refuse)
        patch.setattr(aigo_apply.platforms.docker.planning, "_docker", refuse)
        patch.setenv("AIGO_STATE_DIR", str(Path(folder) / "state"))
        patch.setenv("HF_TOKEN", "")
        patch.delenv("AIGO_FILE", raising=False)
        yield Path(folder)


def _objects(file: str) -> list[dict]:
    """The Kubernetes objects `render --as kubernetes` prints for the file, as built in memory."""
    from aigo_apply.desired.build import build_desired
    from aigo_apply.kube.manifests import selected
    from aigo_apply.kube.settings import settings_of
    from aigo_apply.observe.config_file import load_config
    from aigo_apply.platforms.host_context import current_host

    config = load_config(file)
    return json.loads(json.dumps(selected(build_desired(config, current_host()), settings_of(config.data), "beta")))


def _docker_run_argv(line: str, env: dict[str, str] | None = None) -> list[str]:
    """The arguments `sh` hands to `docker` when it runs the printed line."""
    script = "docker() { for a; do printf '%s\\0' \"$a\"; done; }\n" + line + "\n"
    done = subprocess.run(["sh", "-c", script], capture_output=True, check=True, env=env)
    return done.stdout.decode("utf-8").split("\x00")[:-1]


def _pairs(argv: list[str], flag: str) -> dict[str, str]:
    return dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == flag)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.dictionaries(st.sampled_from(["NOTE", "N2", "MSG"]), VALUE, min_size=1), NAME)
def test_every_machine_format_carries_the_exact_values(env, name):
    with _world() as folder:
        path = folder / name
        path.write_text(KUBE.format(env=json.dumps(env, ensure_ascii=False)), encoding="utf-8")
        file = str(path)

        code, out, err = cli("validate", "-f", file, "-o", "json")
        expected = {"format_version": 1, "file": file, "valid": True, "problems": [], "project": "lab", "models": 1}
        assert code == 0 and json.loads(out) == expected, err

        _, out, _ = cli("render", "beta", "--as", "kubernetes", "-f", file)
        assert [o for o in yaml.safe_load_all(out) if o] == _objects(file)  # every value, the spec's annotation too
        deployment = next(o for o in _objects(file) if o["kind"] == "Deployment" and "beta" in o["metadata"]["name"])
        engine = deployment["spec"]["template"]["spec"]["containers"][0]
        assert {e["name"]: e["value"] for e in engine["env"] if e["name"] in env} == env

        _, out, _ = cli("render", "beta", "--as", "docker-run", "-f", file)
        argv = _docker_run_argv(out)
        assert {k: v for k, v in _pairs(argv, "-e").items() if k in env} == env
        assert json.loads(_pairs(argv, "--label")["io.aigo-apply.spec"])["env"] == env

        _, exported, _ = cli("export", "beta", "-f", file)
        assert yaml.safe_load(exported)["model"]["env"] == env
        (folder / "beta.baimodel").write_text(exported, encoding="utf-8")
        other = folder / "other.yaml"
        other.write_text(KUBE.replace("  beta:", "  gamma:").format(env="{}"), encoding="utf-8")
        _, printed, _ = cli("import", str(folder / "beta.baimodel"), "-f", str(other))
        assert yaml.safe_load(printed)["models"]["beta"]["env"] == env

        code, out, err = cli("plan", "-f", file, "-o", "json")
        plan = json.loads(out)
        assert plan["config_file"] == file, err
        model = next(a for a in plan["actions"] if a["address"] == "model.beta")
        assert model["spec"]["env"] == env
        assert {c["path"][4:]: c["after"] for c in model["changes"] if c["path"].startswith("env.")} == env

        code, out, err = cli("apply", "-f", file, "-y", "-o", "json")
        events = [json.loads(line) for line in out.splitlines()]
        assert code == 0 and events, err
        shown = next(e["plan"] for e in events if e["event"] == "plan")
        assert next(a for a in shown["actions"] if a["address"] == "model.beta")["spec"]["env"] == env

        code, out, _ = cli("status", "-f", file, "-o", "json")
        assert json.loads(out)["models"][0]["alias"] == "beta"


def test_a_docker_run_line_runs_as_shown_with_the_values_apply_passes(tmp_path, monkeypatch):
    """A `from_file` secret under ~/ (where the docs keep them) is read from "$HOME"/..., the file
    apply reads; every other value is the one apply gives Docker."""
    from aigo_apply.desired.types import SecretRef
    from aigo_apply.platforms.docker.planning import load_desired
    from aigo_apply.platforms.secrets import resolve

    home = tmp_path / "home"
    secrets = home / ".aigo" / "secrets"
    secrets.mkdir(parents=True)
    (secrets / "db key").write_text("s3cret-db-value\n")
    (secrets / "db key").chmod(0o600)
    (tmp_path / "abs").write_text("absolute-value\n")
    (tmp_path / "abs").chmod(0o600)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("API_TOKEN", "from-the-environment")
    monkeypatch.delenv("AIGO_FILE", raising=False)
    env = {
        "DB": {"from_file": "~/.aigo/secrets/db key"},
        "ABS": {"from_file": str(tmp_path / "abs")},
        "TOKEN": {"from_env": "API_TOKEN"},
        "NOTE": "##[group]x ~/y $(id) `id` 'q' \"d\" \\",
    }
    path = tmp_path / "aigo.yaml"
    path.write_text(
        "version: 1\nproject: lab\nmodels:\n  m:\n    source: {repo: org/m}\n    context_length: 4096\n"
        f"    gpus: none\n    env: {json.dumps(env)}\n"
    )
    code, out, err = cli("render", "m", "--as", "docker-run", "-f", str(path))
    assert code == 0, err
    argv = _docker_run_argv(
        out, env={"PATH": os.environ["PATH"], "HOME": str(home), "API_TOKEN": "from-the-environment"}
    )
    container = load_desired(str(path), "docker").models["m"].container
    passed = {
        name: resolve(value, f"models.m.env.{name}") if isinstance(value, SecretRef) else value
        for name, value in container.env
    }
    assert passed["DB"] == "s3cret-db-value" and passed["ABS"] == "absolute-value"
    assert _pairs(argv, "-e") == passed
    assert _pairs(argv, "--label") == dict(container.labels)
    assert argv[argv.index(container.image) + 1 :][-len(container.command) :] == list(container.command)


CONTROLS = ["\n", "\r", "\u2028", "\x85", "\x1b[2J", "\u202e", "\x00"]
HOSTILE_TEXT = st.lists(st.sampled_from(PIECES + CONTROLS) | WORDS, min_size=1, max_size=5).map("".join)


@settings(max_examples=40, deadline=None)
@given(HOSTILE_TEXT)
def test_every_json_view_prints_strict_json_with_the_exact_values(text):
    """Each `-o json` view (status, readiness, models list, image inspect, top --once, bench, logs,
    validate, plan, apply's JSON lines) with a text from Docker, a marker or an engine's log."""
    from aigo_apply.cli.views import JsonView
    from aigo_apply.errors import ConfigInvalid, Problem
    from aigo_apply.plan.host_checks import Check
    from aigo_apply.plan.types import Action, Change, Plan
    from aigo_apply.platforms.views import Readiness

    data = {"project": "lab", "name": text, text: [text, 1, None], "models": [{"alias": "a", "note": text}]}
    change = Change("env.A", text, text, "recreate")
    plan = Plan(text, text, "sha256:" + "0" * 64, (Action("model.a", "recreate", (text,), (change,), model="a"),))
    readiness = Readiness(
        "lab", "vllm", {"image_reference": text}, (Check("docker.engine", "warning", text, text),), []
    )
    v1 = lambda d: {"format_version": 1, **d}  # every JSON output carries its format_version
    shows = {  # what each prints, and what it must read back as
        "status": (lambda v: v.status(data, lambda r: ""), v1(data)),
        "top": (lambda v: v.top(data, live=False), v1(data)),
        "bench": (lambda v: v.bench(data), v1(data)),
        "image": (lambda v: v.image(data), v1(data)),
        "models": (lambda v: v.stored_models([data]), v1({"models": [data]})),
        "logs": (lambda v: v.log_line(text, text, prefixed=True), v1({"source": text, "line": text})),
        "readiness": (lambda v: v.readiness(readiness), v1(json.loads(json.dumps(readiness.to_dict())))),
        "valid": (
            lambda v: v.valid(text, "lab", 1),
            v1({"file": text, "valid": True, "problems": [], "project": "lab", "models": 1}),
        ),
        "invalid": (
            lambda v: v.invalid(ConfigInvalid(text, [Problem(1, 2, text, text, text)]), True),
            v1(
                {
                    "file": text,
                    "valid": False,
                    "problems": [{"line": 1, "column": 2, "path": text, "message": text, "file": text}],
                }
            ),
        ),
        "plan": (lambda v: v.plan(plan, False), json.loads(json.dumps(plan.to_dict()))),
    }
    for name, (show, expected) in shows.items():
        out, _ = printed(lambda show=show: show(JsonView()))
        assert json.loads(out) == expected, (name, out)
        for line in LINES.split(out):
            assert not is_command(line), (name, line)
    out, _ = printed(lambda: JsonView().event("step", address="model.a", message=text))
    assert json.loads(out)["message"] == text
