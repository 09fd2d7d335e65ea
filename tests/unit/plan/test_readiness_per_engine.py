"""Readiness judges each engine's image by its own rule: the vLLM CUDA 13 rule (R580+) holds only
files with a vLLM model on a GPU; an SGLang or llama.cpp image is checked when its tag names its CUDA
version and otherwise gets a warning that says the requirement is unknown; the "install the driver"
fix names what the file's images need (not R580 for a -cu129 tag); and a host without any container
engine gets the install remedy."""

from __future__ import annotations

import json

import pytest

from aigo_apply.adapters.host import docker_facts, docker_installed
from aigo_apply.desired.build import build_desired
from aigo_apply.errors import DockerUnavailable
from aigo_apply.observe.config_file import load_config
from aigo_apply.plan.host_checks import image_cuda, run_checks

from helpers.configs import host_context, write_config
from helpers.paths import FIXTURES

HEAD = "version: 1\nproject: p\n"
SGLANG = "engines: {sglang: {image_tag: TAG}}\nmodels:\n  s: {source: {path: /m}, context_length: 9, engine: sglang}\n"
LLAMA = (
    "engines: {llama.cpp: {image_tag: TAG}}\n"
    "models:\n  g: {source: {path: /m/x.gguf}, context_length: 9, engine: llama.cpp}\n"
)
VLLM = "models:\n  v: {source: {path: /m}, context_length: 9}\n"
NO_NVML = {"available": False, "problem": "NVML could not start: Driver Not Loaded", "gpus": []}


def host(name: str = "two-gpu-r570") -> dict:
    return json.loads((FIXTURES / "hosts" / f"{name}.json").read_text())


def checks_for(tmp_path, body: str, facts: dict) -> dict:
    desired = build_desired(load_config(str(write_config(tmp_path, HEAD + body))), host_context())
    return {c.id: c for c in run_checks(facts, desired, desired.vllm_image)}


@pytest.mark.parametrize("body", [SGLANG.replace("TAG", "v0.5.6-cu129"), LLAMA.replace("TAG", "server-cuda")])
def test_an_sglang_or_llama_cpp_file_is_not_held_to_the_vllm_rule(tmp_path, body):
    checks = checks_for(tmp_path, body, host("two-gpu-r570"))  # driver 570: too old for vLLM's CUDA 13 image
    assert "nvidia.driver" not in checks  # the vLLM check: no vLLM model here
    assert not any(c.status == "blocking" for c in checks.values()), checks
    assert not any("engines.vllm" in c.remediation or "vllm" in c.message for c in checks.values())


def test_sglang_with_a_cuda12_tag_fits_an_r570_driver_and_a_cuda13_tag_does_not(tmp_path):
    ok = checks_for(tmp_path, SGLANG.replace("TAG", "v0.5.6-cu129"), host())["nvidia.driver.sglang"]
    assert (ok.status, ok.message) == ("ok", "driver 570.172.08 fits lmsysorg/sglang:v0.5.6-cu129")
    old = checks_for(tmp_path, SGLANG.replace("TAG", "v0.5.6-cu130"), host())["nvidia.driver.sglang"]
    assert old.status == "blocking"
    assert (
        old.message
        == "driver 570.172.08 is older than R580, which the CUDA 13 image lmsysorg/sglang:v0.5.6-cu130 needs"
    )
    assert old.remediation == (
        "upgrade the driver to R580+, or set engines.sglang.image_tag to a tag built for CUDA 12"
    )


def test_an_image_whose_cuda_version_is_unknown_gets_a_warning_not_a_guess(tmp_path):
    check = checks_for(tmp_path, LLAMA.replace("TAG", "server-cuda"), host())["nvidia.driver.llama.cpp"]
    assert check.status == "warning"
    assert "which CUDA version ghcr.io/ggml-org/llama.cpp:server-cuda is built for is not known" in check.message
    assert "R580" not in check.message + check.remediation


def test_the_vllm_rule_still_holds_a_vllm_model_beside_the_others(tmp_path):
    body = (
        "engines: {sglang: {image_tag: v0.5.6-cu129}}\nmodels:\n"
        "  v: {source: {path: /m}, context_length: 9, vllm: {gpu_memory_utilization: 0.4}}\n"
        "  s: {source: {path: /n}, context_length: 9, engine: sglang, sglang: {gpu_memory_utilization: 0.4}}\n"
    )
    checks = checks_for(tmp_path, body, host())
    assert checks["nvidia.driver"].status == "blocking"
    assert checks["nvidia.driver"].remediation.startswith("set `engines.vllm.image_tag: v0.31.0-cu129`")
    assert checks["nvidia.driver.sglang"].status == "ok"


def test_without_nvml_the_install_fix_names_what_the_images_need(tmp_path):
    def fix(body: str) -> str:
        facts = {**host(), "nvml": NO_NVML}
        check = checks_for(tmp_path, body, facts)["nvidia.driver"]
        assert check.status == "blocking" and "no NVIDIA driver answers" in check.message
        return check.remediation

    default = fix(VLLM)
    assert default.startswith("Install the NVIDIA driver, R580 or newer for the CUDA 13 image vllm/vllm-openai:v0.31.0")
    cu129 = fix("engines: {vllm: {image_tag: v0.31.0-cu129}}\n" + VLLM)
    assert "R580" not in cu129
    assert cu129.startswith(
        "Install the NVIDIA driver, R525 or newer for the CUDA 12 image vllm/vllm-openai:v0.31.0-cu129"
    )
    sglang = fix(SGLANG.replace("TAG", "v0.5.6-cu129"))
    assert "R580" not in sglang and "vllm" not in sglang
    llama = fix(LLAMA.replace("TAG", "server-cuda"))
    assert "R580" not in llama and "R525" not in llama
    assert "which driver ghcr.io/ggml-org/llama.cpp:server-cuda needs is not known to aigo-apply" in llama


@pytest.mark.parametrize(
    "engine, tag, cuda",
    [
        ("vllm", "v0.31.0", 13),
        ("vllm", "v0.31.0-cu129", 12),
        ("vllm", "nightly", 13),
        ("sglang", "v0.5.6-cu129", 12),
        ("sglang", "v0.5.6-cu130", 13),
        ("sglang", "latest", None),
        ("llama.cpp", "server-cuda", None),
        ("llama.cpp", "server-cuda-b6000", None),
    ],
)
def test_the_cuda_version_of_an_image_comes_from_its_tag(engine, tag, cuda):
    assert image_cuda(engine, tag) == cuda


class _Unreachable:
    def __init__(self, text: str):
        self.text = text

    def info(self):
        raise DockerUnavailable(self.text)


@pytest.mark.parametrize(
    "text, installed, problem",
    [
        ("cannot reach the Docker engine at unix:///var/run/docker.sock; start it", False, "missing"),
        ("cannot reach the Docker engine at unix:///var/run/docker.sock; start it", True, "down"),
        ("permission denied on the Docker socket (unix:///var/run/docker.sock)", True, "permission"),
    ],
)
def test_docker_not_installed_is_told_apart_from_docker_down(tmp_path, text, installed, problem):
    facts = docker_facts(lambda: _Unreachable(text), installed=lambda: installed)
    assert facts["problem"] == problem
    check = checks_for(tmp_path, VLLM.replace("9}", "9, gpus: none}"), {"docker": facts, "nvml": {}})["docker.engine"]
    fixes = {"missing": "Install Docker", "down": "Start the Docker service", "permission": "Add your user"}
    assert check.status == "blocking" and check.remediation.startswith(fixes[problem])


def test_what_counts_as_an_installed_engine():
    nothing = {"which": lambda name: None, "exists": lambda path: False}
    assert not docker_installed({"XDG_RUNTIME_DIR": "/run/user/1000"}, **nothing)
    assert docker_installed(
        {}, which=lambda name: "/usr/bin/podman" if name == "podman" else None, exists=nothing["exists"]
    )
    assert docker_installed({}, which=nothing["which"], exists=lambda path: path == "/var/run/docker.sock")
    rootless = {"XDG_RUNTIME_DIR": "/run/user/1000"}
    assert docker_installed(rootless, which=nothing["which"], exists=lambda p: p == "/run/user/1000/podman/podman.sock")
    assert docker_installed({"DOCKER_HOST": "tcp://10.0.0.5:2376"}, **nothing)  # an engine elsewhere
    assert docker_installed(
        {"DOCKER_HOST": "unix:///srv/d.sock"}, which=nothing["which"], exists=lambda p: p == "/srv/d.sock"
    )
