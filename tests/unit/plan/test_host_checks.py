"""Readiness checks on recorded host facts (tests/fixtures/hosts: an RTX 5090 box, an RTX Pro 6000
with CDI devices, a DGX Spark GB10, a two-GPU box on an R570 driver). The real host here:
tests/docker/test_readiness.py."""

from __future__ import annotations

import json

import pytest

from aigo_apply.adapters.host import docker_facts_from_info
from aigo_apply.desired.build import build_desired
from aigo_apply.observe.config_file import load_config
from aigo_apply.observe.containers import parse_state
from aigo_apply.plan.facts import PlanFacts, PlanRequest
from aigo_apply.plan.host_checks import run_checks
from aigo_apply.plan.planner import build_plan

from helpers.configs import host_context, write_config
from helpers.paths import EXAMPLES, FIXTURES

HOSTS = FIXTURES / "hosts"


def facts(name: str) -> dict:
    return json.loads((HOSTS / f"{name}.json").read_text())


def desired_of(tmp_path, example=None, text=None):
    path = EXAMPLES / example if example else write_config(tmp_path, text)
    return build_desired(load_config(str(path)), host_context())


def statuses(checks):
    return {c.id: c.status for c in checks}


@pytest.mark.parametrize(
    "host, example",
    [("rtx5090", "single-gpu.yaml"), ("rtx-pro-6000", "two-models-one-gpu.yaml"), ("gb10", "dgx-spark-nemotron.yaml")],
)
def test_supported_hosts_are_ready(tmp_path, host, example):
    d = desired_of(tmp_path, example)
    checks = run_checks(facts(host), d, d.vllm_image)
    assert statuses(checks) == {
        "docker.engine": "ok",
        "docker.gpu_runtime": "ok",
        "nvidia.driver": "ok",
        "nvidia.gpu_index": "ok",
    }


def test_old_driver_blocks_the_cuda13_image_with_the_tag_remedy(tmp_path):
    d = desired_of(tmp_path, "single-gpu.yaml")
    checks = {c.id: c for c in run_checks(facts("two-gpu-r570"), d, d.vllm_image)}
    assert checks["nvidia.driver"].status == "blocking"
    assert checks["nvidia.driver"].message == (
        "driver 570.172.08 is older than R580, which the CUDA 13 image vllm/vllm-openai:v0.31.0 needs"
    )
    assert checks["nvidia.driver"].remediation == (
        "set `engines.vllm.image_tag: v0.31.0-cu129` (or upgrade the driver to R580+)"
    )
    text = (EXAMPLES / "single-gpu.yaml").read_text() + "engines: {vllm: {image_tag: v0.31.0-cu129}}\n"
    cu12 = desired_of(tmp_path, text=text)
    assert statuses(run_checks(facts("two-gpu-r570"), cu12, cu12.vllm_image))["nvidia.driver"] == "ok"


def test_missing_gpu_index_and_missing_toolkit(tmp_path):
    text = (
        "version: 1\nproject: p\nmodels:\n  a: {source: {path: /m}, context_length: 9, gpus: [1, 2],"
        " vllm: {gpu_memory_utilization: 0.4}}\n"
    )
    d = desired_of(tmp_path, text=text)
    host = facts("two-gpu-r570")
    checks = {c.id: c for c in run_checks(host, d, {"tag": "v0.31.0-cu129", "image_reference": "x"})}
    assert checks["nvidia.gpu_index"].message == "GPU 2 does not exist: this machine has 2 GPUs (0-1)"
    host["docker"]["runtimes"] = ["runc"]
    checks = {c.id: c for c in run_checks(host, d, {"tag": "v0.31.0-cu129", "image_reference": "x"})}
    assert checks["docker.gpu_runtime"].status == "blocking"
    assert checks["docker.gpu_runtime"].remediation.startswith("Install the NVIDIA Container Toolkit")


@pytest.mark.parametrize(
    "docker, status, remediation",
    [
        ({"reachable": False, "problem": "permission", "detail": "x"}, "blocking", "Add your user to the docker group"),
        ({"reachable": False, "problem": "down", "detail": "x"}, "blocking", "Start the Docker service"),
        ({"reachable": False, "problem": "missing", "detail": "x"}, "blocking", "Install Docker"),
    ],
)
def test_docker_problems_name_the_one_step(tmp_path, docker, status, remediation):
    d = desired_of(tmp_path, "demo.yaml")
    check = run_checks({"docker": docker, "nvml": {}}, d, d.vllm_image)[0]
    assert (check.id, check.status) == ("docker.engine", status) and check.remediation.startswith(remediation)


def test_podman_counts_as_a_supported_engine():
    info = {
        "ServerVersion": "5.4.2",
        "Components": [{"Name": "Podman Engine", "Version": "5.4.2"}],
        "Runtimes": {"crun": {}},
        "DiscoveredDevices": [{"Source": "cdi", "ID": "nvidia.com/gpu=all"}],
    }
    parsed = docker_facts_from_info(info)
    assert parsed["engine"] == "Podman" and parsed["cdi_devices"] == ["nvidia.com/gpu=all"]


def test_blocking_checks_become_plan_blockers_unless_ignored(tmp_path):
    d = desired_of(tmp_path, "single-gpu.yaml")
    checks = run_checks(facts("two-gpu-r570"), d, d.vllm_image)
    plan = build_plan(d, parse_state(d.project, [], []), PlanFacts(checks=tuple(checks)))
    assert [(b.id, b.address) for b in plan.blockers] == [("nvidia.driver", "host")]
    plan = build_plan(
        d,
        parse_state(d.project, [], []),
        PlanFacts(checks=tuple(checks)),
        PlanRequest(ignore=frozenset(["nvidia.driver"])),
    )
    assert plan.blockers == () and any("readiness check nvidia.driver ignored" in w for w in plan.warnings)
