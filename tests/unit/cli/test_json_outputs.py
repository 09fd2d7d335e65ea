"""Every `-o json` document and JSON line carries `format_version` (first), and every key is
snake_case: the JSON view's outputs one by one (a new one without a case here fails the first test),
apply's JSON lines, and validate and `models list` through the real command line. `readiness -o json`
and `image inspect -o json` wrote imageReference, defaultTag, tagOverridden... beside snake_case keys."""

from __future__ import annotations

import inspect
import json
import re

import pytest

from aigo_apply.cli.main import main
from aigo_apply.cli.views import JsonView
from aigo_apply.desired.images import image_object, with_local
from aigo_apply.errors import ConfigInvalid, Problem
from aigo_apply.plan.host_checks import Check
from aigo_apply.plan.types import Action, Plan
from aigo_apply.platforms.views import JSON_FORMAT_VERSION, Readiness

from helpers.configs import write_config

CONFIG = """version: 1
project: lab
engines:
  vllm: {image: registry.local/vllm, image_tag: v0.31.0-cu129}
models:
  qwen:
    source: {repo: Qwen/Qwen3-8B}
    context_length: 8192
"""
INSPECTED = {"Id": "sha256:" + "1" * 64, "RepoDigests": ["registry.local/vllm@sha256:" + "2" * 64], "Size": 9}
PLAN = Plan("lab", "aigo.yaml", "sha256:" + "0" * 64, (Action("model.a", "create", ("new",), ()),))
ROWS = [{"repo": "org/m", "revision": "main", "commit": "c" * 40, "size": 1, "used_by": ["m"]}]

# what each of the JSON view's methods is called with; those that print no JSON are left out, saying why
SAMPLES = {
    "plan": lambda v: v.plan(PLAN, False),
    "valid": lambda v: v.valid("aigo.yaml", "lab", 1),
    "invalid": lambda v: v.invalid(ConfigInvalid("aigo.yaml", [Problem(1, 1, "models", "bad", "aigo.yaml")]), True),
    "readiness": lambda v: v.readiness(_readiness()),
    "status": lambda v: v.status({"project": "lab", "models": []}, lambda r: ""),
    "log_line": lambda v: v.log_line("qwen", "INFO ready", prefixed=True),
    "top": lambda v: v.top({"project": "lab", "models": [], "gpus": []}, live=True),
    "bench": lambda v: v.bench({"project": "lab", "models": []}),
    "image": lambda v: v.image(with_local(image_object(_data(), "vllm"), INSPECTED)),
    "stored_models": lambda v: v.stored_models(ROWS),
    "added": lambda v: v.added({"alias": "m", "written": False}, "m: {}\n"),
    "event": lambda v: v.event("step", address="model.a", message="created"),
    "show_plan": lambda v: v.show_plan(PLAN),
}
NO_JSON = {
    "plan_saved": "prints nothing: standard output holds the plan's JSON only",
    "unreadable": "raises the error, which the boundary prints as text on standard error",
    "document": "text that is the same in every format (a docker run line, YAML)",
    "say": "a sentence for a person, on standard error",
}


def _data() -> dict:
    import yaml

    return yaml.safe_load(CONFIG)


def _readiness() -> Readiness:
    image = image_object(_data(), "vllm")
    return Readiness("lab", "vllm", image, (Check("docker.engine", "ok", "Docker 27"),), [])


def _documents(out: str) -> list:
    try:
        return [json.loads(out)]
    except json.JSONDecodeError:
        return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_every_json_document_and_line_carries_format_version_first(capsys):
    methods = {
        name
        for cls in JsonView.__mro__[:-1]
        for name, member in vars(cls).items()
        if not name.startswith("_") and inspect.isfunction(member)
    }
    assert methods == set(SAMPLES) | set(NO_JSON)  # a new output of the JSON view needs its case here
    for method, call in SAMPLES.items():
        call(JsonView())
        out = capsys.readouterr().out
        documents = _documents(out)
        assert documents, (method, out)
        for document in documents:
            assert next(iter(document)) == "format_version", (method, out)
            assert document["format_version"] == JSON_FORMAT_VERSION, (method, out)
        if method in ("plan", "show_plan"):  # the plan's own contract, also nested in apply's `plan` line
            plan = documents[0] if method == "plan" else documents[0]["plan"]
            assert plan["format_version"] == 1 and plan["project"] == "lab"


def _keys(node, where=""):
    if isinstance(node, dict):
        for key, value in node.items():
            yield f"{where}.{key}", key
            yield from _keys(value, f"{where}.{key}")
    elif isinstance(node, list):
        for value in node:
            yield from _keys(value, where)


@pytest.mark.parametrize("method", ["readiness", "image"])
def test_readiness_and_image_inspect_keys_are_snake_case(capsys, method):
    SAMPLES[method](JsonView())
    document = json.loads(capsys.readouterr().out)
    image = document["image"] if method == "readiness" else document
    assert image["image_reference"] == "registry.local/vllm:v0.31.0-cu129" and image["tag_overridden"] is True
    assert image["default_tag"] and image["repository_overridden"] is True
    if method == "image":
        assert image["repo_digests"] == INSPECTED["RepoDigests"] and image["size_bytes"] == 9
    wrong = [where for where, key in _keys(document) if not re.fullmatch(r"[a-z][a-z0-9_]*", key)]
    assert not wrong


def test_validate_and_models_list_json_through_the_command_line(tmp_path, capsys):
    path = write_config(tmp_path, CONFIG + f"defaults: {{models_dir: {tmp_path / 'store'}}}\n")
    for argv in (["validate", "-f", str(path), "-o", "json"], ["models", "list", "-f", str(path), "-o", "json"]):
        with pytest.raises(SystemExit) as done:
            main(argv)
        out = capsys.readouterr().out
        assert done.value.code == 0, out
        assert next(iter(json.loads(out).items())) == ("format_version", JSON_FORMAT_VERSION), out
    rows = json.loads(out)["models"]  # models list: an object now, its rows (one per source) under "models"
    assert isinstance(rows, list) and len(rows) == 1
