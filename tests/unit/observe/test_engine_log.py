"""The line a failed start's report leads with: the cause, not the traceback that points back at it."""

from __future__ import annotations

import pytest

from aigo_apply.observe.engine_log import root_cause

VLLM_OOM = [
    "INFO 12-06 16:39:50 [api_server.py:1800] vLLM API server version 0.31.0",
    "ERROR 12-06 16:40:00 [core.py:700] EngineCore failed to start.",
    "ERROR 12-06 16:40:00 [core.py:700] Traceback (most recent call last):",
    "ERROR 12-06 16:40:00 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "Process EngineCore_DP0:",
    *[f'  File "/x/frame_{i}.py", line {i}, in run' for i in range(40)],
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
]


def test_the_cause_before_a_traceback_that_only_points_back():
    found = root_cause(VLLM_OOM)
    assert found is not None and "CUDA out of memory" in found


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (["loading", "ValueError: max_model_len 999999 is greater than the derived max_model_len 4096"], "ValueError"),
        (["RuntimeError: NCCL error: unhandled system error", "The above exception was the direct cause"], "NCCL"),
        (["srv    load_model: failed to load model", "error: failed to load model '/model/x.gguf'"], "error: failed"),
        (["[2026-12-06 16:40:00] ERROR Scheduler hit an exception: shapes mismatch"], "Scheduler hit"),
        (["SystemExit: 2"], "SystemExit"),
    ],
)
def test_each_engine_kind_of_failure_line(lines, expected):
    found = root_cause(lines)
    assert found is not None and expected in found


def test_no_cause_when_the_log_says_none():
    assert root_cause(["INFO starting", "INFO loading weights", ""]) is None
    assert root_cause([]) is None


def test_an_exception_line_wins_over_a_later_error_level_line():
    lines = ["KeyError: 'model.layers.0.weight'", "ERROR 12-06 shutting down"]
    assert root_cause(lines) == "KeyError: 'model.layers.0.weight'"


def test_a_huge_line_is_cut():
    found = root_cause(["ValueError: " + "x" * 100_000])
    assert found is not None and len(found) <= 400
