"""Settings vLLM takes on its command line but fails on at start, minutes later, are caught by
validate or plan instead: a speculative method that needs a draft checkpoint
without one (the list is read from vLLM's own SpeculativeConfig by scripts/vllm_facts.py),
`gpus: all` with a tensor_parallel_size above this machine's GPUs, and a ROCm-only MoE kernel on an
NVIDIA host (a warning)."""

from __future__ import annotations

import json

import pytest

from aigo_apply.config.vllm_facts import facts, speculative_methods
from aigo_apply.desired.build import build_desired
from aigo_apply.errors import ConfigInvalid
from aigo_apply.observe.config_file import load_config
from aigo_apply.plan.host_checks import run_checks

from helpers.configs import host_context, write_config
from helpers.paths import FIXTURES

NEEDS_DRAFT = facts()["speculative_info"]["methods_needing_draft"]
HEAD = "version: 1\nproject: p\nmodels:\n  m:\n    source: {repo: Qwen/Qwen3-8B}\n    context_length: 8192\n"


def host(gpus: int) -> dict:
    base = json.loads((FIXTURES / "hosts" / "two-gpu-r570.json").read_text())
    base["nvml"] = {**base["nvml"], "driver": "580.82.07", "gpus": base["nvml"]["gpus"][:1] * gpus}
    base["nvml"]["gpus"] = [{**g, "index": i} for i, g in enumerate(base["nvml"]["gpus"])]
    return base


def checks_for(tmp_path, body: str, facts_: dict) -> dict:
    desired = build_desired(load_config(str(write_config(tmp_path, HEAD + body))), host_context())
    return {c.id: c for c in run_checks(facts_, desired, desired.vllm_image)}


def test_the_draft_list_is_a_strict_part_of_the_methods():
    assert {"eagle", "eagle3", "draft_model", "medusa"} <= set(NEEDS_DRAFT) < set(speculative_methods())
    assert "mtp" not in NEEDS_DRAFT and "ngram" not in NEEDS_DRAFT


@pytest.mark.parametrize("method", NEEDS_DRAFT)
def test_a_method_that_needs_a_draft_is_refused_without_one_and_says_why(tmp_path, method):
    path = write_config(
        tmp_path, HEAD + f"    vllm:\n      speculative: {{method: {method}, num_speculative_tokens: 3}}\n"
    )
    with pytest.raises(ConfigInvalid) as err:
        load_config(str(path))
    text = str(err.value) + "".join(str(p) for p in getattr(err.value, "problems", []))
    assert "models.m.vllm.speculative" in text and "'draft'" in text and f"'{method}'" in text, text


@pytest.mark.parametrize("method", NEEDS_DRAFT)
def test_the_same_method_with_a_draft_is_valid(tmp_path, method):
    body = (
        f"    vllm:\n      speculative: {{method: {method}, num_speculative_tokens: 3, draft: {{repo: org/draft}}}}\n"
    )
    assert load_config(str(write_config(tmp_path, HEAD + body)))


@pytest.mark.parametrize("method", sorted(set(speculative_methods()) - set(NEEDS_DRAFT) - {"suffix"}))
def test_methods_that_need_no_draft_stay_valid_without_one(tmp_path, method):
    body = f"    vllm:\n      speculative: {{method: {method}, num_speculative_tokens: 3}}\n"
    assert load_config(str(write_config(tmp_path, HEAD + body)))


@pytest.mark.parametrize(("tp", "gpus", "blocked"), [(4, 1, True), (2, 1, True), (2, 2, False), (1, 1, False)])
def test_gpus_all_with_more_tensor_parallelism_than_gpus_blocks_the_plan(tmp_path, tp, gpus, blocked):
    body = f"    gpus: all\n    vllm: {{tensor_parallel_size: {tp}}}\n"
    check = checks_for(tmp_path, body, host(gpus)).get("gpu.parallel")
    if blocked:
        assert check and check.status == "blocking", check
        assert f"tensor_parallel_size {tp} needs {tp} GPUs" in check.message and f"sees {gpus}" in check.message
        assert f"to {gpus} or less" in check.remediation
    else:
        assert check is None


def test_without_nvml_the_gpu_count_is_not_guessed(tmp_path):
    facts_ = {**host(1), "nvml": {"available": False, "problem": "no driver", "gpus": []}}
    checks = checks_for(tmp_path, "    gpus: all\n    vllm: {tensor_parallel_size: 4}\n", facts_)
    assert "gpu.parallel" not in checks and checks["nvidia.driver"].status == "blocking"


@pytest.mark.parametrize("backend", ["aiter", "aiter_triton_mxfp4_bf16", "flydsl", "rdna3"])
def test_a_rocm_only_moe_kernel_on_an_nvidia_host_is_a_warning(tmp_path, backend):
    check = checks_for(tmp_path, f"    vllm: {{moe_backend: {backend}}}\n", host(1))["engine.moe_backend"]
    assert check.status == "warning" and backend in check.message and "ROCm" in check.message


@pytest.mark.parametrize("backend", ["auto", "triton", "cutlass", "marlin", "flashinfer_cutlass"])
def test_nvidia_kernels_get_no_warning(tmp_path, backend):
    assert "engine.moe_backend" not in checks_for(tmp_path, f"    vllm: {{moe_backend: {backend}}}\n", host(1))


def test_a_missing_local_draft_folder_is_a_model_path_blocker(tmp_path):
    from aigo_apply.observe.local_sources import local_source_problems
    from aigo_apply.plan.host_checks import source_checks

    body = f"    vllm:\n      speculative: {{method: eagle3, draft: {{path: {tmp_path}/no-such-draft}}}}\n"
    desired = build_desired(load_config(str(write_config(tmp_path, HEAD + body))), host_context())
    (check,) = source_checks(local_source_problems(desired.specs()))
    assert check.id == "model.path" and check.status == "blocking"
    assert (
        "the speculative draft" in check.message
        and "no-such-draft" in check.message
        and "does not exist" in check.message
    )
