"""json_types: the narrowing helpers keep what is JSON and refuse or drop what is not."""

from __future__ import annotations

import pytest

from aigo_apply.json_types import arr, is_json, json_object, number, obj, text


def test_the_helpers_keep_their_shape_and_treat_anything_else_as_absent():
    assert obj({"a": 1}) == {"a": 1} and obj(None) == {} and obj([1]) == {}
    assert arr([1]) == [1] and arr({"a": 1}) == []
    assert text("x") == "x" and text(3) == "" and text(None, "-") == "-"
    assert number(3) == 3 and number(True) is None and number(3.0) is None


def test_json_object_checks_every_value_all_the_way_down():
    assert json_object({"a": [1, {"b": None}], "c": 0.5}) == {"a": [1, {"b": None}], "c": 0.5}
    assert is_json({"a": [True, "x"]}) and not is_json({1: "x"}) and not is_json({"a": (1, 2)})
    with pytest.raises(TypeError):
        json_object({"a": {1, 2}})
