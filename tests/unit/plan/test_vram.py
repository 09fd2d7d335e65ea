"""The VRAM estimate and the per-GPU ledger, checked against figures computed by hand: weights from
real safetensors files (written with the safetensors library), KV cache from config.json or from a
real GGUF file's metadata (written with llama.cpp's gguf library), host facts recorded from real
machines (tests/fixtures/hosts)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from aigo_apply.adapters.host import container_id_from_cgroup
from aigo_apply.desired.build import build_desired
from aigo_apply.desired.model_store import repo_dir
from aigo_apply.observe import gguf as gguf_reader
from aigo_apply.observe.config_file import load_config
from aigo_apply.observe.containers import parse_state
from aigo_apply.observe.model_files import model_facts
from aigo_apply.plan import gpu_ledger
from aigo_apply.plan.facts import PlanFacts, PlanRequest
from aigo_apply.plan.planner import build_plan
from aigo_apply.plan.vram import GIB, OVERHEAD_BYTES, estimate

from helpers.configs import host_context, write_config
from helpers.paths import EXAMPLES, FIXTURES, ROOT

HOSTS = FIXTURES / "hosts"
TINY_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "num_hidden_layers": 3,
    "torch_dtype": "float16",
    "vocab_size": 100,
    "intermediate_size": 96,
}
# name -> (safetensors dtype, shape); two shards, as a real checkpoint has
SHARDS = {
    "model-00001-of-00002.safetensors": {
        "model.embed_tokens.weight": ("float16", [100, 64]),
        "model.layers.0.mlp.up_proj.weight": ("float16", [96, 64]),
    },
    "model-00002-of-00002.safetensors": {
        "model.norm.weight": ("float32", [64]),
        "lm_head.weight": ("float16", [100, 64]),
    },
}
BYTES = {"float16": 2, "float32": 4}


def nvml(name: str) -> dict:
    return json.loads((HOSTS / f"{name}.json").read_text())["nvml"]


def make_tiny_model(folder: Path, config: dict | None = None) -> int:
    """A real (tiny) safetensors checkpoint; returns its weight bytes computed by hand."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config or TINY_CONFIG))
    weight_map, total = {}, 0
    for shard, tensors in SHARDS.items():
        data = {}
        for name, (dtype, shape) in tensors.items():
            data[name] = np.zeros(shape, dtype=dtype)
            weight_map[name], total = shard, total + math.prod(shape) * BYTES[dtype]
        save_file(data, str(folder / shard), {"format": "pt"})
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    # a consolidated copy of the same weights, as some repos carry: the index says it is not loaded
    save_file({"all": np.zeros([total // 2], dtype="float16")}, str(folder / "consolidated.safetensors"))
    return total


def test_weights_come_from_the_safetensors_headers_of_the_indexed_files(tmp_path):
    expected = (100 * 64 + 96 * 64 + 100 * 64) * 2 + 64 * 4
    assert make_tiny_model(tmp_path / "m") == expected
    facts = model_facts({"model_dir": str(tmp_path / "m")})
    assert facts["weights"] == expected and facts["found"] == "safetensors headers of 2 files"
    assert facts["config"]["num_hidden_layers"] == 3


def test_kv_cache_per_token_by_hand_and_split_by_tensor_parallelism():
    est = estimate(TINY_CONFIG, 1000, 4096)
    per_token = 2 * 3 * 2 * 16 * 2  # K and V x layers x KV heads x head size x fp16
    assert est.kv_bytes_per_token == per_token and est.kv_cache == per_token * 4096
    assert est.total == 1000 + per_token * 4096 + OVERHEAD_BYTES
    tp2 = estimate(TINY_CONFIG, 1000, 4096, tp=2)
    assert tp2.weights == 500 and tp2.kv_bytes_per_token == per_token / 2
    tp4 = estimate(TINY_CONFIG, 1000, 4096, tp=4)  # 2 KV heads over 4 GPUs: each GPU keeps one
    assert tp4.kv_bytes_per_token == per_token / 2
    fp8 = estimate(TINY_CONFIG, 1000, 4096, kv_cache_dtype="fp8")
    assert fp8.kv_bytes_per_token == per_token / 2


def test_mla_sliding_window_and_hybrid_mamba_layouts():
    mla = {
        "num_hidden_layers": 61,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "hidden_size": 7168,
        "torch_dtype": "bfloat16",
    }
    assert estimate(mla, 0, 1000).kv_bytes_per_token == 61 * (512 + 64) * 2
    assert estimate(mla, 0, 1000, tp=8).kv_bytes_per_token == 61 * (512 + 64) * 2  # the latent is not split

    sliding = {
        **TINY_CONFIG,
        "num_hidden_layers": 4,
        "sliding_window": 128,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
    }
    per_layer = 2 * 2 * 16 * 2
    assert estimate(sliding, 0, 1000).kv_cache == per_layer * (2 * 1000 + 2 * 128)

    nemotron_h = {
        **TINY_CONFIG,
        "num_hidden_layers": 9,
        "hybrid_override_pattern": "M-M*-M-M*",
        "mamba_num_heads": 8,
        "mamba_head_dim": 16,
        "ssm_state_size": 32,
        "n_groups": 2,
        "conv_kernel": 4,
    }
    est = estimate(nemotron_h, 0, 1000)
    assert est.kv_bytes_per_token == 2 * 2 * 2 * 16 * 2  # only the two attention layers ("*")
    ssm = 8 * 16 * 32 * 4  # float32 SSM state, vLLM's default for Nemotron-H
    conv = (8 * 16 + 2 * 2 * 32) * (4 - 1) * 2
    assert est.mamba_state == 4 * (ssm + conv)

    jamba = {
        **TINY_CONFIG,
        "num_hidden_layers": 8,
        "attn_layer_period": 4,
        "attn_layer_offset": 2,
        "mamba_d_state": 16,
        "mamba_expand": 2,
        "mamba_d_conv": 4,
    }
    est = estimate(jamba, 0, 1000)
    assert est.kv_bytes_per_token == 2 * 2 * 2 * 16 * 2  # layers 2 and 6
    assert est.mamba_state == 6 * (128 * 16 * 4 + 128 * 3 * 2)


def test_processes_are_told_apart_by_their_container():
    cid = "ab" * 32
    assert container_id_from_cgroup(f"0::/system.slice/docker-{cid}.scope\n") == cid
    assert container_id_from_cgroup(f"12:memory:/docker/{cid}\n11:cpu:/docker/{cid}\n") == cid
    assert container_id_from_cgroup("0::/user.slice/user-1000.slice/session-2.scope\n") is None


def example_desired(example: str, store: Path):
    desired = build_desired(load_config(str(EXAMPLES / example)), host_context(store))
    facts = {}
    for alias, model in desired.models.items():
        source = model.spec["source"]
        make_tiny_model(repo_dir(store, source["repo"], source["revision"]))
        facts[alias] = model_facts(model.spec)
    return desired, facts


def test_ledger_of_the_single_gpu_example_on_an_rtx_5090(tmp_path):
    desired, facts = example_desired("single-gpu.yaml", tmp_path)
    rows = gpu_ledger.build(desired, nvml("rtx5090"), facts, ours=set())
    (row,) = rows
    total = 34190917632
    assert (row["memory_total"], row["memory_held_by_others"], row["memory_free"]) == (
        total,
        1073741824,
        total - 1073741824,
    )
    (m,) = row["models"]
    weights = (100 * 64 + 96 * 64 + 100 * 64) * 2 + 64 * 4
    kv = 2 * 3 * 2 * 16 * 2 * 32768  # context_length 32K = 32768 tokens
    assert m["fraction"] == 0.85 and m["budget"] == int(0.85 * total)
    assert (m["estimate"]["weights"], m["estimate"]["kv_cache"], m["estimate"]["total"]) == (
        weights,
        kv,
        weights + kv + OVERHEAD_BYTES,
    )
    assert m["verdict"] == "ok" and row["verdict"] == "ok"
    assert [c.status for c in gpu_ledger.checks(rows)] == ["ok", "ok"]
    assert row["other_processes"] == [{"pid": 2211, "name": "Xorg", "used": 536870912}]


def test_ledger_of_the_two_model_example_shares_one_rtx_pro_6000(tmp_path):
    desired, facts = example_desired("two-models-one-gpu.yaml", tmp_path)
    (row,) = gpu_ledger.build(desired, nvml("rtx-pro-6000"), facts, ours=set())
    total = 102642810880
    assert [(m["alias"], m["fraction"], m["budget"]) for m in row["models"]] == [
        ("chat", 0.45, int(0.45 * total)),
        ("coder", 0.5, int(0.5 * total)),
    ]
    assert row["fraction_sum"] == 0.95 and row["budget_sum"] == int(0.45 * total) + int(0.5 * total)
    assert row["verdict"] == "ok" and [m["verdict"] for m in row["models"]] == ["ok", "ok"]
    # fractions adding up to exactly 1.0 pass validation, but the driver holds 0.7 GiB: the second
    # engine would find less free memory than its budget and exit at start-up; the ledger says so first
    full = nvml("rtx-pro-6000")
    desired.models["coder"].spec["vllm"]["gpu_memory_utilization"] = 0.55
    (row,) = gpu_ledger.build(desired, full, facts, ours=set())
    assert row["fraction_sum"] == 1.0
    assert row["verdict"] == "blocking" and "only 94.9 GiB is free (0.7 GiB held by other processes" in row["message"]


def test_ledger_on_gb10_unified_memory_warns_instead_of_blocking(tmp_path):
    desired, facts = example_desired("dgx-spark-nemotron.yaml", tmp_path)
    rows = gpu_ledger.build(desired, nvml("gb10"), facts, ours=set())
    assert rows[0]["unified_memory"] and rows[0]["models"][0]["budget"] == int(0.85 * 128526266368)
    assert rows[0]["verdict"] == "ok"
    crowded = nvml("gb10")
    crowded["gpus"][0]["memory_used"] = 40 * GIB  # the desktop and other programs share the memory
    rows = gpu_ledger.build(desired, crowded, facts, ours=set())
    assert rows[0]["verdict"] == "warning"


TWO_GPU = """
version: 1
project: lab
models:
  big:
    source: {path: big}
    context_length: 131072
    gpus: [0]
  split:
    source: {path: small}
    context_length: 4096
    gpus: [1]
    vllm: {gpu_memory_utilization: 0.5}
"""


def two_gpu_models(tmp_path):
    """TWO_GPU with real checkpoints: `big` claims 64 layers x 8 KV heads x 128 in its config, so one
    full sequence of KV cache cannot fit; `small` is the tiny model."""
    big = {**TINY_CONFIG, "num_hidden_layers": 64, "num_key_value_heads": 8, "head_dim": 128}
    make_tiny_model(tmp_path / "big", big)
    make_tiny_model(tmp_path / "small")
    desired = build_desired(load_config(str(write_config(tmp_path, TWO_GPU))), host_context())
    return desired, {a: model_facts(m.spec) for a, m in desired.models.items()}


def test_verdicts_and_checks_for_fit_free_memory_and_unknown_sizes(tmp_path):
    desired, facts = two_gpu_models(tmp_path)
    host = nvml("two-gpu-r570")
    stranger, ours = "cd" * 32, "ef" * 32
    host["gpus"][1].update(
        memory_used=18 * GIB,
        processes=[
            {"pid": 77, "used": 10 * GIB, "name": "python3", "container_id": stranger},
            {"pid": 88, "used": 8 * GIB, "name": "vllm", "container_id": ours},
        ],
    )
    rows = gpu_ledger.build(desired, host, facts, ours={ours})
    big_row, split_row = rows
    # 2 x 64 layers x 8 KV heads x 128 x 2 bytes = 256 KiB per token; 131072 tokens = 32 GiB > 0.9 x 24 GiB
    assert big_row["models"][0]["estimate"]["kv_cache"] == 256 * 1024 * 131072
    assert big_row["models"][0]["verdict"] == "blocking"
    # GPU 1: our own engine's 8 GiB will be freed by the plan; the stranger's 10 GiB stays
    assert split_row["memory_held_by_others"] == 10 * GIB
    assert split_row["models"][0]["verdict"] == "ok" and split_row["verdict"] == "ok"
    checks = gpu_ledger.checks(rows)
    fit = [c for c in checks if c.id == "gpu.fit" and c.status == "blocking"]
    assert len(fit) == 1 and fit[0].message.startswith(
        "model big needs ~33.5 GiB on GPU 0 (weights 0.0 GiB + KV cache 32.0 GiB for one 131072-token sequence"
    )
    assert fit[0].remediation.startswith("lower context_length")

    host["gpus"][1]["processes"][0]["used"] = host["gpus"][1]["memory_used"] = 20 * GIB
    host["gpus"][1]["processes"].pop()
    rows = gpu_ledger.build(desired, host, facts, ours={ours})
    assert rows[1]["verdict"] == "blocking" and "pid 77 python3 20.0 GiB" in rows[1]["message"]

    facts["split"] = model_facts({"model_dir": str(tmp_path / "absent")})
    rows = gpu_ledger.build(desired, nvml("two-gpu-r570"), facts, ours=set())
    unknown = [c for c in gpu_ledger.checks(rows) if c.status == "warning"]
    assert len(unknown) == 1 and "size unknown" in unknown[0].message and "is not on this machine" in unknown[0].message


def test_blocking_fit_reaches_the_plan_and_can_be_ignored(tmp_path):
    desired, facts = two_gpu_models(tmp_path)
    rows = gpu_ledger.build(desired, nvml("two-gpu-r570"), facts, ours=set())
    observed = parse_state("lab", [], [])
    plan = build_plan(desired, observed, PlanFacts(checks=tuple(gpu_ledger.checks(rows)), gpu_ledger=tuple(rows)))
    assert [b.id for b in plan.blockers] == ["gpu.fit"] and plan.to_dict()["gpu_ledger"][0]["index"] == 0
    waived = build_plan(
        desired,
        observed,
        PlanFacts(checks=tuple(gpu_ledger.checks(rows)), gpu_ledger=tuple(rows)),
        PlanRequest(ignore=frozenset(["gpu.fit"])),
    )
    assert not waived.blockers and any("readiness check gpu.fit ignored" in w for w in waived.warnings)
    import jsonschema

    from aigo_apply.plan.text import plan_json, plan_text

    schema = json.loads((ROOT / "schemas" / "plan.schema.json").read_text())
    jsonschema.validate(json.loads(plan_json(plan)), schema)
    text = plan_text(plan)
    assert "GPU memory (estimates per GPU):" in text and "big" in text and "[blocking]" in text


def write_gguf(path: Path, tokens: int = 50_000, **extra) -> int:
    """A real (tiny) GGUF file as llama.cpp's converter writes one: the model's keys, then a tokenizer
    vocabulary of `tokens` strings, then one tensor. `extra`: more GGUFWriter add_* calls. Returns its size."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(3)
    writer.add_context_length(8192)
    writer.add_embedding_length(64)
    writer.add_head_count(4)
    writer.add_head_count_kv(extra.pop("head_count_kv", 2))
    writer.add_key_length(16)
    writer.add_value_length(16)
    for name, value in extra.items():
        getattr(writer, f"add_{name}")(value)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list([f"tok{i}" for i in range(tokens)])
    writer.add_tensor("token_embd.weight", np.zeros((100, 64), dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path.stat().st_size


def test_gguf_metadata_is_read_up_to_the_tokenizer_and_gives_attention_sizes(tmp_path):
    write_gguf(
        tmp_path / "m.gguf",
        head_count_kv=[2, 2, 4],
        sliding_window=512,
        kv_lora_rank=32,
        rope_dimension_count=8,
        ssm_state_size=16,
    )
    meta = gguf_reader.read_metadata(tmp_path / "m.gguf")
    assert meta["general.architecture"] == "llama" and meta["llama.block_count"] == 3
    assert not [k for k in meta if k.startswith("tokenizer.")]  # the vocabulary is never read
    config, notes = gguf_reader.as_config(meta)
    assert config == {
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "hidden_size": 64,
        "num_key_value_heads": 4,
        "head_dim": 16,
        "torch_dtype": "float16",
        "kv_lora_rank": 32,
        "qk_rope_head_dim": 8,
    }
    assert notes == [
        "GGUF metadata (llama), f16 KV cache",
        "sliding-window layers counted at full length",
        "recurrent (SSM) state not counted; attention layers taken as every layer",
    ]
    assert gguf_reader.as_config({"general.architecture": "llama"})[0] is None
    with pytest.raises(ValueError, match="not a GGUF file"):
        gguf_reader.read_metadata(_not_gguf(tmp_path))
    data = (tmp_path / "m.gguf").read_bytes()
    (tmp_path / "cut.gguf").write_bytes(data[:60])
    with pytest.raises(ValueError, match="ends early"):
        gguf_reader.read_metadata(tmp_path / "cut.gguf")


def _not_gguf(tmp_path: Path) -> Path:
    (tmp_path / "x.gguf").write_bytes(b"x" * 4096)
    return tmp_path / "x.gguf"


@pytest.mark.parametrize("gpus, tp", [("[1]", 1), ("all", 2)])
def test_a_gguf_models_kv_cache_is_estimated_from_its_metadata(tmp_path, gpus, tp):
    size = write_gguf(tmp_path / "q.gguf")
    text = f"""
    version: 1
    project: lab
    engines: {{llama.cpp: {{image_tag: server-cuda}}}}
    models:
      q: {{source: {{path: q.gguf}}, context_length: 4096, gpus: {gpus}}}
    """
    desired = build_desired(load_config(str(write_config(tmp_path, text))), host_context())
    facts = model_facts(desired.models["q"].spec)
    assert facts["found"] == "size of the .gguf file and its metadata" and facts["weights"] == size
    rows = gpu_ledger.build(desired, nvml("two-gpu-r570"), {"q": facts}, set())
    m = next(r for r in rows if r["models"])["models"][0]["estimate"]
    # by hand: 3 layers x K and V x 2 KV heads (split over the GPUs) x 16 x 2 bytes (f16) x 4096 tokens
    assert m["kv_cache"] == 3 * 2 * (2 // tp) * 16 * 2 * 4096
    assert m["weights"] == math.ceil(size / tp) and "GGUF metadata (llama), f16 KV cache" in m["notes"]
    # a damaged file: weights by size, the KV cache left out with the reason
    (tmp_path / "q.gguf").write_bytes((tmp_path / "q.gguf").read_bytes()[:60])
    damaged = model_facts(desired.models["q"].spec)
    assert damaged["config"] is None and damaged["notes"][0].startswith("cannot read the GGUF metadata of q.gguf")
    est = gpu_ledger.model_estimate(desired.models["q"].spec, damaged, tp)
    assert est.kv_cache == 0 and "KV cache of this GGUF model not estimated" in est.notes


def test_a_split_gguf_file_counts_every_part(tmp_path):
    first = write_gguf(tmp_path / "big-00001-of-00003.gguf")
    (tmp_path / "big-00002-of-00003.gguf").write_bytes(b"\0" * 1000)
    text = """
    version: 1
    project: lab
    engines: {llama.cpp: {image_tag: server-cuda}}
    models:
      big: {source: {path: big-00001-of-00003.gguf}, context_length: 4096, gpus: [0]}
    """
    spec = build_desired(load_config(str(write_config(tmp_path, text))), host_context()).models["big"].spec
    assert (
        model_facts(spec)["problem"]
        == f"{tmp_path}/big-00001-of-00003.gguf (or another of its parts) is not on this machine yet"
    )
    (tmp_path / "big-00003-of-00003.gguf").write_bytes(b"\0" * 24)
    facts = model_facts(spec)
    assert (
        facts["weights"] == first + 1024 and facts["found"] == "sizes of the 3 parts of the .gguf file and its metadata"
    )


@pytest.mark.parametrize("engine_block, expected_gpus", [("gpus: all", [0, 1]), ("gpus: [1]", [1])])
def test_llamacpp_models_spread_over_their_gpus_and_get_no_budget(tmp_path, engine_block, expected_gpus):
    (tmp_path / "q.gguf").write_bytes(b"x" * 4096)
    text = f"""
    version: 1
    project: lab
    engines: {{llama.cpp: {{image_tag: server-cuda}}}}
    models:
      q: {{source: {{path: q.gguf}}, context_length: 4096, {engine_block}}}
    """
    desired = build_desired(load_config(str(write_config(tmp_path, text))), host_context())
    rows = gpu_ledger.build(desired, nvml("two-gpu-r570"), {"q": model_facts(desired.models["q"].spec)}, set())
    on = [r["index"] for r in rows if r["models"]]
    assert on == expected_gpus
    m = rows[on[0]]["models"][0]
    assert m["budget"] is None and m["estimate"]["weights"] == 4096 // len(expected_gpus) and m["verdict"] == "ok"


def test_tight_fit_warns_and_every_remediation_is_exact(tmp_path):
    # 60 layers x 2 x 2 KV heads x 16 x 2 bytes = 7680 bytes per token; 1M tokens = 7.3 GiB + 1.5 GiB overhead,
    # against 0.40 x 24 GiB = 9.6 GiB: above 90% of the budget
    make_tiny_model(tmp_path / "m", {**TINY_CONFIG, "num_hidden_layers": 60})
    text = (
        "version: 1\nproject: lab\nmodels:\n  m: {source: {path: m}, context_length: 1000000, gpus: [0], "
        "vllm: {gpu_memory_utilization: 0.40}}\n"
    )
    desired = build_desired(load_config(str(write_config(tmp_path, text))), host_context())
    facts = {"m": model_facts(desired.models["m"].spec)}
    fit = gpu_ledger.checks(gpu_ledger.build(desired, nvml("two-gpu-r570"), facts, set()))[0]
    assert (fit.id, fit.status) == ("gpu.fit", "warning") and fit.message.endswith(" - a tight fit")
    assert fit.remediation == (
        "lower context_length, raise its gpu_memory_utilization, spread it over more GPUs "
        "with tensor_parallel_size, or use a smaller or quantized checkpoint"
    )
    assert gpu_ledger.UNKNOWN_FIX == (
        "put the model's files on this machine (config.json and weights) so the estimate "
        "can run; or --ignore-readiness gpu.fit if you know it fits"
    )
    host = nvml("two-gpu-r570")
    host["gpus"][0].update(
        memory_used=20 * GIB, processes=[{"pid": 5, "used": 20 * GIB, "name": "game", "container_id": None}]
    )
    memory = [c for c in gpu_ledger.checks(gpu_ledger.build(desired, host, facts, set())) if c.id == "gpu.memory"][0]
    assert memory.status == "blocking"
    assert memory.remediation == (
        "stop the processes holding the GPU (see nvidia-smi), or lower the models' "
        "gpu_memory_utilization so their budgets fit in the free memory"
    )


def test_a_model_not_downloaded_yet_is_estimated_from_what_the_hub_says(tmp_path, monkeypatch):
    from aigo_apply.platforms.docker.planning import _remote_key, remote_info

    from helpers.hub import Hub

    text = (
        "version: 1\nproject: lab\ndefaults: {models_dir: store}\nmodels:\n"
        "  m: {source: {repo: org/tiny}, context_length: 4096, gpus: [0]}\n"
    )
    desired = build_desired(load_config(str(write_config(tmp_path, text))), host_context())
    with Hub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
        hub.add(
            "org/tiny",
            {
                "config.json": json.dumps(TINY_CONFIG).encode(),
                "model.safetensors": b"w" * 5000,
                "README.md": b"x" * 999,
            },
        )
        remote = remote_info(desired, parse_state("lab", [], []))
    facts = {"m": model_facts(desired.models["m"].spec, remote[_remote_key(desired.models["m"].spec)])}
    assert facts["m"]["found"] == "file sizes on the Hub (not downloaded yet)"
    (row, _) = gpu_ledger.build(desired, nvml("two-gpu-r570"), facts, set())
    est = row["models"][0]["estimate"]
    assert (est["weights"], est["kv_cache"]) == (5000, 2 * 3 * 2 * 16 * 2 * 4096)


def test_checkpoints_read_the_quantization_of_a_local_folder(tmp_path):
    from aigo_apply.platforms.docker.planning import checkpoints

    make_tiny_model(tmp_path / "m", {**TINY_CONFIG, "quantization_config": {"quant_method": "awq", "bits": 4}})
    text = "version: 1\nproject: lab\nmodels:\n  m: {source: {path: m}, context_length: 4096, gpus: none}\n"
    desired = build_desired(load_config(str(write_config(tmp_path, text))), host_context())
    assert checkpoints(desired) == {"m": {"quant_method": "awq"}}


def test_the_ledgers_estimate_record_has_every_field_of_an_estimate_and_its_total():
    """EstimateDict (the ledger's and the plan JSON's record) repeats Estimate's fields for the type
    checker: this keeps the two in step, so a new field cannot reach one and miss the other."""
    from dataclasses import fields
    from typing import get_type_hints

    from aigo_apply.plan.vram import Estimate, EstimateDict

    assert set(get_type_hints(EstimateDict)) == {f.name for f in fields(Estimate)} | {"total"}
    full = Estimate(1, 2, 3, 4, 0.5, 6, ("n",), lora=7).to_dict()
    assert list(full) == list(get_type_hints(EstimateDict))
    assert set(Estimate(1, 2, 3, 4, 0.5, 6).to_dict()) == set(get_type_hints(EstimateDict)) - {"lora"}
