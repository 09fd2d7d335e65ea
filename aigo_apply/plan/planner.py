"""The planner: desired state + observed state -> Plan. Pure: no Docker, HTTP, NVML or files
(a test keeps its imports that way). Every action carries the reasons for it; a file that did
not change plans to nothing but no-ops, every time, because both sides are canonical specs.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from aigo_apply.config.names import BACKUP_SUFFIX, NEXT_SUFFIX
from aigo_apply.desired.labels import PREFIX as LABEL_PREFIX
from aigo_apply.desired.labels import PROJECT, is_ours
from aigo_apply.desired.types import DesiredModel, DesiredState, Route
from aigo_apply.errors import UsageProblem
from aigo_apply.observe.cache_volumes import moved_from_project_volume
from aigo_apply.observe.containers import ObservedContainer, ObservedState, router_project
from aigo_apply.observe.label_checks import display_name, engine_names, next_name, shown
from aigo_apply.plan.canary import NOT_SERVING, gate_for
from aigo_apply.plan.check_findings import findings
from aigo_apply.plan.downtime import with_downtime
from aigo_apply.plan.facts import PlanFacts, PlanRequest
from aigo_apply.plan.fetch_plan import checkpoint_notes, download_actions, lock_moves, pulls, restores
from aigo_apply.plan.lanes import start_lanes
from aigo_apply.plan.payloads import ModelPayload
from aigo_apply.plan.replace_strategy import BESIDE, choose
from aigo_apply.plan.router_plan import STOPPED, router_action
from aigo_apply.plan.spec_diff import adapter_reasons, change_reasons, diff_specs, flatten, image_moved
from aigo_apply.plan.swap_ledger import plan_groups
from aigo_apply.plan.types import Action, Blocker, Change, Plan


def build_plan(
    desired: DesiredState,
    observed: ObservedState,
    facts: PlanFacts | None = None,
    request: PlanRequest | None = None,
) -> Plan:
    """Every decision of an apply, made here and shown before anything runs: which containers are
    created, replaced, started or removed (and why), which images are pulled (the pull policy
    included), which model folders are downloaded, the router's action, and the lanes in which
    models start. See PlanFacts and PlanRequest for the inputs."""
    facts, request = facts or PlanFacts(), request or PlanRequest()
    replace, target = set(request.replace), set(request.target)
    known = set(desired.models) | set(desired.disabled) | {c.alias for c in observed.engines if c.alias}
    for alias in sorted(replace - set(desired.models)):
        if alias in desired.disabled:
            raise UsageProblem(f"--replace {alias}: model '{alias}' is disabled in {desired.file} (enabled: false)")
        raise UsageProblem(f"--replace {alias}: no model '{alias}' in {desired.file}")
    for alias in sorted(target - known):
        raise UsageProblem(f"--target {alias}: no model '{alias}' in {desired.file} or on this machine")

    def wanted(alias: str) -> bool:
        return not target or alias in target

    by_alias: dict[str, list[ObservedContainer]] = {}
    for container in observed.engines:
        by_alias.setdefault(container.alias or "", []).append(container)

    restore_actions = restores(observed, facts.locked_images)
    images = {**observed.images, **{a.image: a.restore.locked_id for a in restore_actions if a.image and a.restore}}
    model_actions: list[Action] = []
    for alias, model in sorted(desired.models.items()):
        if wanted(alias):
            model_actions += _model_actions(model, by_alias.get(alias, []), alias in replace, images)
    for alias, containers in sorted(by_alias.items()):
        if alias not in desired.models and wanted(alias):
            why = (
                f"model '{alias}' is disabled in {desired.file} (enabled: false): its container goes, the file keeps it"
                if alias in desired.disabled
                else f"model '{alias}' is no longer in {desired.file}"
            )
            model_actions += [_remove(c, why) for c in containers]

    model_actions = with_strategies(
        model_actions, desired, by_alias, facts.gpu_ledger, request.skip_canary, facts.host_memory_free
    )
    model_actions = with_downtime(model_actions, desired, images, facts.starts, by_alias)
    desired = placed(desired, model_actions)
    model_actions, quant_blockers = checkpoint_notes(desired, model_actions, facts.checkpoints)
    model_actions += [
        Action(
            f"container.{c.name}",
            "remove",
            ("leftover router (an interrupted router replace started it)",),
            container=c.name,
        )
        for c in observed.spare_routers
    ]
    model_actions += router_action(desired, observed, model_actions, targeted=bool(target), images=images)
    fetch = restore_actions + pulls(model_actions, images, restore_actions, request.pull)
    blockers = _conflicts(desired, observed, target) + quant_blockers
    if request.require_canary:
        blockers += ungated(model_actions)
    warnings = list(desired.warnings) + list(observed.damaged)
    model_actions = lock_moves(desired, observed, model_actions, facts.remote)
    downloads, hub_blockers, hub_warnings = download_actions(desired, observed, model_actions, facts.remote)
    fetch += downloads
    blockers += hub_blockers
    warnings += hub_warnings
    found_blockers, found_warnings = findings(facts.checks, request.ignore)
    blockers += found_blockers
    warnings += found_warnings
    return Plan(
        desired.project,
        desired.file,
        observed.fingerprint(),
        tuple(fetch + model_actions),
        tuple(blockers),
        tuple(warnings),
        tuple(facts.gpu_ledger),
        start_lanes(model_actions, {a: g.name for g in desired.swap_groups for a in g.members}),
        request,
        plan_groups(desired),
    )


def _model_actions(
    model: DesiredModel, containers: list[ObservedContainer], replace: bool, images: dict[str, str]
) -> list[Action]:
    name = model.container.name
    primary = next((c for c in containers if c.name == name), None)
    extras = [_remove(c, _leftover(model.alias, name, c.name)) for c in containers if c is not primary]
    address = f"model.{model.alias}"
    base: dict[str, Any] = {
        "model": model.alias,
        "container": name,
        "image": model.container.image,
        "notes": model.notes,
    }
    waits: dict[str, Any] = {"payload": ModelPayload(model.spec), "ready_timeout": model.ready_timeout}
    if primary is None:
        created = tuple(Change(p, None, v, "create") for p, v in flatten(model.spec))
        return extras + [Action(address, "create", (f"no container {name} exists",), created, **waits, **base)]
    reasons, changes = _differences(model, primary, replace, images)
    if reasons:
        return extras + [Action(address, "recreate", tuple(reasons), tuple(changes), **waits, **base)]
    base["slot"] = primary.slot
    if primary.state in STOPPED:
        code = f" (exit code {primary.exit_code})" if primary.exit_code is not None else ""
        return extras + [Action(address, "start", (f"container is {primary.state}{code}",), **waits, **base)]
    if primary.state == "paused":
        return extras + [Action(address, "start", ("container is paused",), **waits, **base)]
    if primary.state == "restarting":
        return extras + [
            Action(
                address,
                "noop",
                (f"settings match, but the container is restarting after a crash; see `docker logs {name}`",),
                payload=ModelPayload(model.spec),
                **base,
            )
        ]
    return extras + [
        Action(
            address, "noop", ("settings match and the container is running",), payload=ModelPayload(model.spec), **base
        )
    ]


def _differences(
    model: DesiredModel, primary: ObservedContainer, replace: bool, images: dict[str, str]
) -> tuple[list[str], list[Change]]:
    if replace:
        return ["replacement requested with --replace"], []
    if primary.state in ("dead", "removing"):
        return [f"container is {primary.state}"], []
    before = primary.spec
    if before is None:
        return ["the container has no readable spec label (made by hand or by another tool)"], []
    reasons, changes = [], []
    if before != model.spec:
        changes = diff_specs(before, model.spec)
        reasons = change_reasons(changes) + adapter_reasons(before, model.spec)
        if before.get("port") and model.spec.get("socket") and {"port", "socket"} <= {c.path for c in changes}:
            reasons = [r for r in reasons if r not in ("port changed", "socket changed")] + [
                f"the engine now serves on a Unix socket only the router reaches: 127.0.0.1:{before['port']}, "
                "where any local account could reach it without a key, is no longer published"
            ]
    elif primary.spec_hash != model.container.definition_hash():
        reasons = [
            moved_from_project_volume(model.container.labels.get(PROJECT, ""), primary.volumes, model.container)
            or "same settings, but this aigo-apply version defines the container differently "
            "(command line, mounts or options)"
        ]
    moved_reasons, moved = image_moved(model.container.image, primary, images)
    return reasons + moved_reasons, changes + moved


def with_strategies(
    actions: list[Action],
    desired: DesiredState,
    by_alias: dict[str, list[ObservedContainer]],
    ledger: tuple[dict[str, Any], ...],
    skip_canary: bool = False,
    host_free: int | None = None,
) -> list[Action]:
    """Each model's recreate with how its running engine is replaced (plan/replace_strategy.py),
    and its canary gate if it declares one (plan/canary.py)."""
    out = []
    for action in actions:
        if action.kind == "recreate" and action.model in desired.models:
            model = desired.models[action.model]
            old = next((c for c in by_alias.get(action.model, []) if c.name == model.container.name), None)
            strategy = choose(action.model, desired, old.spec if old else None, model.update, ledger, host_free)
            slot = old.slot if old else "a"
            if strategy.name in BESIDE and "socket" in model.spec:  # the new engine takes the other socket
                slot = "b" if slot == "a" else "a"
            serving = old is not None and old.state == "running"
            lengths = [model.spec.get("context_length"), (old.spec or {}).get("context_length") if old else None]
            shortest = min((n for n in lengths if isinstance(n, int)), default=None)
            gate = gate_for(model.canary, strategy.name, strategy.why, skip_canary, serving, shortest)
            action = dataclasses.replace(action, strategy=strategy, slot=slot, canary=gate)
        out.append(action)
    return out


def ungated(actions: list[Action]) -> list[Blocker]:
    """apply --require-canary: every replace of a running model must run its gate."""
    out = []
    for action in actions:
        if action.kind != "recreate" or not action.model or action.strategy is None:
            continue
        if action.canary is not None and action.canary.why == NOT_SERVING:
            continue  # a stopped or crashed engine: nothing runs to be replaced untested
        alias = action.model
        if action.canary is None:
            why = f"models.{alias} declares no canary gate"
        elif not action.canary.runs:
            why = f"its canary does not run: {action.canary.why}"
        else:
            continue
        out.append(
            Blocker(
                "canary.required",
                f"model '{alias}' would be replaced untested (--require-canary): {why}",
                f"declare models.{alias}.canary (or defaults.canary) and let it be a parallel replace "
                f"(models.{alias}.update: parallel, with room for both engines), or apply without --require-canary",
                action.address,
            )
        )
    return out


def placed(desired: DesiredState, actions: list[Action]) -> DesiredState:
    """The desired state with each model's route on the socket its engine serves on now (an engine
    is replaced in its own step, which moves its route; the router's own action compares the rest)."""
    slots = {a.model: a.slot for a in actions if a.model and a.kind in ("noop", "start")}
    routes = tuple(
        Route.of(r.alias, desired.models[r.alias].spec, slots.get(r.alias, "a")) for r in desired.router.routes
    )
    return dataclasses.replace(desired, router=dataclasses.replace(desired.router, routes=routes))


def _leftover(alias: str, name: str, other: str) -> str:
    """Why a second container of a model goes: what a replace that did not finish left, said as such."""
    if other == name + BACKUP_SUFFIX:
        return (
            f"the previous engine of model '{alias}', kept as {other} by a replace that did not finish "
            "(an apply that was interrupted or killed)"
        )
    if other == name + NEXT_SUFFIX:
        return f"the new engine a parallel replace of model '{alias}' started, left by an apply that did not finish"
    return f"leftover container of model '{alias}' (not its current container {name})"


def _remove(container: ObservedContainer, reason: str) -> Action:
    address = (
        "router"
        if container.role == "router"
        else (f"model.{container.alias}" if container.alias else f"container.{container.name}")
    )
    return Action(address, "remove", (reason,), model=container.alias, container=container.name)


def _conflicts(desired: DesiredState, observed: ObservedState, target: set[str]) -> list[Blocker]:
    """Containers that are not ours (no labels, another project's, or damaged: labels the tool could
    not have written, or a name other than the one it derives from them) but hold one of the names
    this plan creates or uses, or one of its ports. A name: the engine's own, the `-aigo-previous`
    name a replace moves the serving engine to (a foreign one there would make apply stop the model
    and start it again around it), the router's. Apply never touches such a container."""
    blockers = []
    models = [m for a, m in sorted(desired.models.items()) if not target or a in target]
    # the others by name and by published port, read once: each model then looks only at the few
    # that can conflict with it (in their order), not at every other container (N x M at scale)
    by_name: dict[str, list[int]] = {}
    by_port: dict[int, list[int]] = {}
    for n, other in enumerate(observed.others):
        by_name.setdefault(other.name, []).append(n)
        for published in other.host_ports:
            by_port.setdefault(published, []).append(n)
    for model in models:
        own, kept = engine_names(desired.project, model.alias)
        names = (own, kept, next_name(desired.project, model.alias))
        address = f"model.{model.alias}"
        port = model.container.host_port
        near = {n for name in names for n in by_name.get(name, ())}
        near.update(by_port.get(port, ()) if port is not None else ())
        for other in (observed.others[n] for n in sorted(near)):
            if other.name in names:
                use = {
                    own: "its container",
                    kept: "the previous version during a replace",
                }.get(other.name, "the new version during a parallel replace")
                blockers.append(
                    _name_conflict(
                        desired.project, other, f"model '{model.alias}' keeps {use}", address, ", or rename the model"
                    )
                )
            elif model.container.host_port in other.host_ports:
                blockers.append(
                    Blocker(
                        "conflict.port",
                        f"port {model.container.host_port} of model '{model.alias}' is {_held_by(other)}, "
                        "which aigo-apply does not manage here",
                        f"stop that container, or set models.{model.alias}.port to a free port",
                        address,
                    )
                )
    router_port, router_name = desired.router.port, desired.router.container.name
    for other in observed.others:
        if other.name == router_name:
            blockers.append(_name_conflict(desired.project, other, "the router runs", "router", ""))
        elif router_port in other.host_ports:
            blockers.append(
                Blocker(
                    "conflict.port",
                    f"the router's port {router_port} is {_held_by(other)}",
                    "stop that container, or set router.port to a free port",
                    "router",
                )
            )
    return blockers


def _held_by(other: ObservedContainer) -> str:
    """Who holds a port: a container that publishes it, or another project's router, which binds its
    port on the host network (observe/containers.py) and would share it with this project's."""
    project = router_project(other.labels)
    if project is not None:
        return f"held by the router of aigo-apply project {shown(project)} (container {display_name(other.name)})"
    return f"published by container {display_name(other.name)}"


def _name_conflict(project: str, other: ObservedContainer, use: str, address: str, besides: str) -> Blocker:
    """A container aigo-apply does not manage holds a name it needs: say which, why it is not ours,
    and that the user (never the tool) removes or renames it."""
    name = other.name
    why = (
        "it carries no aigo-apply labels for this project"
        if not is_ours(other.labels, project)
        else "its aigo-apply labels are not ones aigo-apply writes for that name (see the warning about it)"
    )
    return Blocker(
        "conflict.name",
        f"a container named {name} exists but is not managed by aigo-apply for project '{project}' ({why}); "
        f"under that name {use}, and aigo-apply never stops, removes or renames a container it does not manage",
        f"remove it (docker rm -f {name}) or rename it (docker rename {name} NEW-NAME){besides}",
        address,
    )


def destroy_plan(project: str, file: str, observed: ObservedState) -> Plan:
    """Remove every container of the project (and nothing else). A container named like the
    project's own but not managed by aigo-apply for it is left alone, and the plan says so."""
    engines = [c for c in observed.ours if c.role != "router"]
    router = [c for c in observed.ours if c.role == "router"]  # last: routes go before their engines stop
    actions = tuple(_remove(c, f"destroy removes every container of project '{project}'") for c in engines + router)
    return Plan(project, file, observed.fingerprint(), actions, warnings=observed.damaged + _left_alone(observed))


def _left_alone(observed: ObservedState) -> tuple[str, ...]:
    """Containers without aigo-apply labels (damaged ones have their own warning; another project's
    are its own) whose names look like this project's: destroy never removes them."""
    prefix = f"aigo-{observed.project}-"
    return tuple(
        f"container {display_name(c.name)} is named like project '{observed.project}' containers but carries no "
        "aigo-apply labels: destroy leaves it alone (remove it yourself if it is not needed)"
        for c in observed.others
        if c.name.startswith(prefix) and not any(k.startswith(LABEL_PREFIX) for k in c.labels)
    )
