"""The canonical specs' records (desired/spec.py) and the run-time check that holds a built spec to them agree,
and every spec the examples build passes that check."""

from __future__ import annotations

import pytest

from aigo_apply.desired import spec as records


@pytest.mark.parametrize(
    ("record", "table"), [(records.ModelSpec, records._MODEL_KEYS), (records.RouterSpec, records._ROUTER_KEYS)]
)
def test_the_check_knows_each_key_of_its_record_and_which_are_required(record, table):
    assert set(table) == set(record.__annotations__)
    assert {key for key, (_, required) in table.items() if required} == set(record.__required_keys__)


def test_a_spec_with_a_key_its_record_lacks_or_a_wrong_type_is_refused():
    good = {
        "engine": "vllm",
        "image": "vllm/vllm-openai:v0.31.0",
        "source": {"repo": "Qwen/Qwen3-0.6B", "revision": "main"},
        "context_length": 4096,
        "gpus": "all",
        "env": {},
        "vllm": {"gpu_memory_utilization": 0.9},
    }
    assert records.is_model_spec(good)
    assert not records.is_model_spec({**good, "context_length": "4096"})
    assert not records.is_model_spec({**good, "extra": 1})
    assert not records.is_model_spec({**good, "vllm": {"max_model_len": 1}})
    assert not records.is_model_spec({**good, "engine": "tgi"})
    with pytest.raises(TypeError, match="model 'a'"):
        records.model_spec_of({**good, "gpus": None}, "model 'a'")
