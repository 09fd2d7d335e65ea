"""Declared against effective (status): vLLM's cache config read from its own gauge, and each field
where the engine or its container runs something else than the file asks, with the reason."""

from __future__ import annotations

from dataclasses import replace

from aigo_apply.desired import labels as L
from aigo_apply.observe.containers import ObservedContainer
from aigo_apply.platforms.docker.effective import cache_config, compare

from helpers.planner_inputs import desired

# as vLLM 0.31.0's prometheus logger writes it: CacheConfig's fields as labels, engine index last
VLLM_METRICS = """# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",calculate_kv_scales="False",enable_prefix_caching="True",gpu_memory_utilization="0.9",num_cpu_blocks="None",num_gpu_blocks="2048",engine="0"} 1.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
vllm:num_requests_running{engine="0",model_name="beta"} 0.0
"""


def test_the_kv_cache_vllm_settled_on_is_read_from_its_cache_config_gauge():
    found = cache_config(VLLM_METRICS)
    assert found == {
        "kv_cache_blocks": 2048,
        "block_size": 16,
        "kv_cache_tokens": 32768,
        "gpu_memory_utilization": 0.9,
        "kv_cache_dtype": "auto",
    }
    assert cache_config("vllm:num_requests_running 0\n") == {}
    assert (
        cache_config(VLLM_METRICS.replace('num_gpu_blocks="2048"', 'num_gpu_blocks="None"'))["kv_cache_tokens"] is None
    )


def running(model, **changes):
    c = model.container
    base = ObservedContainer(
        id="id-1",
        name=c.name,
        state="running",
        status="Up",
        exit_code=None,
        image=c.image,
        image_id="sha256:" + "a" * 64,
        labels=dict(c.labels),
    )
    return replace(base, **changes)


def test_what_matches_the_file_is_no_drift(tmp_path):
    model = desired(tmp_path).models["beta"]
    engine = {"served_names": ["beta"], "max_model_len": 8192, "gpu_memory_utilization": 0.9}
    effective, drift = compare(
        model, running(model), engine, {"cmd": list(model.container.command)}, "sha256:" + "a" * 64
    )
    assert drift == [] and effective["max_model_len"] == 8192 and effective["command"] == list(model.container.command)


def test_each_field_that_differs_is_flagged_with_its_reason(tmp_path):
    model = desired(tmp_path).models["beta"]
    engine = {"served_names": ["other"], "max_model_len": 4096, "gpu_memory_utilization": 0.8}
    cmd = [*model.container.command, "--enforce-eager"]
    _, drift = compare(model, running(model), engine, {"cmd": cmd}, "sha256:" + "b" * 64)
    by_field = {d["field"]: d for d in drift}
    assert set(by_field) == {"served_names", "max_model_len", "gpu_memory_utilization", "image", "command"}
    assert by_field["max_model_len"]["file"] == 8192 and by_field["max_model_len"]["effective"] == 4096
    assert "capped" in by_field["max_model_len"]["why"]
    assert "names another image now" in by_field["image"]["why"]


def test_a_container_made_before_the_file_changed_says_so(tmp_path):
    model = desired(tmp_path).models["beta"]
    older = dict(model.container.labels)
    older[L.SPEC] = older[L.SPEC].replace('"context_length":8192', '"context_length":4096')
    assert older[L.SPEC] != model.container.labels[L.SPEC]
    _, drift = compare(model, running(model, labels=older), {"max_model_len": 4096}, {}, None)
    assert [d["why"] for d in drift if d["field"] == "max_model_len"] == [
        "the container was made before the file changed it (`aigo-apply plan` shows the replace)"
    ]


def test_nothing_is_compared_for_a_model_that_does_not_run(tmp_path):
    model = desired(tmp_path).models["beta"]
    _, drift = compare(model, running(model, state="exited"), {"max_model_len": 1}, {}, "sha256:x")
    assert drift == []
    assert compare(None, running(model), {"max_model_len": 1}, {}, None)[1] == []
