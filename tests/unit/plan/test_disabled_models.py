"""`enabled: false` keeps a model in the file but not running: its container is
removed with a reason that says so, its route goes, the GPU ledger and the readiness checks do not
count it, status lists it as disabled, and the other models' ports and specs do not move."""

from __future__ import annotations

import pytest

from aigo_apply.errors import ConfigInvalid, UsageProblem
from aigo_apply.observe.config_file import load_config
from aigo_apply.plan.facts import PlanRequest
from aigo_apply.plan.gpu_ledger import build as ledger
from aigo_apply.plan.planner import build_plan
from aigo_apply.platforms.docker.status import collect, render

from helpers.configs import write_config
from helpers.planner_inputs import CONFIG, observed, running
from helpers.planner_inputs import desired as _desired


def desired(folder, text=CONFIG):
    folder.mkdir(parents=True, exist_ok=True)
    return _desired(folder, text)


OFF = CONFIG.replace(
    "    vllm: {tool_call_parser: hermes, max_num_seqs: 8}\n",
    "    vllm: {tool_call_parser: hermes, max_num_seqs: 8}\n    enabled: false\n",
)


def test_a_disabled_model_is_not_desired_but_keeps_its_place(tmp_path):
    on, off = desired(tmp_path / "on"), desired(tmp_path / "off", OFF)
    assert set(off.models) == {"alpha"} and off.disabled == ("beta",)
    assert off.models["alpha"].spec == on.models["alpha"].spec  # nothing else moves
    assert off.models["alpha"].container.definition() == on.models["alpha"].container.definition()
    assert [r.alias for r in off.router.routes] == ["alpha"]


def test_disabling_a_running_model_removes_its_container_and_route_with_the_reason(tmp_path):
    on, off = desired(tmp_path / "on"), desired(tmp_path / "off", OFF)
    plan = build_plan(off, observed(on, running(on)))
    by = {a.address: a for a in plan.actions}
    assert by["model.beta"].kind == "remove"
    assert "disabled" in by["model.beta"].reasons[0] and "enabled: false" in by["model.beta"].reasons[0]
    assert by["model.alpha"].kind == "noop"
    router = next(a for a in plan.actions if a.is_router)
    assert router.kind != "noop" and any("beta to be removed (disabled)" in r for r in router.reasons)


def test_enabling_it_again_plans_it_back_with_the_same_port(tmp_path):
    on, off = desired(tmp_path / "on"), desired(tmp_path / "off", OFF)
    plan = build_plan(on, observed(off, running(off)))
    assert {a.address: a.kind for a in plan.actions}["model.beta"] == "create"
    again = desired(tmp_path / "again")
    assert again.models["beta"].container.host_port == on.models["beta"].container.host_port


def test_the_gpu_ledger_does_not_count_a_disabled_model(tmp_path):
    gpu = OFF.replace("gpus: none", "gpus: [0]")
    d = desired(tmp_path, gpu)
    nvml = {"available": True, "gpus": [{"index": 0, "name": "GPU", "memory_total": 32 << 30, "memory_used": 0}]}
    rows = ledger(d, nvml, {}, set())
    assert [m.get("model", m.get("alias")) for m in rows[0]["models"]] == ["alpha"], rows[0]["models"]


def test_status_lists_a_disabled_model_as_disabled(tmp_path):
    d = desired(tmp_path, OFF)
    report = collect(d, observed(d, running(d)))
    row = next(r for r in report["models"] if r["model"] == "beta")
    assert row["enabled"] is False and row["in_file"] is True and row["state"] == "absent"
    line = next(line for line in render(report).splitlines() if line.startswith("beta"))
    assert "disabled" in line and "not in file" not in line


def test_replace_of_a_disabled_model_says_it_is_disabled(tmp_path):
    d = desired(tmp_path, OFF)
    with pytest.raises(UsageProblem, match="disabled"):
        build_plan(d, observed(d, running(d)), request=PlanRequest(replace=frozenset({"beta"})))


@pytest.mark.parametrize("value", ['"no"', "0", "null", '"false"'])
def test_enabled_takes_only_true_or_false(tmp_path, value):
    with pytest.raises(ConfigInvalid, match="enabled"):
        load_config(str(write_config(tmp_path, OFF.replace("enabled: false", f"enabled: {value}"))))


def test_a_disabled_model_frees_its_share_of_the_gpu_for_the_static_check(tmp_path):
    both_on = CONFIG.replace("gpus: none", "gpus: [0]")
    with pytest.raises(ConfigInvalid) as refused:
        load_config(str(write_config(tmp_path, both_on)))
    assert "over-committed" in "\n".join(refused.value.lines())
    assert load_config(str(write_config(tmp_path, OFF.replace("gpus: none", "gpus: [0]"))))
