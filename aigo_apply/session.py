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


def host_checks(desired: DesiredState, runtime) -> list:
    """The readiness checks for this host and file (Docker /info, and NVML only when a model wants a GPU)."""
    from aigo_apply.hostcheck import gpu_needs, run_checks
    from aigo_apply.hostfacts import docker_facts, nvml_facts

    facts = {"docker": docker_facts(lambda: runtime),
             "nvml": nvml_facts() if gpu_needs(desired)["models"] else {"available": False, "gpus": []}}
    return run_checks(facts, desired, desired.vllm_image)


def make_plan(file: str | None, replace: Iterable[str] = (), target: Iterable[str] = (), runtime=None,
              ignore: Iterable[str] = ()) -> Plan:
    desired = load_desired(file)
    runtime = runtime or _docker()
    observed = observe(desired.project, runtime)
    return build_plan(desired, observed, replace, target, host_checks(desired, runtime), ignore)


def _docker():
    from aigo_apply.docker_runtime import DockerRuntime

    return DockerRuntime()
