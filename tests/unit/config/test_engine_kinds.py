"""An engine kind is one record (config/engine_kinds.py): the records agree with the schema and the
renderers, and no module outside the records compares an engine's name to a string literal or keys a
table by one, except the places listed in REMAINING with why (each a vLLM-only feature, or a branch
still to move into the records); the list may only shrink."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import aigo_apply
from aigo_apply.config.engine_kinds import ENGINE_BY_FORMAT, ENGINE_NAMES, ENGINES, tag_cuda
from aigo_apply.desired import engines as renderers
from aigo_apply.resources import schema_data

PACKAGE = Path(aigo_apply.__file__).parent
RECORDS = "config/engine_kinds.py"

# module -> (comparisons with, or tables keyed by, an engine name's literal; why they stay)
REMAINING: dict[str, tuple[int, str]] = {
    "app/bench.py": (1, "bench measures vLLM models only"),
    "app/checking.py": (1, "vLLM's image object comes from desired (engines.vllm), the others' from the file"),
    "config/compilation_rules.py": (1, "vLLM's compilation block"),
    "config/document.py": (1, "the document's types: a model's engine blocks, keyed as the schema does"),
    "config/kube_rules.py": (2, "vLLM's draft checkpoint and adapters on a cluster"),
    "config/rules.py": (1, "vLLM's deprecated quantization methods"),
    "config/schema.py": (1, "hints from vLLM's flag table (`'vllm' in path`)"),
    "config/vllm_flags.py": (1, "vLLM's flag table"),
    "desired/build.py": (3, "to move: per-engine settings defaults; vLLM's tag warnings (its release facts)"),
    "desired/engines/__init__.py": (1, "the renderers (code, not data) keyed by the records' names"),
    "desired/spec.py": (1, "the typed spec (a TypedDict) names each engine's settings block; its check derives them"),
    "observe/start_log.py": (1, "vLLM's start-up log"),
    "plan/fetch_plan.py": (1, "vLLM's quantization"),
    "plan/host_checks.py": (2, "vLLM's MoE backend, its image object from desired (engines.vllm)"),
    "plan/model_proposal.py": (1, "a proposal writes a vLLM entry"),
    "platforms/docker/effective.py": (1, "vLLM's cache config from its /metrics"),
}


def _literal_uses(path: Path) -> int:
    count = 0
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            count += any(isinstance(x, ast.Constant) and x.value in ENGINES for x in operands)
        elif isinstance(node, ast.Dict):
            count += any(isinstance(k, ast.Constant) and k.value in ENGINES for k in node.keys)
    return count


def test_no_module_outside_the_records_branches_on_an_engine_name():
    found = Counter()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel != RECORDS and (uses := _literal_uses(path)):
            found[rel] = uses
    assert dict(found) == {module: count for module, (count, _) in REMAINING.items()}


def test_the_records_agree_with_the_schema_and_the_renderers():
    schema = schema_data("aigo.schema.json")
    assert tuple(schema["properties"]["engines"]["properties"]) == ENGINE_NAMES
    assert tuple(renderers.ENGINES) == ENGINE_NAMES
    model = schema["$defs"]["model"]["properties"]
    for name, kind in ENGINES.items():
        assert model[name]["$ref"] == f"#/$defs/{kind.settings_def}"
        settings = schema["$defs"][kind.settings_def]["properties"]
        assert set(kind.host_settings) <= set(settings), name
        assert (kind.memory_model == "fraction") == ("gpu_memory_utilization" in settings), name
        assert kind.cuda12_tag is None or tag_cuda(kind.cuda12_tag) == 12, name
    assert set(ENGINE_BY_FORMAT.values()) <= set(ENGINE_NAMES)
    assert all(kind.adapters_refusal or kind.adapters for kind in ENGINES.values())
