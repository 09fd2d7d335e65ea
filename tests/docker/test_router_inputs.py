"""Against the real Docker engine and the real HAProxy: the schema's
largest body passes `haproxy -c`, a failed check shows HAProxy's own words, a changed API key is a
planned reload after which the old key gets 401, unusable keys are refused before anything changes,
and a container forged with this project's labels makes nothing crash nor act outside."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from aigo_apply.desired import labels as L

from helpers.cli import run_cli
from helpers.configs import free_port, router_yaml, write_config

IDLE = "aigo-test-idle:1"


class Keyed:
    """A project with a router and no models (no engine to wait for): keys are told apart by 401
    (refused) and 404 (let through to the model lookup)."""

    def __init__(self, tmp_path, name):
        self.tmp, self.name, self.port = tmp_path, name, free_port()
        self.env = {"AIGO_STATE_DIR": str(tmp_path / "state")}
        self.url = f"http://127.0.0.1:{self.port}"
        self.router_dir = tmp_path / "state" / name / "router"

    def write(self, router_extra: str = ", api_keys: {from_env: RT6_KEYS}") -> str:
        router = router_yaml(self.port)[:-1] + router_extra + "}"
        return str(write_config(self.tmp, f"version: 1\nproject: {self.name}\n{router}\nmodels: {{}}\n"))

    def run(self, *args: str, keys: str | None = None, extra: str = ", api_keys: {from_env: RT6_KEYS}"):
        env = {**self.env, **({"RT6_KEYS": keys} if keys is not None else {})}
        return run_cli(*args, "-f", self.write(extra), *(["-y"] if args[0] != "plan" else []), env=env)

    def status_with(self, key: str) -> int:
        headers = {"Authorization": f"Bearer {key}"}
        return httpx.post(
            f"{self.url}/v1/chat/completions", json={"model": "x"}, headers=headers, timeout=5
        ).status_code


@pytest.fixture
def rt6(tmp_path, runtime):
    """A project named rt6...; its containers are removed afterwards."""
    name = "rt6" + uuid.uuid4().hex[:8]
    yield Keyed(tmp_path, name)
    for c in runtime.api.containers(all=True, filters={"label": [f"{L.PROJECT}={name}"]}):
        runtime.api.remove_container(c["Id"], force=True)


def router_id(runtime, name: str) -> str:
    return runtime.api.inspect_container(f"aigo-{name}-router")["Id"]


def test_a_changed_key_is_a_planned_reload_and_the_old_key_gets_401(rt6, runtime):
    first = rt6.run("apply", keys="sk-old-1-0123456789abcdef")
    assert first.returncode == 0, first.stdout + first.stderr
    assert rt6.status_with("sk-old-1-0123456789abcdef") == 404 and rt6.status_with("sk-new-2-0123456789abcdef") == 401
    before = router_id(runtime, rt6.name)
    assert "No changes" in rt6.run("plan", keys="sk-old-1-0123456789abcdef").stdout
    plan = rt6.run("plan", keys="sk-new-2-0123456789abcdef")
    assert "router.api_keys: the keys changed" in plan.stdout and "will be reloaded" in plan.stdout, plan.stdout
    assert (
        "sk-old-1-0123456789abcdef" not in plan.stdout + plan.stderr
        and "sk-new-2-0123456789abcdef" not in plan.stdout + plan.stderr
    )
    applied = rt6.run("apply", keys="sk-new-2-0123456789abcdef")
    assert applied.returncode == 0 and "router reloaded" in applied.stdout, applied.stdout + applied.stderr
    assert rt6.status_with("sk-old-1-0123456789abcdef") == 401 and rt6.status_with("sk-new-2-0123456789abcdef") == 404
    assert router_id(runtime, rt6.name) == before  # a reload, not a new container
    assert "No changes" in rt6.run("plan", keys="sk-new-2-0123456789abcdef").stdout
    stored = "".join(p.read_text() for p in rt6.router_dir.rglob("*") if p.is_file() and p.name != "api-keys")
    stored += json.dumps(runtime.api.inspect_container(before)["Config"]["Labels"])
    assert "sk-new-2-0123456789abcdef" not in stored and "sk-old-1-0123456789abcdef" not in stored


@pytest.mark.parametrize("bad", ["sk-new-é", "sk new", "sk-a,sk\tb"])
def test_unusable_keys_are_refused_before_anything_changes(rt6, runtime, bad):
    fresh = rt6.run("apply", keys=bad)
    assert fresh.returncode == 1 and "Traceback" not in fresh.stderr, fresh.stdout + fresh.stderr
    assert "router.api_keys: " in fresh.stdout + fresh.stderr and bad not in fresh.stdout + fresh.stderr
    assert runtime.api.containers(all=True, filters={"label": [f"{L.PROJECT}={rt6.name}"]}) == []
    assert not list(rt6.router_dir.glob("gen-*"))
    assert rt6.run("apply", keys="sk-good-1-0123456789abcdef").returncode == 0
    again = rt6.run("apply", keys=bad)
    assert again.returncode == 1 and "Traceback" not in again.stderr
    assert rt6.status_with("sk-good-1-0123456789abcdef") == 404  # the deployed keys still hold


def test_the_schema_maximum_body_size_passes_haproxys_check(rt6):
    result = rt6.run("apply", extra=", max_body_mb: 128")
    assert result.returncode == 0, result.stdout + result.stderr
    # the buffer holds the largest body and a mebibyte more (a larger chunked body shows as over the limit)
    assert f"tune.bufsize {129 * 1024 * 1024}" in (rt6.router_dir / "live" / "haproxy.cfg").read_text()
    assert httpx.get(f"{rt6.url}/v1/models", timeout=5).json()["data"] == []


def test_a_failed_check_shows_haproxys_words_and_creates_no_router(rt6, runtime, monkeypatch, capsys):
    import aigo_apply.platforms.docker.router_deploy as router_module
    from aigo_apply.app.apply import ApplyRequest, run_apply
    from aigo_apply.cli.reporter import TextReporter

    real = router_module.render_files

    def broken(settings, routes, **kwargs):
        files = real(settings, routes, **kwargs)
        files["haproxy.cfg"] += "\nbackend broken\n    this-is-not-a-keyword\n"
        return files

    monkeypatch.setattr(router_module, "render_files", broken)
    monkeypatch.setenv("AIGO_STATE_DIR", rt6.env["AIGO_STATE_DIR"])
    assert run_apply(ApplyRequest(file=rt6.write(""), yes=True), TextReporter()) == 1
    err = capsys.readouterr().err
    assert "failed `haproxy -c`" in err and "ALERT" in err and "this-is-not-a-keyword" in err, err
    assert runtime.api.containers(all=True, filters={"label": [f"{L.PROJECT}={rt6.name}"]}) == []


def forge(runtime, name: str, project: str, **labels: str) -> str:
    """`docker run --label ...` of this project's labels on the idle image."""
    base = {L.MANAGED_BY: L.MANAGER, L.PROJECT: project, L.LABELS_VERSION: "1", **labels}
    cid = runtime.api.create_container(IDLE, name=name, labels=base)["Id"]
    runtime.api.start(cid)
    return cid


def test_forged_labels_make_nothing_crash_nor_act_outside(rt6, runtime, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("precious")
    spec = json.dumps({"config_dir": str(victim), "image": "evil:1"})
    forged = {
        "odd-router": forge(runtime, f"{rt6.name}-evil", rt6.name, **{L.ROLE: "router", L.SPEC: spec}),
        "bad-alias": forge(
            runtime, f"{rt6.name}-bad", rt6.name, **{L.ROLE: "engine", L.MODEL: "../x\nbackend", L.ENGINE: "vllm"}
        ),
        "no-dir": forge(runtime, f"aigo-{rt6.name}-router", rt6.name, **{L.ROLE: "router", L.SPEC: "{}"}),
    }
    plan = rt6.run("plan", extra="")
    out = plan.stdout + plan.stderr
    assert plan.returncode in (0, 2) and "Traceback" not in out, out
    assert f"container {rt6.name}-evil carries project '{rt6.name}' labels" in out
    assert "label io.aigo-apply.model is '../x\\nbackend'" in out
    destroyed = rt6.run("destroy", extra="")
    out = destroyed.stdout + destroyed.stderr
    assert destroyed.returncode == 0 and "Traceback" not in out, out
    assert (victim / "keep.txt").read_text() == "precious"
    left = {c["Id"] for c in runtime.api.containers(all=True, filters={"label": [f"{L.PROJECT}={rt6.name}"]})}
    assert left == {forged["odd-router"], forged["bad-alias"]}  # damaged: left alone, named in the plan
    applied = rt6.run("apply", extra="")
    out = applied.stdout + applied.stderr
    assert applied.returncode == 0 and "Traceback" not in out, out
    assert (victim / "keep.txt").read_text() == "precious" and list(victim.iterdir()) == [victim / "keep.txt"]
    assert (rt6.router_dir / "live" / "haproxy.cfg").is_file()
