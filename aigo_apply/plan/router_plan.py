"""The router's action in a plan: created, recreated or started like an engine; reloaded when its
files differ from what is deployed, or when it routes to an engine that is not running (a stale
route). The deployed files are trusted by their render key; only a mismatch renders them again, and
only a difference in the files themselves is a reload (another version of this tool that renders the
same files has another key, not another router)."""

from __future__ import annotations

import difflib
from typing import TypedDict

from aigo_apply.desired.types import DesiredState
from aigo_apply.observe.containers import ObservedState
from aigo_apply.plan.payloads import RouterPayload
from aigo_apply.plan.spec_diff import change_reasons, diff_specs, flatten, image_moved
from aigo_apply.plan.types import Action, Change
from aigo_apply.router.haproxy import KEYS_DIGEST_FILE, adapters_from_models_json, render_files, routes_from_models_json
from aigo_apply.router.render_key import render_key, served_files, verified_render_key

STOPPED = ("created", "exited")


class _Base(TypedDict):
    """What each of the router's actions has (Action's fields by name)."""

    container: str
    image: str
    payload: RouterPayload
    ready_timeout: float


def router_action(
    desired: DesiredState, observed: ObservedState, model_actions: list[Action], targeted: bool, images: dict[str, str]
) -> list[Action]:
    """The router: created, recreated or started like an engine; reloaded when its files differ
    from what is deployed, or when it routes to an engine that is not running (a stale route)."""
    want, have = desired.router, observed.router
    base: _Base = {
        "container": want.container.name,
        "image": want.container.image,
        "payload": RouterPayload(want.spec),
        "ready_timeout": 60.0,
    }
    if have is None:
        created = tuple(Change(p, None, v, "create") for p, v in flatten(want.spec))
        return [Action("router", "create", (f"no router container {want.container.name} exists",), created, **base)]
    before = have.spec
    moved_reasons, moved = image_moved(want.container.image, have, images, "router")
    if before != want.spec or have.spec_hash != want.container.definition_hash() or have.state in ("dead", "removing"):
        changes = diff_specs(before, want.spec) if before else []
        changes = [Change(c.path, c.before, c.after, "router") for c in changes]
        reasons = change_reasons(changes)
        if have.state in ("dead", "removing"):
            reasons.append(f"router container is {have.state}")
        elif not reasons and before:  # the same settings made into another container: another version of this tool
            reasons.append("same settings, but this aigo-apply version defines the router container differently")
        elif not reasons:
            reasons.append("the router container is defined differently")
        return [Action("router", "recreate", tuple(reasons + moved_reasons), tuple(changes + moved), **base)]
    if moved:
        return [Action("router", "recreate", tuple(moved_reasons), tuple(moved), **base)]
    if have.state in STOPPED + ("paused",):
        return [Action("router", "start", (_stopped_reason(have.state, have.status),), **base)]
    if targeted:
        return []
    reasons = _route_reasons(desired, observed, model_actions) + _hold_reasons(observed.router_files)
    same = verified_render_key(observed.router_files) == render_key(want.settings, list(want.routes))
    rendered = {} if same else render_files(want.settings, list(want.routes))
    diff = "" if same else unified_diff(served_files(observed.router_files), served_files(rendered))
    if (
        want.settings.keys_digest
        and rendered
        and rendered.get(KEYS_DIGEST_FILE) != observed.router_files.get(KEYS_DIGEST_FILE)
    ):
        reasons.append("router.api_keys: the keys changed; after the reload only the new keys are accepted")
    if diff and not reasons:
        reasons = ["the router configuration differs from what this file and aigo-apply version render"]
    if reasons:
        return [Action("router", "reload_router", tuple(reasons), **base, notes=(), diff=diff or None)]
    return [Action("router", "noop", ("routes match the running models",), **base)]


def _stopped_reason(state: str, status: str) -> str:
    """Why a router container is not running, as far as Docker says, and why Docker left it so: a
    router that exited is restarted by Docker (`unless-stopped`) unless Docker counts it as stopped
    by hand, which it also does for a container it once signalled, how earlier versions of aigo-apply
    reloaded the router (https://github.com/moby/moby/issues/41302); reloads now signal from inside
    the container."""
    if state != "exited":
        return f"router container is {state}"
    return (
        f"router container is exited ({status or 'no status'}) and Docker did not restart it: it was stopped "
        "by hand, or an earlier aigo-apply reloaded it with `docker kill --signal`, which Docker counts as a "
        "manual stop; apply starts it, and its reloads no longer do that"
    )


def _hold_reasons(deployed: dict[str, str]) -> list[str]:
    """The models the deployed router still holds: apply holds a model only while it replaces its
    engine, and releases it before it ends, so a plan that sees one reads a replace that did not finish
    (its apply was killed), unless an apply runs right now."""
    held = sorted({line.split()[0] for line in deployed.get("held.map", "").splitlines() if line.split()})
    if not held:
        return []
    names = ", ".join(f"'{a}'" for a in held)
    return [
        f"the router holds the requests of {names} for a replace that did not finish (an apply that was killed, "
        "unless one runs now); the reload releases them"
    ]


def _route_reasons(desired: DesiredState, observed: ObservedState, model_actions: list[Action]) -> list[str]:
    deployed = _deployed_routes(observed.router_files)
    running = {c.alias for c in observed.engines if c.state == "running"}
    reasons = []
    for alias in sorted(set(desired.models) - set(deployed)):
        reasons.append(f"route for model {alias} to be added")
    for alias in sorted(set(deployed) - set(desired.models)):
        reasons.append(f"route for model {alias} to be removed" + (" (disabled)" if alias in desired.disabled else ""))
    for alias in sorted(set(deployed) & set(desired.models) - running):
        state = next((c.state for c in observed.engines if c.alias == alias), "absent")
        reasons.append(f"stale route: model {alias} has no running container ({state})")
    deployed_adapters = adapters_from_models_json(observed.router_files.get("models.json", ""))
    wanted = {a.alias: a.base for a in desired.router.settings.adapters}
    for alias in sorted(set(wanted) - set(deployed_adapters)):
        reasons.append(f"route for adapter {alias} (on model {wanted[alias]}) to be added")
    for alias in sorted(set(deployed_adapters) - set(wanted)):
        reasons.append(f"route for adapter {alias} (on model {deployed_adapters[alias]}) to be removed")
    return reasons


def _deployed_routes(files: dict[str, str]) -> list[str]:
    return routes_from_models_json(files.get("models.json", ""))


def unified_diff(before: dict[str, str], after: dict[str, str]) -> str:
    """A unified diff of two config folders, file by file (what `plan --diff` shows)."""
    out: list[str] = []
    for name in sorted(set(before) | set(after)):
        a, b = before.get(name, ""), after.get(name, "")
        if a != b:
            out += difflib.unified_diff(
                a.splitlines(keepends=True), b.splitlines(keepends=True), f"deployed/{name}", f"desired/{name}"
            )
    return "".join(out)
