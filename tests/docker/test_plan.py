"""`aigo-apply plan` against the real Docker daemon, over real labelled containers that the tests
create from the desired container specs (the local idle image stands in for the engine image), and
its colours: on a terminal only, never with NO_COLOR."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from aigo_apply.platforms.docker.planning import load_desired

from helpers.cli import run_cli
from helpers.configs import free_port, model_folder, router_yaml, write_config
from helpers.paths import ROOT

PORTS: dict[str, int] = {}


def config(tmp_path, project, parser="hermes", extra_model="", router_port=None):
    model_folder(tmp_path / "m")
    return write_config(
        tmp_path,
        textwrap.dedent(f"""
        version: 1
        project: {project}
        engines: {{vllm: {{image: aigo-stub-engine, image_tag: "1"}}}}
        {router_yaml(router_port or PORTS.setdefault(project, free_port()))}
        models:
          chat:
            source: {{path: m}}
            context_length: 4096
            gpus: none
            vllm: {{tool_call_parser: {parser}}}
          tools:
            source: {{path: m}}
            context_length: 8K
            gpus: none
        """)
        + extra_model,
    )


def materialize(runtime, path, only=None):
    """Make the machine match the file with the real `aigo-apply apply` (engines and router)."""
    args = ["apply", "-f", str(path), "-y"] + [a for alias in (only or []) for a in ("--target", alias)]
    result = run_cli(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    return {
        c["Labels"]["io.aigo-apply.model"]: c["Id"]
        for c in runtime.list_containers()
        if c["Names"][0].startswith(f"/aigo-{path_project(path)}-") and "io.aigo-apply.model" in c["Labels"]
    }


def path_project(path):
    return next(line.split(":", 1)[1].strip() for line in path.read_text().splitlines() if line.startswith("project:"))


def plan_json(path, *extra):
    result = run_cli("plan", "-f", str(path), "--output", "json", *extra)
    assert result.returncode in (0, 2), result.stderr
    return json.loads(result.stdout), result.returncode


def test_empty_docker_plans_one_create_per_model(runtime, project, tmp_path):
    path = config(tmp_path, project)
    result = run_cli("plan", "-f", str(path), "--detailed-exitcode")
    assert result.returncode == 2, result.stderr
    assert "# model.chat will be created" in result.stdout
    assert "# model.tools will be created" in result.stdout
    assert "# router will be created" in result.stdout
    assert (
        "Plan: 0 to pull, 3 to create, 0 to replace, 0 to start, 0 to remove, 0 to reload; 0 unchanged."
        in result.stdout
    )


def test_existing_containers_plan_no_changes_then_changed_parser_recreates(runtime, project, tmp_path):
    path = config(tmp_path, project)
    ids = materialize(runtime, path)
    result = run_cli("plan", "-f", str(path), "--detailed-exitcode")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("No changes.")

    path = config(tmp_path, project, parser="qwen3_coder")
    plan, code = plan_json(path, "--detailed-exitcode")
    assert code == 2
    recreate = [a for a in plan["actions"] if a["kind"] == "recreate"]
    assert [a["address"] for a in recreate] == ["model.chat"]
    assert recreate[0]["reasons"] == ["vllm.tool_call_parser changed"]
    assert recreate[0]["changes"] == [
        {"path": "vllm.tool_call_parser", "before": "hermes", "after": "qwen3_coder", "effect": "recreate"}
    ]
    text = run_cli("plan", "-f", str(path)).stdout
    assert "# model.chat will be replaced\n    (because vllm.tool_call_parser changed)" in text
    assert '~ vllm.tool_call_parser: "hermes" -> "qwen3_coder"' in text
    still = {c["Id"] for c in runtime.list_containers()}
    assert set(ids.values()) <= still  # plan touched nothing


def test_stopped_container_plans_start(runtime, project, tmp_path):
    path = config(tmp_path, project)
    ids = materialize(runtime, path)
    runtime.stop(ids["tools"], timeout=5)
    plan, _ = plan_json(path)
    kinds = {a["address"]: (a["kind"], a["reasons"]) for a in plan["actions"]}
    assert kinds["model.tools"] == ("start", ["container is exited (exit code 0)"])
    assert kinds["router"] == ("reload_router", ["stale route: model tools has no running container (exited)"])
    assert kinds["model.chat"][0] == "noop"


def test_model_removed_from_file_plans_remove(runtime, project, tmp_path):
    extra = "  extra:\n    source: {path: m}\n    context_length: 2048\n    gpus: none\n"
    materialize(runtime, config(tmp_path, project, extra_model=extra))
    plan, _ = plan_json(config(tmp_path, project))
    assert [(a["address"], a["kind"]) for a in plan["actions"] if a["kind"] != "noop"] == [
        ("model.extra", "remove"),
        ("router", "reload_router"),
    ]
    assert plan["summary"]["remove"] == 1 and plan["summary"]["noop"] == 2
    router = [a for a in plan["actions"] if a["address"] == "router"][0]
    assert router["kind"] == "reload_router" and router["reasons"] == ["route for model extra to be removed"]


def test_foreign_container_holding_a_port_blocks_the_plan(runtime, project, tmp_path, foreign):
    path = config(tmp_path, project, extra_model=f"    port: {free_port()}\n")  # tools asks for a port
    port = load_desired(str(path)).models["tools"].container.host_port
    assert port is not None
    foreign(f"{project}-squatter", host_port=port)
    result = run_cli("plan", "-f", str(path))
    assert result.returncode == 1
    assert "The plan is blocked (1):" in result.stdout
    assert f"conflict.port: port {port} of model 'tools' is published by container {project}-squatter" in result.stdout
    assert "set models.tools.port to a free port" in result.stdout


def test_another_projects_router_on_our_router_port_blocks_plan_and_apply(runtime, project, tmp_path):
    """Both routers would bind the port on the host network (HAProxy sets SO_REUSEPORT), and the
    kernel would share the connections between the two projects: refused before anything starts."""
    first = config(tmp_path / "a", project)
    materialize(runtime, first)
    port = load_desired(str(first)).router.port
    second_project = project + "b"
    second = config(tmp_path / "b", second_project, router_port=port)
    result = run_cli("plan", "-f", str(second))
    assert result.returncode == 1, result.stdout + result.stderr
    assert (
        f"conflict.port: the router's port {port} is held by the router of aigo-apply project '{project}' "
        f"(container aigo-{project}-router)"
    ) in result.stdout
    applied = run_cli("apply", "-f", str(second), "-y")
    assert applied.returncode != 0 and "The plan is blocked" in applied.stdout
    assert not [c for c in runtime.list_containers() if c["Names"][0].startswith(f"/aigo-{second_project}-")]


def test_foreign_container_holding_our_name_blocks_the_plan(runtime, project, tmp_path, foreign):
    path = config(tmp_path, project)
    foreign(f"aigo-{project}-chat")
    plan_out = run_cli("plan", "-f", str(path), "--output", "json")
    assert plan_out.returncode == 1
    blockers = json.loads(plan_out.stdout)["blockers"]
    assert blockers[0]["id"] == "conflict.name" and blockers[0]["address"] == "model.chat"


def test_saved_plan_has_fingerprint_of_what_was_observed(runtime, project, tmp_path):
    path = config(tmp_path, project)
    out = tmp_path / "plan.json"
    assert run_cli("plan", "-f", str(path), "--out", str(out)).returncode == 0
    first = json.loads(out.read_text())
    assert first["fingerprint"].startswith("sha256:") and first["format_version"] == 1
    materialize(runtime, path, only={"chat"})
    run_cli("plan", "-f", str(path), "--out", str(out))
    assert json.loads(out.read_text())["fingerprint"] != first["fingerprint"]


def test_plan_with_docker_unreachable_is_a_clear_error(tmp_path, project):
    path = config(tmp_path, project)
    result = run_cli("plan", "-f", str(path), env={"DOCKER_HOST": f"unix://{tmp_path}/no.sock"})
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: cannot reach the Docker engine at unix://{tmp_path}/no.sock")
    assert "Traceback" not in result.stderr


def test_image_inspect_reports_reference_and_local_presence(runtime, project, tmp_path):
    path = config(tmp_path, project)
    info = json.loads(run_cli("image", "inspect", "vllm", "-f", str(path), "--output", "json").stdout)
    assert info["image_reference"] == "aigo-stub-engine:1" and info["tag_overridden"] is True
    assert info["present"] is True and info["id"].startswith("sha256:")
    text = path.read_text().replace('image: aigo-stub-engine, image_tag: "1"', "image_tag: v0.31.0-cu129")
    path.write_text(text)
    info = json.loads(run_cli("image", "inspect", "vllm", "-f", str(path), "--output", "json").stdout)
    assert (info["image_reference"], info["default_tag"], info["tag_overridden"], info["present"]) == (
        "vllm/vllm-openai:v0.31.0-cu129",
        "v0.31.0",
        True,
        False,
    )


def test_colours_only_on_a_terminal_and_never_with_no_color(runtime, project, tmp_path):
    if not shutil.which("script"):
        pytest.skip("util-linux `script` is needed to give the CLI a terminal")
    demo = tmp_path / "demo.yaml"  # the demo under a project of its own, so a running demo does not matter
    demo.write_text(
        (ROOT / "examples" / "demo.yaml")
        .read_text()
        .replace("project: demo", f"project: {project}")
        .replace("demo-models/", f"{ROOT}/examples/demo-models/")
    )
    command = f"{sys.executable} -m aigo_apply plan -f {demo}"
    on_tty = subprocess.run(["script", "-qec", command, "/dev/null"], capture_output=True, text=True, cwd=tmp_path)
    assert "\x1b[" in on_tty.stdout and "will be created" in on_tty.stdout
    piped = subprocess.run(command.split(), capture_output=True, text=True, cwd=tmp_path)
    assert "will be created" in piped.stdout and "\x1b[" not in piped.stdout + piped.stderr
    no_color = subprocess.run(
        ["script", "-qec", command, "/dev/null"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert "will be created" in no_color.stdout and "\x1b[" not in no_color.stdout
