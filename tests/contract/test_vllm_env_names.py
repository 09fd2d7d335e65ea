"""tests/fixtures/vllm-v0.31.0-env.json is what the installed vLLM 0.31.0's envs.py reads: every name of
`vllm.envs.environment_variables` and every name the module reads directly, each with its default as
an environment value (scripts/vllm_env_names.py prints it). tests/unit/config/test_env_ordinary.py checks
that aigo.yaml accepts each. After a vLLM upgrade, rewrite it with
`.venv-vllm/bin/python scripts/vllm_env_names.py --write` and review the diff."""

from __future__ import annotations

import json

from helpers.paths import FIXTURES

COMMITTED = FIXTURES / "vllm-v0.31.0-env.json"


def test_committed_env_names_equal_what_vllm_reads(run_in_vllm):
    generated = run_in_vllm("vllm_env_names.py")
    assert json.loads(generated) == json.loads(COMMITTED.read_text()), "rebuild with scripts/vllm_env_names.py --write"
    assert json.loads(generated)["vllm"] == "0.31.0"
