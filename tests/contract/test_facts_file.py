"""schemas/vllm-v0.31.0.json is what the installed vLLM 0.31.0 reports: scripts/vllm_facts.py rebuilds
it from the package's live registries, Literal types, enums, `vllm serve` parser and vllm.envs, and
the committed file must equal that output byte for byte. After a deliberate change, rewrite it with
`.venv-vllm/bin/python scripts/vllm_facts.py --write` (then scripts/sync-schema-enums) and review the diff.
schemas/vllm-v0.34.0.json likewise, from vLLM 0.34.0 (`.venv-vllm-0.34.0/bin/python scripts/vllm_facts.py`)."""

from __future__ import annotations

import json

from helpers.paths import ROOT

FACTS = ROOT / "schemas" / "vllm-v0.31.0.json"


def test_committed_facts_equal_what_vllm_reports(run_in_vllm):
    generated = run_in_vllm("vllm_facts.py")
    committed = FACTS.read_text()
    assert json.loads(generated) == json.loads(committed), "rebuild with scripts/vllm_facts.py --write"
    assert generated == committed, "same facts, different layout: rebuild with scripts/vllm_facts.py --write"
    assert json.loads(committed)["version"] == "0.31.0"


def test_committed_034_facts_equal_what_vllm_034_reports(run_in_vllm034):
    generated = run_in_vllm034("vllm_facts.py")
    committed = (ROOT / "schemas" / "vllm-v0.34.0.json").read_text()
    assert json.loads(generated) == json.loads(committed), (
        "rebuild with .venv-vllm-0.34.0/bin/python scripts/vllm_facts.py --write"
    )
    assert generated == committed, "same facts, different layout: rebuild with scripts/vllm_facts.py --write"
    assert json.loads(committed)["version"] == "0.34.0"
