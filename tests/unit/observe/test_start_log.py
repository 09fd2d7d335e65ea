"""An engine start's phases and cache verdict, read from vLLM's own start-up lines.

The three logs in tests/fixtures/ are real: the real vLLM CPU engine (aigo-vllm-cpu:v0.32.0-cpu, the
tiny model of tests/helpers/tiny_model.py, 2 cores) started by `aigo-apply apply`, read with `docker
logs` once it served: torch.compile on with the project's cache volume empty (cold, ready after
65.2 s), the same engine replaced with the volume kept (warm, 42.9 s: the CPU build cannot load its
saved AOT graph and compiles again from what else the volume holds) and with `enforce_eager` (27.4 s).
The GPU runner's lines are not recorded here (no GPU): those below are written as vLLM 0.32.0's source
formats them (gpu_model_runner.py, compilation/backends.py, v1/engine/core.py)."""

from __future__ import annotations

import json
import math

import pytest

from aigo_apply.observe.start_log import PHASES, StartRecord, measure

from helpers.paths import ROOT

FIXTURES = ROOT / "tests" / "fixtures"
RECORDED = {  # fixture -> seconds apply measured to serving
    "compiled-cold": 65.2,
    "compiled-warm": 42.9,
    "eager": 27.4,
}


def recorded(name: str) -> list[str]:
    return (FIXTURES / f"vllm-v0.32.0-cpu-start-{name}.log").read_text(encoding="utf-8").splitlines()


def test_a_cold_start_with_compilation_is_cold_and_its_compile_phase_is_the_warm_up():
    phases, cache = measure(recorded("compiled-cold"), "vllm", 65.2)
    assert cache == "cold"
    # "Initializing model took 0.150109 seconds" + "Loading weights took 0.01 seconds"
    assert phases["weights"] == pytest.approx(0.16)
    # the warm-up for the compilation ran 17:12:05 -> 17:12:25, bounded by "init engine ... took 19.60 s"
    assert phases["compile"] == pytest.approx(19.6)
    assert phases["engine_init"] == 0.0
    # "non-default args" at 17:11:29, "Resolved architecture" at 17:11:39: the class inspected anew
    assert phases["inspect"] == 10.0
    assert set(phases) == {"inspect", "weights", "compile", "engine_init", "other"}


def test_a_start_that_found_its_compile_cache_is_warm_and_its_compile_shorter():
    cold, _ = measure(recorded("compiled-cold"), "vllm", 65.2)
    phases, cache = measure(recorded("compiled-warm"), "vllm", 42.9)
    assert cache == "warm"  # "Compiling model again due to a load failure from /root/.cache/..."
    assert phases["compile"] == pytest.approx(14.0)  # 17:12:53 -> 17:13:07
    assert phases["engine_init"] == pytest.approx(16.01 - 14.0)
    assert phases["compile"] < cold["compile"]
    assert phases["inspect"] == 0.0  # what the cold start inspected, read from the cache volume


def test_an_eager_start_compiles_nothing():
    phases, cache = measure(recorded("eager"), "vllm", 27.4)
    assert cache is None
    assert "compile" not in phases and "dynamo" not in phases
    assert phases["weights"] == pytest.approx(0.08) and phases["engine_init"] == pytest.approx(0.46)
    assert phases["inspect"] == 6.0  # an empty cache volume: inspected anew


@pytest.mark.parametrize("name", sorted(RECORDED))
@pytest.mark.parametrize("slower", [1.0, 1.5, 0.1])
def test_the_phases_add_up_to_the_start_apply_measured(name, slower):
    """`other` is what the engine's lines do not time; a total shorter than the timed phases (a clock
    off) leaves it at 0, never negative."""
    seconds = RECORDED[name] * slower
    phases, _ = measure(recorded(name), "vllm", seconds)
    assert set(phases) <= set(PHASES) and all(v >= 0 for v in phases.values())
    timed = sum(v for k, v in phases.items() if k != "other")
    assert sum(phases.values()) == pytest.approx(max(seconds, timed), abs=0.02)


def _gpu(pid: int, stamp: str, where: str, text: str) -> str:
    return f"(Worker_TP{pid - 100} pid={pid}) INFO 12-06 {stamp} [{where}] {text}"


def gpu_log(workers: int = 1, warm: bool = False) -> list[str]:
    """A GPU start as vLLM 0.32.0's formats print it: each tensor-parallel worker logs its own lines."""
    lines = [
        "(APIServer pid=1) INFO 12-06 10:00:00 [api_utils.py:286] non-default args: {}",
        "(APIServer pid=1) INFO 12-06 10:00:03 [model.py:733] Resolved architecture: LlamaForCausalLM",
    ]
    for pid in range(100, 100 + workers):
        lines += [
            _gpu(
                pid, "10:00:20", "gpu_model_runner.py:5150", "Model loading took 15.2 GiB memory and 31.500000 seconds"
            ),
            _gpu(pid, "10:00:21", "default_loader.py:502", "Loading weights took 29.90 seconds"),
            _gpu(pid, "10:00:30", "backends.py:1167", "Dynamo bytecode transform time: 8.25 s"),
        ]
        if warm:
            lines.append(
                _gpu(
                    pid,
                    "10:00:31",
                    "backends.py:296",
                    "Directly load the compiled graph(s) for compile range (1, 8192) from the cache, took 1.250 s",
                )
            )
        else:
            lines += [
                _gpu(pid, "10:00:40", "backends.py:383", "Cache the graph of compile range (1, 8192) for later use"),
                _gpu(pid, "10:01:10", "backends.py:399", "Compiling a graph for compile range (1, 8192) takes 30.50 s"),
                _gpu(
                    pid, "10:01:20", "backends.py:399", "Compiling a graph for compile range (8193, 16384) takes 9.50 s"
                ),
            ]
        lines.append(
            _gpu(pid, "10:01:40", "gpu_model_runner.py:6582", "Graph capturing finished in 12 secs, took 0.45 GiB")
        )
    lines.append(
        "(EngineCore_DP0 pid=50) INFO 12-06 10:01:45 [core.py:403] init engine (profile, create kv cache, warmup "
        f"model) took {75.0 if not warm else 30.0:.2f} s (compilation: {48.25 if not warm else 9.5:.2f} s)"
    )
    return lines


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_a_gpu_start_as_vllm_times_it_each_worker_counted_once(workers):
    phases, cache = measure(gpu_log(workers), "vllm", 150.0)
    assert cache == "cold"
    # "Model loading took" covers the CPU runner's two lines; the compile ranges of one worker add up
    assert phases == {
        "inspect": 3.0,
        "weights": 31.5,
        "dynamo": 8.25,
        "compile": 40.0,
        "graph_capture": 12.0,
        "engine_init": 75.0 - 8.25 - 40.0 - 12.0,
        "other": round(150.0 - 3.0 - 31.5 - 75.0, 2),
    }


def test_a_gpu_start_that_loads_its_graphs_from_the_cache_is_warm():
    phases, cache = measure(gpu_log(2, warm=True), "vllm", 80.0)
    assert cache == "warm"
    assert phases["compile"] == 1.25 and phases["dynamo"] == 8.25


@pytest.mark.parametrize("engine", ["sglang", "llama.cpp"])
def test_other_engines_are_measured_as_a_whole(engine):
    assert measure(recorded("compiled-cold") + gpu_log(), engine, 12.0) == ({}, None)


def test_the_cpu_warm_up_across_new_years_midnight():
    lines = [
        "(Worker pid=40) INFO 12-31 23:59:55 [cpu_model_runner.py:87] Warming up model for the compilation...",
        "(Worker pid=40) INFO 01-01 00:00:07 [cpu_model_runner.py:91] Warming up done.",
    ]
    assert measure(lines, "vllm", 30.0)[0]["compile"] == 12.0


def test_lines_without_vllm_stamps_time_nothing_they_cannot():
    lines = ["Warming up model for the compilation...", "Warming up done.", "Loading weights took 1.50 seconds"]
    phases, cache = measure(lines, "vllm", 10.0)
    assert phases == {"weights": 1.5, "other": 8.5} and cache is None


GOOD = {
    "at": "2026-12-06T17:12:26Z",
    "seconds": 65.2,
    "phases": {"inspect": 10.0, "weights": 0.16, "compile": 19.6, "engine_init": 0.0, "other": 35.44},
    "cache": "cold",
    "image_id": "sha256:" + "a" * 64,
    "image": "aigo-vllm-cpu:v0.32.0-cpu",
    "engine": "vllm",
    "spec_hash": "sha256:" + "b" * 64,
    "kind": "create",
}


def test_a_record_reads_back_as_written():
    record = StartRecord.from_dict(json.loads(json.dumps(GOOD)))
    assert record is not None and record.to_dict() == GOOD
    assert record.shown() == {k: GOOD[k] for k in ("seconds", "phases", "cache", "image_id", "at")}


@pytest.mark.parametrize(
    "change",
    [
        {"seconds": -1},
        {"seconds": 1e12},
        {"seconds": "65"},
        {"seconds": True},
        {"seconds": math.inf},
        {"phases": {"weights": -0.1}},
        {"phases": {"lunch": 1.0}},
        {"phases": []},
        {"cache": "tepid"},
        {"at": "yesterday"},
        {"image_id": None},
        {"image": "x" * 600},
        {"spec_hash": 7},
    ],
    ids=repr,
)
def test_a_record_apply_does_not_write_is_not_read(change):
    assert StartRecord.from_dict(GOOD | change) is None


def test_a_record_missing_a_field_or_not_an_object_is_not_read():
    for key in GOOD:
        assert StartRecord.from_dict({k: v for k, v in GOOD.items() if k != key}) is None or key in (
            "cache",
            "spec_hash",
        ), key
    assert StartRecord.from_dict([GOOD]) is None
