"""`aigo-apply status`: one row per model (container state, readiness, port, image, uptime) and a
one-line drift summary from the same planner `plan` uses. Readiness here is a quick look
(`/health` and the alias in `/v1/models` at each engine's own address, in parallel), never a
generated token. An engine that publishes no port is reached on its socket in this project's state
folder (derived from the alias, never from a label)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, TypedDict

from aigo_apply.adapters.engine_http import EngineClient
from aigo_apply.adapters.engine_metrics import fetch_url, samples
from aigo_apply.adapters.runtime import Runtime
from aigo_apply.desired import labels as L
from aigo_apply.desired.types import DesiredState, EngineAddress, socket_file
from aigo_apply.observe.containers import ObservedContainer, ObservedState
from aigo_apply.observe.docker_answers import ContainerConfig
from aigo_apply.observe.start_log import ShownStart, StartRecord
from aigo_apply.plan.planner import build_plan
from aigo_apply.platforms.docker import failed_starts, start_records
from aigo_apply.platforms.docker.cache_volumes import next_starts
from aigo_apply.platforms.docker.effective import EngineReads, compare, read_engine
from aigo_apply.router.haproxy import routes_from_models_json

PROBE_TIMEOUT = 1.0


class FailedShown(TypedDict):
    """A model's last failed start as a status row gives it (`last_failed_start`)."""

    at: str
    error: str | None  # the root cause line, if the log has one
    why: str
    log: str


NEXT_START = {
    "warm": "its image's cache volume holds what a start of these settings on this image compiled",
    "cold": "nothing compiled for these settings on this image is in its cache volume yet",
}


def collect(
    desired: DesiredState,
    observed: ObservedState,
    runtime: Runtime | None = None,
    router_key: str | None = None,
    state: Path | None = None,
) -> dict[str, Any]:
    """The status report; with `runtime`, each running model's effective settings (platforms/docker/effective.py)
    read from its engine and container, every field where they differ from the file, and which
    engines the router sees stalled (its /metrics, with `router_key` when it needs one); with
    `state` (the project's state folder), whether each model's last start failed and what its last
    measured start took (platforms/docker/start_records.py); with `runtime`, whether each model's next start
    finds compiled code in its image's cache volume (platforms/docker/cache_volumes.py: "warm" or "cold", None for
    an engine that keeps none or a model not in the file)."""
    plan = build_plan(desired, observed)
    routed = set(routes_from_models_json(observed.router_files.get("models.json", "")))
    by_alias = {c.alias: c for c in observed.ours if c.alias and c.name == _name(desired, c.alias, c)}
    aliases = sorted(set(desired.models) | set(desired.disabled) | {c.alias for c in observed.ours if c.alias})
    containers = {a: by_alias.get(a) for a in aliases}
    on_demand = {a for a, m in desired.models.items() if m.spec.get("on_demand")}
    sockets = desired.router.spec.get("sockets_dir", "")
    where = {a: address_of(containers[a], sockets, a) for a in aliases}
    with ThreadPoolExecutor(max_workers=min(16, max(1, len(aliases)))) as pool:
        ready = dict(zip(aliases, pool.map(lambda a: _probe(a, containers[a], where[a]), aliases), strict=False))
        sleep = dict(
            zip(
                aliases,
                pool.map(lambda a: _sleep_state(a in on_demand, containers[a], where[a]), aliases),
                strict=False,
            )
        )
        engines = dict(
            zip(aliases, pool.map(lambda a: _engine_reads(a, containers[a], where[a]), aliases), strict=False)
        )
        configs = dict(
            zip(aliases, pool.map(lambda a: _container_config(runtime, containers[a]), aliases), strict=False)
        )
    images_now = _images_now(runtime, desired, containers)
    caches = next_starts(desired, observed, runtime, _starts(state)) if runtime is not None else {}
    stalls = router_stalls(desired, router_key) if runtime is not None and observed.router else {}
    rows = []
    for alias in aliases:
        c = containers[alias]
        port = (
            c.ports[0][1]
            if c and c.ports
            else (desired.models[alias].container.host_port if alias in desired.models else None)
        )
        rows.append(
            {
                "model": alias,
                "in_file": alias in desired.models or alias in desired.disabled,
                "enabled": alias not in desired.disabled,
                "container": c.name if c else None,
                "state": c.state if c else "absent",
                "ready": ready[alias],
                "port": port,  # None: it publishes none (on its Unix socket, or not running)
                "image": _image(c)
                if c
                else (desired.models[alias].container.image if alias in desired.models else None),
                "uptime": c.status if c else "",
                "route": alias in routed,
                "sleep": sleep[alias],  # on-demand models: "awake", "asleep" (None: not on demand, or unknown)
                "last_failed_start": _last_failed(state, alias, c),
                "last_start": _last_start(state, alias),
                "next_start_cache": caches.get(alias),
            }
        )
        if runtime is not None:
            rows[-1]["stalled"] = stalls.get(alias)  # None: not known (not watched, or the router did not say)
            model = desired.models.get(alias)
            image_now = images_now.get(model.container.image) if model else None
            rows[-1]["effective"], rows[-1]["drift"] = compare(model, c, engines[alias], configs[alias], image_now)
    changing = sorted({a.model for a in plan.actions if a.kind not in ("noop", "pull") and a.model})
    router_action = next((a for a in plan.actions if a.is_router), None)
    r = observed.router
    in_sync = router_action is None or router_action.kind == "noop"
    router = {
        "container": r.name if r else None,
        "state": r.state if r else "absent",
        "url": f"http://{desired.router.spec['bind']}:{desired.router.port}/v1",
        "routes": sorted(routed),
        "in_sync": in_sync,
        # models whose requests the deployed router holds (a replace in progress, or one a killed apply left)
        "held": sorted({ln.split()[0] for ln in observed.router_files.get("held.map", "").splitlines() if ln.split()}),
    }
    # containers of this project that are no model's current one: what a replace that did not finish left
    current = {c.name for c in containers.values() if c is not None}
    leftovers = [
        {"container": c.name, "model": c.alias, "state": c.state}
        for c in observed.ours
        if c.role == L.ROLE_ENGINE and c.alias and c.name not in current
    ] + [{"container": c.name, "model": None, "state": c.state} for c in observed.spare_routers]
    return {
        "project": desired.project,
        "config_file": desired.file,
        "models": rows,
        "router": router,
        "leftovers": sorted(leftovers, key=lambda x: x["container"]),
        "drift": {
            "models_changing": len(changing),
            "models": changing,
            "blocked": bool(plan.blockers),
            "router": None if router_action is None or in_sync else router_action.kind,
        },
    }


def router_stalls(desired: DesiredState, key: str | None) -> dict[str, bool]:
    """alias -> whether the router sees its engine stalled (aigo_engine_stalled on its /metrics); {}
    when the router does not answer."""
    spec = desired.router.spec
    host = "127.0.0.1" if spec["bind"] in ("0.0.0.0", "::") else spec["bind"]
    text = fetch_url(f"http://{host}:{spec['port']}/metrics", 5, key) or ""
    return {
        labels["model"]: value == "1"
        for labels, value in samples(text, "aigo_engine_stalled")
        if labels.get("project") == desired.project and "model" in labels
    }


def _last_failed(state: Path | None, alias: str, container: ObservedContainer | None) -> FailedShown | None:
    """The model's newest kept failed start (platforms/docker/failed_starts.py) when it came after the container
    that runs now was made (a failed replace puts the previous one back: that start still failed)."""
    record = failed_starts.newest(state, alias) if state is not None else None
    if record is None:
        return None
    try:
        failed_at = datetime.fromisoformat(record.at.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
    if container is not None and container.created is not None and container.created > failed_at:
        return None
    return {"at": record.at, "error": record.error, "why": record.why, "log": str(record.log)}


def _last_start(state: Path | None, alias: str) -> ShownStart | None:
    """The model's last measured start: {seconds, phases, cache, image_id, at}; None before any."""
    record = start_records.newest(state, alias) if state is not None else None
    return record.shown() if record is not None else None


def _starts(state: Path | None) -> Callable[[str], tuple[StartRecord, ...]]:
    """A model's kept starts, newest first (none without a state folder)."""
    return lambda alias: start_records.read(state, alias) if state is not None else ()


def _engine_reads(alias: str, container: ObservedContainer | None, address: EngineAddress | None) -> EngineReads:
    if container is None or address is None:
        return {}
    return read_engine(address, str((container.spec or {}).get("engine") or "vllm"), alias)


def _container_config(runtime: Runtime | None, container: ObservedContainer | None) -> ContainerConfig:
    return runtime.container_config(container.id) if runtime is not None and container is not None else {}


def _images_now(
    runtime: Runtime | None, desired: DesiredState, containers: dict[str, ObservedContainer | None]
) -> dict[str, str]:
    """The image id each running model's tag in the file names now (one inspect per image)."""
    if runtime is None:
        return {}
    wanted = {m.container.image for a, m in desired.models.items() if containers.get(a) is not None}
    found = {ref: runtime.inspect_image(ref) for ref in sorted(wanted)}
    return {ref: str(info["Id"]) for ref, info in found.items() if info and info.get("Id")}


def _name(desired: DesiredState, alias: str, c: ObservedContainer) -> str:
    model = desired.models.get(alias)
    return model.container.name if model else c.name


def address_of(container: ObservedContainer | None, sockets_dir: str, alias: str) -> EngineAddress | None:
    """Where this machine reaches a running engine: the port it publishes on 127.0.0.1, else its
    socket in this project's sockets folder."""
    if container is None or container.state != "running":
        return None
    if container.ports:
        return EngineAddress(port=container.ports[0][1])
    return EngineAddress(socket=f"{sockets_dir}/{alias}/{socket_file(container.slot)}") if sockets_dir else None


def _probe(alias: str, container: ObservedContainer | None, address: EngineAddress | None) -> bool:
    if container is None or address is None:
        return False
    import httpx

    try:
        with EngineClient(address, PROBE_TIMEOUT) as http:
            if http.get("/health").status_code != 200:
                return False
            listed = http.get("/v1/models").json().get("data", [])
            return alias in {m.get("id") for m in listed}
    except (httpx.HTTPError, OSError, ValueError, AttributeError):
        return False


def _sleep_state(on_demand: bool, container: ObservedContainer | None, address: EngineAddress | None) -> str | None:
    """An on-demand model's engine: awake or asleep (vLLM's GET /is_sleeping), None when unknown."""
    if not on_demand or container is None or address is None:
        return None
    import httpx

    try:
        with EngineClient(address, PROBE_TIMEOUT) as http:
            asleep = http.get("/is_sleeping").json().get("is_sleeping")
    except (httpx.HTTPError, OSError, ValueError, AttributeError):
        return None
    return None if not isinstance(asleep, bool) else "asleep" if asleep else "awake"


def render(report: dict[str, Any]) -> str:
    header = ["MODEL", "STATE", "READY", "ROUTE", "PORT", "IMAGE", "UPTIME"]
    rows = [
        [
            r["model"] + ("" if r["in_file"] else " (not in file)"),
            "disabled"
            if not r["enabled"] and r["state"] == "absent"
            else r["state"] + _sleep_note(r.get("sleep")) + (" (stalled)" if r.get("stalled") else ""),
            "yes" if r["ready"] else "no",
            "yes" if r["route"] else "no",
            str(r["port"] or ("socket" if r["state"] == "running" else "-")),
            r["image"] or "-",
            r["uptime"] or "-",
        ]
        for r in report["models"]
    ]
    widths = [max(len(x) for x in col) for col in zip(header, *rows, strict=False)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)).rstrip() for row in [header] + rows]
    for r in report["models"]:
        for d in r.get("drift") or []:
            lines.append(
                f"  {r['model']}: {d['field']}: the file asks {_short(d['file'])}, the engine runs {_short(d['effective'])}"
                f" ({d['why']})"
            )
    for r in report["models"]:
        failed = r.get("last_failed_start")
        if failed:
            said = f": {_short(failed['error'])}" if failed.get("error") else ""
            lines.append(
                f"  {r['model']}: its last start failed at {failed['at']}{said} (aigo-apply logs {r['model']} --failed)"
            )
    for r in report["models"]:
        if r.get("last_start"):
            lines.append(f"  {r['model']}: {start_text(r['last_start'])}")
    for r in report["models"]:
        if r.get("next_start_cache") in NEXT_START:
            lines.append(
                f"  {r['model']}: its next start will be {r['next_start_cache']} ({NEXT_START[r['next_start_cache']]})"
            )
    for left in report.get("leftovers") or []:
        lines.append(
            f"  {left['container']} ({left['state']}): left by a replace that did not finish (an apply that was "
            "interrupted or killed); the next apply removes it"
        )
    router = report["router"]
    lines.append(f"\nRouter: {router['url']} ({router['state']}), routes: {', '.join(router['routes']) or 'none'}")
    if router.get("held"):
        lines.append(
            f"The router holds the requests of {', '.join(router['held'])} for a replace; if no apply runs now, "
            "the one that did was killed: `aigo-apply apply` releases them"
        )
    drift = report["drift"]
    if drift["router"]:
        lines.append(
            f"Router drift: plan would {drift['router'].replace('_', ' ')} it; run `aigo-apply plan` for details."
        )
    if drift["models_changing"]:
        n = drift["models_changing"]
        lines.append(
            f"Drift: plan would change {n} model{'s' if n != 1 else ''} ({', '.join(drift['models'])}); "
            "run `aigo-apply plan` for details."
        )
    elif not drift["router"] and not any(r.get("drift") for r in report["models"]):
        lines.append("No drift: the machine matches the file.")
    return "\n".join(lines)


def start_text(start: ShownStart) -> str:
    """A last start in words: "its last start took 42.9 s, warm (compile 14.0 s, other 26.6 s), at ..."."""
    phases = ", ".join(f"{name.replace('_', ' ')} {seconds:.1f} s" for name, seconds in start["phases"].items())
    cache = f", {start['cache']}" if start.get("cache") else ""
    return (
        f"its last start took {start['seconds']:.1f} s{cache}"
        + (f" ({phases})" if phases else "")
        + f", at {start['at']}"
    )


def _short(value: object) -> str:
    text = " ".join(value) if isinstance(value, list) else str(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _sleep_note(sleep: str | None) -> str:
    return f" ({sleep})" if sleep else ""


def _image(container: ObservedContainer) -> str:
    """Docker lists a container whose tag now names another image by its bare id: show the tag it was
    made from (its spec label) with that id, so the row says which image is outdated."""
    ref = (container.spec or {}).get("image")
    if container.image.startswith("sha256:") and ref:
        return f"{ref} (outdated: {container.image[:19]})"
    return container.image
