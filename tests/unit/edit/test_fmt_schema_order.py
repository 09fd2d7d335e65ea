"""`aigo-apply fmt` writes each mapping's keys in the order schemas/aigo.schema.json lists its
properties: fmt keeps no key order of its own (edit/fmt.key_order reads the schema), so the two cannot
part. Each reference block of docs/ (together they name every key of the schema, tests/unit/test_docs.py),
written with every mapping in reverse order, comes out in the schema's order."""

from __future__ import annotations

import pytest
import yaml

from aigo_apply.config.yaml_source import load
from aigo_apply.edit import fmt
from aigo_apply.edit.fmt import format_text, key_order
from aigo_apply.resources import schema_data

from helpers.paths import ROOT

SCHEMA = schema_data("aigo.schema.json")


def _reference_blocks() -> list[tuple[str, dict]]:
    found = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        for n, part in enumerate(page.read_text().split("```yaml\n# aigo.yaml: reference\n")[1:]):
            found.append((f"{page.name}#{n}", yaml.safe_load(part.split("```", 1)[0])))
    return found


def _complete(data: dict) -> dict:
    """A reference block made a whole file: version, project, and each model's source and context length."""
    data = {"version": 1, "project": "docs", **data}
    for alias, model in data["models"].items():
        model.setdefault("source", {"repo": f"org/{alias}"})
        model.setdefault("context_length", 4096)
    return data


def _reversed(value):
    if isinstance(value, dict):
        return {key: _reversed(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed(item) for item in value]
    return value


def _object(node: dict) -> dict:
    """The schema of the mapping `node` describes: a `$ref` followed, of `oneOf` forms the mapping."""
    if "$ref" in node and "properties" not in node:
        return _object(SCHEMA["$defs"][node["$ref"].split("/")[-1]])
    for form in node.get("oneOf", []):
        if "$ref" in form or form.get("type") == "object":
            return _object(form)
    return node


def _check(value, node: dict, path: tuple, checked: list) -> None:
    """Every mapping in `value` keeps the schema's property order (a list's items, such as tolerations,
    keep their written order: fmt orders mappings only)."""
    if not isinstance(value, dict):
        return
    node = _object(node)
    listed = list(node.get("properties", {}))
    if listed:
        assert list(value) == [k for k in listed if k in value], f"{'.'.join(map(str, path))}: not the schema's order"
        assert key_order(path) == tuple(listed)
        checked.append(path)
    for key, child in value.items():
        _check(
            child, node.get("properties", {}).get(key) or node.get("additionalProperties") or {}, path + (key,), checked
        )


def test_fmt_keeps_no_key_order_of_its_own():
    assert not hasattr(fmt, "ORDER")
    assert key_order(()) == tuple(SCHEMA["properties"])
    assert key_order(("models", "any-alias", "vllm")) == tuple(SCHEMA["$defs"]["vllmSettings"]["properties"])
    assert key_order(("models",)) is None  # names keep their written order
    assert key_order(("kubernetes", "tolerations", 0)) is None


@pytest.mark.parametrize(("where", "block"), _reference_blocks(), ids=lambda v: v if isinstance(v, str) else "")
def test_a_file_written_in_reverse_order_comes_out_in_the_schemas_order(where, block, tmp_path):
    backwards = _reversed(_complete(block))
    path = tmp_path / "aigo.yaml"
    path.write_text(yaml.safe_dump(backwards, sort_keys=False), encoding="utf-8")
    data = load(path).data  # the project's reader (the reference shows keys no one file combines)
    out = yaml.safe_load(format_text(path.read_text(encoding="utf-8"), data, str(path)))
    assert out == backwards
    assert list(out) != list(backwards)  # the file was out of order
    checked: list = []
    _check(out, SCHEMA, (), checked)
    assert len(checked) > (10 if where.startswith("configuration") else 3), checked
