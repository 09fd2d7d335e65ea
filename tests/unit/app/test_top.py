"""top's reads of vLLM's own metrics, and tokens per second as the change between two reads."""

from __future__ import annotations

from aigo_apply.adapters.engine_metrics import total
from aigo_apply.app.top import asleep, rows

METRICS = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 2.0
vllm:num_requests_running{engine="1",model_name="m"} 1.0
vllm:generation_tokens_total{engine="0",model_name="m"} 120.0
vllm:generation_tokens_created{engine="0",model_name="m"} 1.7e9
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="awake"} 0.0
vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="weights_offloaded"} 1.0
plain_metric 7
"""


def test_totals_sum_every_engine_of_a_family_and_nothing_else():
    assert total(METRICS, "vllm:num_requests_running") == 3
    assert total(METRICS, "vllm:generation_tokens_total") == 120  # not its _created sibling
    assert total(METRICS, "plain_metric") == 7
    assert total(METRICS, "vllm:num_requests_waiting") is None


def test_sleep_state_is_read_from_the_awake_label():
    assert asleep(METRICS) is True
    assert asleep(METRICS.replace('sleep_state="awake"} 0.0', 'sleep_state="awake"} 1.0')) is False
    assert asleep("") is None


def test_tokens_per_second_is_the_change_between_two_reads():
    def read(at, tokens):
        return {
            "at": at,
            "models": {
                "m": {
                    "state": "running",
                    "running": 1.0,
                    "waiting": 0.0,
                    "tokens": tokens,
                    "kv_cache_usage": 0.5,
                    "asleep": False,
                }
            },
        }

    first = rows(None, read(10.0, 100.0))
    assert first[0]["tokens_per_second"] is None  # one read says nothing about a rate
    row = rows(read(10.0, 100.0), read(12.0, 150.0))[0]
    assert row == {
        "model": "m",
        "state": "running",
        "requests_running": 1,
        "requests_waiting": 0,
        "tokens_per_second": 25.0,
        "kv_cache_usage": 0.5,
        "sleep": "awake",
    }
    assert rows(read(10.0, 150.0), read(12.0, 0.0))[0]["tokens_per_second"] == 0.0  # a restarted engine
