"""Builds the collaborators a command needs and runs the core: config -> desired, Docker ->
observed, then the pure planner. Keeps the CLI to wiring and gives tests and benchmarks the same
entry point the user has."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from aigo_apply.adapters.docker_engine import DockerRuntime
from aigo_apply.adapters.host import docker_facts, host_memory, nvml_facts
from aigo_apply.adapters.listeners import listening, with_owners
from aigo_apply.adapters.runtime import Runtime
from aigo_apply.config.load import choose_file
from aigo_apply.desired.model_store import Download, downloads, is_commit, label
from aigo_apply.desired.spec import ModelSpec
from aigo_apply.desired.types import DesiredState, HostContext
from aigo_apply.errors import AigoError
from aigo_apply.json_types import JsonObject, obj
from aigo_apply.observe.config_file import load_config
from aigo_apply.observe.containers import ObservedState, parse_state
from aigo_apply.observe.hub_answer import HubAnswer, HubKey
from aigo_apply.observe.local_sources import local_source_problems
from aigo_apply.observe.markers import read_markers, store_link_problems
from aigo_apply.observe.model_files import model_facts, quant_method
from aigo_apply.plan import gpu_ledger
from aigo_apply.plan.adapter_checks import adapter_checks
from aigo_apply.plan.check_findings import with_checks
from aigo_apply.plan.facts import PlanFacts, PlanRequest
from aigo_apply.plan.host_checks import Check, gpu_needs, run_checks, source_checks, store_checks
from aigo_apply.plan.ledger_rows import LedgerRow
from aigo_apply.plan.lockfile import LockRestore, drift, restore_for
from aigo_apply.plan.planner import build_plan
from aigo_apply.plan.port_checks import clashes, port_checks, wanted
from aigo_apply.plan.swap_ledger import host_memory_check
from aigo_apply.plan.types import Plan
from aigo_apply.platforms.capabilities import LACKS, refuse_lacking
from aigo_apply.platforms.docker import start_records
from aigo_apply.platforms.docker.live_router import read_live
from aigo_apply.platforms.docker.secret_checks import reference_checks
from aigo_apply.platforms.host_context import current_host, desired_state
from aigo_apply.platforms.hub_facts import remote_info
from aigo_apply.platforms.router_keys import router_checks
from aigo_apply.platforms.state_dir import state_path

if TYPE_CHECKING:
    from aigo_apply.platforms.platform import Platform

Observed = TypeVar("Observed")  # what the platform observes (platforms/platform.Platform's)


def load_desired(file: str | None, platform: str | None = None, host: HostContext | None = None) -> DesiredState:
    """The desired state on this machine's Docker, for the commands that work on Docker only: a
    file for a platform that lacks this host (a cluster's, or --platform kubernetes) is refused, which says so (plan,
    apply, status and destroy choose their platform with platforms/platform.open_platform instead)."""
    config = load_config(choose_file(file))
    refuse_lacking(LACKS.get(platform or config.data.get("platform", "docker"), frozenset()), "this_host", config.file)
    return desired_state(config, host or current_host())


def observe(
    project: str, runtime: Runtime | None = None, desired: DesiredState | None = None, state_root: Path | None = None
) -> ObservedState:
    """One container list call, one image list call, the router's live files, and (with
    `desired`) the download markers of the model folders the file names."""

    runtime = runtime or _docker()
    markers = read_markers(desired.specs()) if desired else {}
    return parse_state(
        project,
        runtime.list_containers(),
        runtime.list_images(),
        read_live(state_path(project, state_root) / "router"),
        markers,
    )


def lock_checks(
    desired: DesiredState,
    observed: ObservedState,
    lock: JsonObject | None,
    restores: dict[str, LockRestore | None] | None = None,
) -> list[Check]:
    """Drift from aigo.lock (warnings; the Hub is asked where each branch or tag points now), and
    with --locked (`restores`, from locked_images) an image that cannot be put back (blocking)."""
    if lock is None:
        return []

    locked = obj(lock["models"])  # lockfile.parse checked the lock's shape: each section an object
    moving = {label(d): d for d in downloads(desired.specs()) if label(d) in locked and not is_commit(d["revision"])}
    hub: dict[str, str] = {}
    if moving:
        hub = _hub_commits(moving)
    checks = [
        Check("lock.drift", "warning", f"aigo.lock: {line}")
        for line in drift(lock, desired, observed.images, observed.model_files, hub)
    ]
    for ref, how in sorted((restores or {}).items()):
        if how is None:
            local = observed.images.get(ref)
            checks.append(
                Check(
                    "lock.image",
                    "blocking",
                    f"image {ref} is {str(local)[:19] if local else 'missing'}, "
                    f"aigo.lock records {str(obj(obj(lock['images'])[ref]).get('id'))[:19]}, which is neither on this "
                    "machine nor in a registry (no digest)",
                    f"rebuild {ref} as it was, or apply without --locked to record what is here",
                )
            )
    return checks


def _hub_commits(moving: Mapping[str, Download]) -> dict[str, str]:
    """label -> the commit the Hub names now for each download aigo.lock pins to a branch or tag
    (none offline; one the Hub does not answer is left out)."""
    from concurrent.futures import ThreadPoolExecutor

    from aigo_apply.adapters.hub import offline, resolve  # only a lock that pins a branch or tag asks the Hub

    if offline():
        return {}

    def ask(item: tuple[str, Download]) -> tuple[str, str | None]:
        try:
            return item[0], resolve(item[1]["repo"], item[1]["revision"], timeout=5.0)
        except AigoError:
            return item[0], None

    with ThreadPoolExecutor(max_workers=min(8, len(moving))) as pool:
        return {k: v for k, v in pool.map(ask, moving.items()) if v}


def locked_images(desired: DesiredState, observed: ObservedState, lock: JsonObject) -> dict[str, LockRestore | None]:
    """With --locked: each image of the file whose tag names another image than aigo.lock records,
    with how to put the recorded one back (planned as a pull), or None when it cannot be."""

    return {
        ref: restore_for(ref, obj(entry), observed.image_ids)  # each entry an object (lockfile.parse)
        for ref, entry in sorted(obj(lock["images"]).items())
        if ref in desired.images() and observed.images.get(ref) != obj(entry).get("id")
    }


def host_checks(
    desired: DesiredState,
    runtime: Runtime,
    observed: ObservedState | None = None,
    remote: dict[HubKey, HubAnswer] | None = None,
) -> tuple[list[Check], list[LedgerRow]]:
    """The readiness checks for this host and file, and the per-GPU memory ledger: Docker /info,
    and (only when a model wants a GPU) NVML and the model files the VRAM estimate reads; for a
    model not downloaded yet, what the Hub said (`remote`: file sizes and config.json)."""

    wants_gpu = bool(gpu_needs(desired)["models"])
    facts: dict[str, JsonObject] = {
        "docker": docker_facts(lambda: runtime),
        "nvml": nvml_facts() if wants_gpu else {"available": False, "gpus": []},
    }
    checks = run_checks(facts, desired, desired.vllm_image) + source_checks(local_source_problems(desired.specs()))
    markers = observed.model_files if observed is not None else read_markers(desired.specs())
    checks += store_checks(store_link_problems(desired.specs(), markers))
    checks += adapter_checks(desired, markers)
    checks += host_port_checks(desired, runtime, observed)
    if not facts["nvml"].get("available"):
        return checks, []

    ours = {c.id for c in (observed or observe(desired.project, runtime)).ours}
    files = {
        alias: model_facts(m.spec, _answer_for(remote, m.spec))
        for alias, m in desired.models.items()
        if m.spec["gpus"] != "none"
    }
    ledger = gpu_ledger.build(desired, facts["nvml"], files, ours)
    checks = checks + gpu_ledger.checks(ledger)
    host_total = facts["nvml"].get("host_memory_total")
    host_total = host_total if isinstance(host_total, int) else None
    swapped = host_memory_check(desired, host_total, _whole_weights(ledger))
    return checks + ([swapped] if swapped else []), ledger


def host_port_checks(desired: DesiredState, runtime: Runtime, observed: ObservedState | None = None) -> list[Check]:
    """The ports the file asks for that something on this host already listens on: /proc/net read
    once for all of them, Docker's containers asked only when a port is in use at all (`readiness`
    has not listed them), and the processes holding a socket looked up only for a clash."""
    wants = wanted(desired)
    sockets = listening({w.port for w in wants})
    if not sockets:
        return []
    if observed is None:
        try:
            observed = observe(desired.project, runtime)
        except AigoError:  # no Docker to ask: no container holds anything (docker.engine says why)
            observed = parse_state(desired.project, [], [])
    found = clashes(wants, observed, sockets)
    if not found:
        return []
    owned = {s.inode: s for s in with_owners({s for _, s in found})}
    return port_checks((w, owned.get(s.inode, s)) for w, s in found)


def _whole_weights(ledger: list[LedgerRow]) -> dict[str, int | None]:
    """Each model's whole weights: the ledger's per-GPU weights added over the GPUs it is on."""
    out: dict[str, int | None] = {}
    for row in ledger:
        for m in row["models"]:
            have, more = out.get(m["alias"], 0), m["estimate"]["weights"]
            out[m["alias"]] = None if have is None or more is None else have + more
    return out


def _answer_for(remote: dict[HubKey, HubAnswer] | None, spec: ModelSpec) -> HubAnswer | None:
    key = _remote_key(spec)
    return remote.get(key) if remote and key else None


def _remote_key(spec: ModelSpec) -> HubKey | None:
    source = spec.get("source", {})
    return (source["repo"], source.get("revision", "main"), source.get("file")) if "repo" in source else None


def make_plan(platform: Platform[Observed], request: PlanRequest | None = None) -> Plan:
    """`plan`: what the platform (platforms/platform.open_platform) runs now, and the plan to the file."""
    return platform.plan(platform.observe(), request or PlanRequest())


def plan_for(
    desired: DesiredState,
    observed: ObservedState,
    runtime: Runtime,
    request: PlanRequest,
    lock: JsonObject | None = None,
    remote: dict[HubKey, HubAnswer] | None = None,
    state: Path | None = None,
) -> Plan:
    """Everything a plan is made of, gathered in one order for `plan` and `apply` alike: the Hub
    (for missing or, with `locked`, pinned downloads; `remote`: its answers, asked before), host
    checks and the GPU ledger, drift from aigo.lock, what the checkpoints' configs say; then the pure
    planner. Then, for the models the plan takes away (a recreate, a start), their measured starts in
    the project's state folder `state` (one small file each, for the models with a container here), from which
    it predicts how long.

    The plan is made once, from facts gathered first: the measured starts are read for every model
    the plan could take away (those with a container here; the planner consults only the ones it
    does take away). The secrets are resolved after it, for the containers it makes (a model left as
    it is keeps its environment, and its secrets are not read), and what they find is added to it
    as the planner adds every check (plan/check_findings.with_checks): they change no action."""
    if remote is None:
        remote = remote_info(desired, observed, lock if request.locked else None)
    checks, ledger = host_checks(desired, runtime, observed, remote)
    # the keys' digest, read now: a changed key is a reload (unreadable here: the deployed digest stands)
    desired, router_found = router_checks(desired, observed.router_files)
    checks += router_found
    restores = locked_images(desired, observed, lock) if request.locked and lock else {}
    checks += lock_checks(desired, observed, lock, restores)
    running = set(desired.models) & {c.alias for c in observed.engines}
    facts = PlanFacts(
        tuple(checks),
        tuple(ledger),
        remote,
        checkpoints(desired, remote),
        {ref: how for ref, how in restores.items() if how},
        starts=start_records.read_all(state, running) if state is not None else {},
        host_memory_free=host_free() if ledger else None,  # a replace may sleep an engine on a GPU only
    )
    plan = build_plan(desired, observed, facts, request)
    # every secret the plan's changes need is resolved now: one that cannot be is a blocker before any change
    keys_said = any(c.id == "router.api_keys" for c in checks)  # unusable keys are blocked once, above
    return with_checks(
        plan, reference_checks(desired, aliases=needs_env(plan), router=plan.has_changes and not keys_said)
    )


def host_free() -> int | None:
    """The host's free memory now (MemAvailable), where an engine put to sleep keeps its weights."""
    total, used = host_memory()
    return None if total is None or used is None else total - used


def away(plan: Plan) -> frozenset[str]:
    """The models whose downtime the plan predicts from their measured starts."""
    return frozenset(a.model for a in plan.actions if a.model and a.downtime is not None and a.downtime.seconds != 0)


def needs_env(plan: Plan) -> frozenset[str]:
    """The models whose containers the plan makes, so whose secrets it resolves (a model left as it
    is, or only started again, keeps the environment its container already has)."""
    return frozenset(a.model for a in plan.actions if a.model and a.kind in ("create", "recreate"))


def checkpoints(
    desired: DesiredState, remote: dict[HubKey, HubAnswer] | None = None
) -> dict[str, dict[str, str | None]]:
    """What each model's config.json says about its checkpoint (local, else as the Hub has it)."""

    out = {}
    # aliases of one folder (other settings, same weights) read it once
    seen: dict[tuple[str, HubKey | None], dict[str, str | None]] = {}
    for alias, model in desired.models.items():
        if "model_file" in model.spec:
            continue
        key = (str(model.spec["model_dir"]), _remote_key(model.spec))
        if key not in seen:
            facts = model_facts(model.spec, _answer_for(remote, model.spec), weights_too=False)
            seen[key] = {"quant_method": quant_method(facts.get("config"))}
        out[alias] = dict(seen[key])
    return out


def _docker() -> Runtime:
    return DockerRuntime()
