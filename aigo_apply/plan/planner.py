"""The planner: desired state + observed state -> Plan. Pure: no Docker, HTTP, NVML or files
(a test keeps its imports that way). Every action carries the reasons for it; a file that did
not change plans to nothing but no-ops, every time, because both sides are canonical specs.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable
from typing import Any

from aigo_apply.config.doc_path import dotted
from aigo_apply.desired.model_store import downloads, is_complete, label
from aigo_apply.desired.types import DesiredModel, DesiredState
from aigo_apply.errors import UsageProblem
from aigo_apply.observe.containers import ObservedContainer, ObservedState
from aigo_apply.plan.types import Action, Blocker, Change, Plan
from aigo_apply.router.haproxy import render_files, render_key, routes_from_models_json, verified_render_key

STOPPED = ("created", "exited")


def build_plan(
    desired: DesiredState,
    observed: ObservedState,
    replace: Iterable[str] = (),
    target: Iterable[str] = (),
    checks: Iterable[Any] = (),
    ignore: Iterable[str] = (),
    gpu_ledger: Iterable[dict[str, Any]] = (),
    remote: dict[tuple, dict[str, Any]] | None = None,
    checkpoints: dict[str, dict[str, Any]] | None = None,
    locked_images: dict[str, dict[str, Any]] | None = None,
) -> Plan:
    """`checks` are the host readiness checks (hostcheck.Check); blocking ones become blockers
    unless their id is in `ignore`, which the plan then states as a warning. `gpu_ledger` (built by
    gpu_ledger.build, its verdicts already among the checks) is carried into the plan as it is.
    `remote` is what the Hub said about each missing download, by (repo, revision, file): its
    commit and size, or the error (a gated or missing repo blocks the plan). `checkpoints` is what
    each model's config.json says about it (`quant_method` of a pre-quantized checkpoint).
    `locked_images` (apply --locked): tags to put back on the image aigo.lock records, by re-tagging
    or by pulling its digest; the containers are planned against the restored images."""
    replace, target = set(replace), set(target)
    known = set(desired.models) | {c.alias for c in observed.engines if c.alias}
    for alias in sorted(replace - set(desired.models)):
        raise UsageProblem(f"--replace {alias}: no model '{alias}' in {desired.file}")
    for alias in sorted(target - known):
        raise UsageProblem(f"--target {alias}: no model '{alias}' in {desired.file} or on this machine")
    wanted = lambda alias: not target or alias in target

    by_alias: dict[str, list[ObservedContainer]] = {}
    for container in observed.engines:
        by_alias.setdefault(container.alias or "", []).append(container)

    restores = _restores(observed, locked_images or {})
    images = {**observed.images, **{a.image: a.spec["locked_id"] for a in restores}}
    model_actions: list[Action] = []
    for alias, model in sorted(desired.models.items()):
        if wanted(alias):
            model_actions += _model_actions(model, by_alias.get(alias, []), alias in replace, images)
    for alias, containers in sorted(by_alias.items()):
        if alias not in desired.models and wanted(alias):
            model_actions += [_remove(c, f"model '{alias}' is no longer in {desired.file}") for c in containers]

    model_actions, quant_blockers = _checkpoint_notes(desired, model_actions, checkpoints or {})
    router = _router_action(desired, observed, model_actions, targeted=bool(target), images=images)
    model_actions += router
    pulls = restores + _pulls(model_actions, images)
    blockers = _conflicts(desired, observed, target) + quant_blockers
    warnings = list(desired.warnings)
    model_actions = _lock_moves(desired, observed, model_actions, remote or {})
    fetches, hub_blockers, hub_warnings = _downloads(desired, observed, model_actions, remote or {})
    pulls += fetches
    blockers += hub_blockers
    warnings += hub_warnings
    ignore = set(ignore)
    for check in checks:
        if check.status == "blocking" and check.id in ignore:
            warnings.append(f"readiness check {check.id} ignored (--ignore-readiness): {check.message}")
        elif check.status == "blocking":
            blockers.append(Blocker(check.id, check.message, check.remediation, "host"))
        elif check.status == "warning":
            warnings.append(
                f"{check.id}: {check.message} ({check.remediation})" if check.remediation else check.message
            )
    return Plan(
        desired.project,
        desired.file,
        observed.fingerprint(),
        tuple(pulls + model_actions),
        tuple(blockers),
        tuple(warnings),
        tuple(gpu_ledger),
    )


def _router_action(
    desired: DesiredState, observed: ObservedState, model_actions: list[Action], targeted: bool, images: dict[str, str]
) -> list[Action]:
    """The router: created, recreated or started like an engine; reloaded when its files differ
    from what is deployed, or when it routes to an engine that is not running (a stale route)."""
    want, have = desired.router, observed.router
    base = {"container": want.container.name, "image": want.container.image, "spec": want.spec, "ready_timeout": 60.0}
    if have is None:
        changes = tuple(Change(p, None, v, "create") for p, v in _flatten(want.spec))
        return [Action("router", "create", (f"no router container {want.container.name} exists",), changes, **base)]
    before = have.spec
    moved_reasons, moved = _image_moved(want.container.image, have, images, "router")
    if before != want.spec or have.spec_hash != want.container.definition_hash() or have.state in ("dead", "removing"):
        changes = diff_specs(before, want.spec) if before else []
        changes = [Change(c.path, c.before, c.after, "router") for c in changes]
        reasons = [f"{c.path} changed" for c in changes] or ["the router container is defined differently"]
        return [Action("router", "recreate", tuple(reasons + moved_reasons), tuple(changes + moved), **base)]
    if moved:
        return [Action("router", "recreate", tuple(moved_reasons), tuple(moved), **base)]
    if have.state in STOPPED + ("paused",):
        return [Action("router", "start", (f"router container is {have.state}",), **base)]
    if targeted:
        return []
    reasons = _route_reasons(desired, observed, model_actions)
    same = verified_render_key(observed.router_files) == render_key(want.settings, list(want.routes))
    diff = "" if same else unified_diff(observed.router_files, render_files(want.settings, list(want.routes)))
    if diff and not reasons:
        reasons = ["the router configuration differs from what this file and aigo-apply version render"]
    if reasons:
        return [Action("router", "reload_router", tuple(reasons), **base, notes=(), diff=diff or None)]
    return [Action("router", "noop", ("routes match the running models",), **base)]


def _route_reasons(desired: DesiredState, observed: ObservedState, model_actions: list[Action]) -> list[str]:
    deployed = _deployed_routes(observed.router_files)
    running = {c.alias for c in observed.engines if c.state == "running"}
    reasons = []
    for alias in sorted(set(desired.models) - set(deployed)):
        reasons.append(f"route for model {alias} to be added")
    for alias in sorted(set(deployed) - set(desired.models)):
        reasons.append(f"route for model {alias} to be removed")
    for alias in sorted(set(deployed) & set(desired.models) - running):
        state = next((c.state for c in observed.engines if c.alias == alias), "absent")
        reasons.append(f"stale route: model {alias} has no running container ({state})")
    return reasons


def _deployed_routes(files: dict[str, str]) -> list[str]:
    return routes_from_models_json(files.get("models.json", ""))


def unified_diff(before: dict[str, str], after: dict[str, str]) -> str:
    """A unified diff of two config folders, file by file (what `plan --diff` shows)."""
    out = []
    for name in sorted(set(before) | set(after)):
        a, b = before.get(name, ""), after.get(name, "")
        if a != b:
            out += difflib.unified_diff(
                a.splitlines(keepends=True), b.splitlines(keepends=True), f"deployed/{name}", f"desired/{name}"
            )
    return "".join(out)


def _model_actions(
    model: DesiredModel, containers: list[ObservedContainer], replace: bool, images: dict[str, str]
) -> list[Action]:
    name = model.container.name
    primary = next((c for c in containers if c.name == name), None)
    extras = [
        _remove(c, f"leftover container of model '{model.alias}' (not its current container {name})")
        for c in containers
        if c is not primary
    ]
    address = f"model.{model.alias}"
    base = {"model": model.alias, "container": name, "image": model.container.image, "notes": model.notes}
    waits = {"spec": model.spec, "ready_timeout": model.ready_timeout}
    if primary is None:
        changes = tuple(Change(p, None, v, "create") for p, v in _flatten(model.spec))
        return extras + [Action(address, "create", (f"no container {name} exists",), changes, **waits, **base)]
    reasons, changes = _differences(model, primary, replace, images)
    if reasons:
        return extras + [Action(address, "recreate", tuple(reasons), tuple(changes), **waits, **base)]
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
                spec=model.spec,
                **base,
            )
        ]
    return extras + [Action(address, "noop", ("settings match and the container is running",), spec=model.spec, **base)]


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
        reasons = [f"{c.path} changed" for c in changes]
    elif primary.spec_hash != model.container.definition_hash():
        reasons = [
            "same settings, but this aigo-apply version defines the container differently "
            "(command line, mounts or options)"
        ]
    moved_reasons, moved = _image_moved(model.container.image, primary, images)
    return reasons + moved_reasons, changes + moved


def _image_moved(
    ref: str, container: ObservedContainer, images: dict[str, str], effect: str = "recreate"
) -> tuple[list[str], list[Change]]:
    """A container made from `ref` (repo:tag), which now names another image on this machine (pulled
    or rebuilt since), runs stale code: recreate it, as docker compose does. An image no longer here,
    or an id Docker did not report, says nothing either way. (Docker's list shows such a container's
    image as a bare id, so the ref comes from the file.)"""
    local, running = images.get(ref), container.image_id
    if not local or not running or local == running:
        return [], []
    return (
        [
            f"image {ref} on this machine is now {local[:19]}; the container runs {running[:19]} "
            "(the tag was pulled or rebuilt since the container was made)"
        ],
        [Change("image_id", running, local, effect)],
    )


def diff_specs(before: dict[str, Any], after: dict[str, Any]) -> list[Change]:
    """Field-level changes between two canonical specs; a list counts as one value (gpus: [0, 1] -> [0])."""
    from deepdiff import DeepDiff  # only paid for when something differs

    paths: set[tuple] = set()
    for level in (lvl for items in DeepDiff(before, after, verbose_level=2).tree.values() for lvl in items):
        path = tuple(level.path(output_format="list"))
        cut = next((i for i, part in enumerate(path) if isinstance(part, int)), len(path))
        paths.add(path[:cut])
    return [Change(dotted(p), _get(before, p), _get(after, p), "recreate") for p in sorted(paths, key=dotted)]


def _get(data: Any, path: tuple) -> Any:
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


def _flatten(data: dict[str, Any], prefix: tuple = ()) -> list[tuple[str, Any]]:
    out = []
    for key, value in sorted(data.items()):
        if isinstance(value, dict) and not (value and set(value) <= {"from_env", "from_file"}):
            out += _flatten(value, prefix + (key,))  # an empty mapping (no env) shows nothing
        else:
            out.append((dotted(prefix + (key,)), value))
    return out


def _remove(container: ObservedContainer, reason: str) -> Action:
    address = (
        "router"
        if container.role == "router"
        else (f"model.{container.alias}" if container.alias else f"container.{container.name}")
    )
    return Action(address, "remove", (reason,), model=container.alias, container=container.name)


def _restores(observed: ObservedState, locked: dict[str, dict[str, Any]]) -> list[Action]:
    """apply --locked: one pull action per tag that must name aigo.lock's image again."""
    out = []
    for ref, how in sorted(locked.items()):
        now = observed.images.get(ref)
        where = (
            "it is still on this machine: re-tag it"
            if how["how"] == "retag"
            else f"pull it by its digest {how['digest']}"
        )
        out.append(
            Action(
                f"image.{ref}",
                "pull",
                (
                    f"aigo.lock records {how['locked_id'][:19]}; the tag names {now[:19] if now else 'no image'} now; {where}",
                ),
                image=ref,
                spec=dict(how),
            )
        )
    return out


def _pulls(actions: list[Action], local: dict[str, str]) -> list[Action]:
    needed = sorted({a.image for a in actions if a.kind in ("create", "recreate") and a.image})
    return [
        Action(f"image.{ref}", "pull", ("the image is not on this machine",), image=ref)
        for ref in needed
        if ref not in local
    ]


def _quant_family(method: str) -> str:
    """awq_marlin and auto_awq are kernels for an awq checkpoint; modelopt_fp4 for a modelopt one..."""
    return method.lower().removeprefix("auto_").replace("-", "_").split("_")[0]


def _checkpoint_notes(
    desired: DesiredState, actions: list[Action], checkpoints: dict[str, dict[str, Any]]
) -> tuple[list[Action], list[Blocker]]:
    """Say when a checkpoint is pre-quantized; block a quantization setting that contradicts it."""
    out, blockers = [], []
    for action in actions:
        method = checkpoints.get(action.model or "", {}).get("quant_method") if action.kind != "remove" else None
        if not method:
            out.append(action)
            continue
        model = desired.models[action.model]
        setting = model.spec.get("vllm", {}).get("quantization") if model.spec["engine"] == "vllm" else None
        note = f"pre-quantized checkpoint ({method}, from config.json); the engine reads its quantization from it"
        out.append(dataclasses.replace(action, notes=tuple(action.notes) + (note,)))
        if setting and _quant_family(setting) != _quant_family(method):
            blockers.append(
                Blocker(
                    "model.quantization",
                    f"models.{action.model}.vllm.quantization is '{setting}', but the checkpoint is "
                    f"quantized with '{method}' (config.json quantization_config.quant_method); vLLM would refuse it",
                    f"remove vllm.quantization (vLLM then uses the checkpoint's own method), or name a {method} kernel",
                    action.address,
                )
            )
    return out, blockers


def _downloads(
    desired: DesiredState, observed: ObservedState, model_actions: list[Action], remote: dict[tuple, dict[str, Any]]
) -> tuple[list[Action], list[Blocker], list[str]]:
    """A `download` for every model folder that is not complete on this machine and that a model
    being created, replaced or started needs; it runs before any container is stopped."""
    acting = {a.model for a in model_actions if a.kind in ("create", "recreate", "start") and a.model}
    actions, blockers, warnings = [], [], []
    for need in downloads(desired.specs()):
        info = remote.get((need["repo"], need["revision"], need["file"]), {})
        if is_complete(observed.model_files.get(need["dest"]), need["file"], info.get("pin")) or not acting & set(
            need["models"]
        ):
            continue
        what = label(need)
        first = f"model.{need['models'][0]}"
        if "error" in info:
            if info.get("access"):
                blockers.append(Blocker(info.get("blocker", "hub.access"), info["error"], info.get("fix", ""), first))
            else:
                warnings.append(f"{what}: the Hub could not tell its size ({info['error']})")
            reason = f"{what} is not on this machine (size unknown)"
        elif info:
            count = len(info["files"])
            reason = (
                f"{what} is not on this machine: {count} file{'s' if count != 1 else ''}, "
                f"{_size(info['bytes'])}, commit {info['commit'][:12]}"
            )
        else:
            reason = f"{what} is not on this machine"
        if info.get("pin"):
            reason += " (the commit aigo.lock records)"
        spec = {k: need[k] for k in ("repo", "revision", "file", "dest", "models")}
        spec.update({k: info[k] for k in ("commit", "bytes", "pin") if k in info})
        actions.append(Action(f"download.{what}", "download", (reason,), spec=spec))
    return actions, blockers, warnings


def _lock_moves(
    desired: DesiredState, observed: ObservedState, actions: list[Action], remote: dict[tuple, dict[str, Any]]
) -> list[Action]:
    """With `apply --locked`, a model whose folder holds another commit than aigo.lock records is
    replaced once the recorded commit is downloaded (its files change under it)."""
    moving: dict[str, str] = {}
    for need in downloads(desired.specs()):
        pin = remote.get((need["repo"], need["revision"], need["file"]), {}).get("pin")
        here = (observed.model_files.get(need["dest"]) or {}).get("commit")
        if pin and here and here != pin:
            moving.update(dict.fromkeys(need["models"], pin))
    out = []
    for action in actions:
        if action.model in moving and action.kind in ("noop", "start"):
            reason = f"its model files move to commit {moving[action.model][:12]} (aigo.lock)"
            action = dataclasses.replace(
                action,
                kind="recreate",
                reasons=(reason,),
                changes=(),
                ready_timeout=desired.models[action.model].ready_timeout,
            )
        out.append(action)
    return out


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def _conflicts(desired: DesiredState, observed: ObservedState, target: set[str]) -> list[Blocker]:
    """Containers that are not ours but hold one of our names or ports."""
    blockers = []
    models = [m for a, m in sorted(desired.models.items()) if not target or a in target]
    for model in models:
        name = model.container.name
        for other in observed.others:
            address = f"model.{model.alias}"
            if other.name == name:
                blockers.append(
                    Blocker(
                        "conflict.name",
                        f"a container named {name} exists but is not managed by aigo-apply "
                        f"for project '{desired.project}'",
                        f"remove or rename it (docker rm -f {name}), or rename the model",
                        address,
                    )
                )
            elif model.container.host_port in other.host_ports:
                blockers.append(
                    Blocker(
                        "conflict.port",
                        f"port {model.container.host_port} of model '{model.alias}' is published by "
                        f"container {other.name}, which aigo-apply does not manage here",
                        f"stop that container, or set models.{model.alias}.port to a free port",
                        address,
                    )
                )
    router_port = desired.router.port
    for other in observed.others:
        if router_port in other.host_ports:
            blockers.append(
                Blocker(
                    "conflict.port",
                    f"the router's port {router_port} is published by container {other.name}",
                    "stop that container, or set router.port to a free port",
                    "router",
                )
            )
    return blockers


def destroy_plan(project: str, file: str, observed: ObservedState) -> Plan:
    """Remove every container of the project (and nothing else)."""
    engines = [c for c in observed.ours if c.role != "router"]
    router = [c for c in observed.ours if c.role == "router"]  # last: routes go before their engines stop
    actions = tuple(_remove(c, f"destroy removes every container of project '{project}'") for c in engines + router)
    return Plan(project, file, observed.fingerprint(), actions)
