"""Builds the collaborators a command needs and runs the core: config -> desired, Docker ->
observed, then the pure planner. Keeps the CLI to wiring and gives tests and benchmarks the same
entry point the user has."""

from __future__ import annotations

from typing import Iterable

from aigo_apply.config import choose_file, load_config
from aigo_apply.desired import build_desired
from aigo_apply.model import DesiredState
from aigo_apply.observed import ObservedState, parse_state
from aigo_apply.plan import Plan
from aigo_apply.planner import build_plan


def load_desired(file: str | None) -> DesiredState:
    return build_desired(load_config(choose_file(file)))


def observe(project: str, runtime=None) -> ObservedState:
    """One container list call, one image list call, and the router's live files."""
    from aigo_apply.router import read_live
    from aigo_apply.statedir import state_path

    runtime = runtime or _docker()
    return parse_state(project, runtime.list_containers(), runtime.list_images(),
                       read_live(state_path(project) / "router"))


def host_checks(desired: DesiredState, runtime, observed: ObservedState | None = None) -> tuple[list, list]:
    """The readiness checks for this host and file, and the per-GPU memory ledger: Docker /info,
    and (only when a model wants a GPU) NVML and the model files the VRAM estimate reads."""
    from aigo_apply import gpu_ledger
    from aigo_apply.hostcheck import gpu_needs, run_checks
    from aigo_apply.hostfacts import docker_facts, nvml_facts

    wants_gpu = bool(gpu_needs(desired)["models"])
    facts = {"docker": docker_facts(lambda: runtime),
             "nvml": nvml_facts() if wants_gpu else {"available": False, "gpus": []}}
    checks = run_checks(facts, desired, desired.vllm_image)
    if not facts["nvml"].get("available"):
        return checks, []
    from aigo_apply.model_facts import model_facts

    ours = {c.id for c in (observed or observe(desired.project, runtime)).ours}
    files = {alias: model_facts(m.spec) for alias, m in desired.models.items() if m.spec["gpus"] != "none"}
    ledger = gpu_ledger.build(desired, facts["nvml"], files, ours)
    return checks + gpu_ledger.checks(ledger), ledger


def make_plan(file: str | None, replace: Iterable[str] = (), target: Iterable[str] = (), runtime=None,
              ignore: Iterable[str] = ()) -> Plan:
    desired = load_desired(file)
    runtime = runtime or _docker()
    observed = observe(desired.project, runtime)
    checks, ledger = host_checks(desired, runtime, observed)
    return build_plan(desired, observed, replace, target, checks, ignore, ledger)


def _docker():
    from aigo_apply.docker_runtime import DockerRuntime

    return DockerRuntime()
