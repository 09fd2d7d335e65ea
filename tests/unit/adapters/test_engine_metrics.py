"""adapters/engine_metrics.py: samples picked out of a Prometheus page by name (never by prefix), their
labels with escaped quotes kept whole, a malformed value skipped, and totals across label sets."""

from __future__ import annotations

from aigo_apply.adapters.engine_metrics import samples, total

PAGE = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="a"} 2.0
vllm:num_requests_running{engine="1",model_name="a \\"quoted\\" name"} 3.0
vllm:num_requests_running_extra{engine="0"} 100.0
llamacpp:requests_processing 4
vllm:broken{engine="0"} not-a-number
"""


def test_samples_by_exact_name_with_their_labels():
    found = samples(PAGE, "vllm:num_requests_running")
    assert [labels["engine"] for labels, _ in found] == ["0", "1"]
    assert found[1][0]["model_name"] == 'a \\"quoted\\" name' and found[1][1] == "3.0"
    assert samples(PAGE, "llamacpp:requests_processing") == [({}, "4")]
    assert samples(PAGE, "vllm:absent") == []


def test_totals_add_every_label_set_and_skip_what_is_not_a_number():
    assert total(PAGE, "vllm:num_requests_running") == 5.0
    assert total(PAGE, "llamacpp:requests_processing") == 4.0
    assert total(PAGE, "vllm:broken") is None and total(PAGE, "vllm:absent") is None
