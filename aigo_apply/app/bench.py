"""`aigo-apply bench [ALIAS]...`: the canary gate's measurement of what runs now, one engine at a
time (each on its own socket or port, beside the router's traffic), so a model's figures can be seen
at any time and compared across machines or releases. Each model is measured with its own canary
settings (models.ALIAS.canary over defaults.canary), or the gate's defaults where it declares none."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from aigo_apply.app.choose_platform import open_platform
from aigo_apply.desired.canary import CanarySettings
from aigo_apply.errors import EXIT_ERROR, EXIT_OK, AigoError, UsageProblem
from aigo_apply.json_types import JsonObject, json_object
from aigo_apply.platforms.capabilities import refuse
from aigo_apply.platforms.docker.planning import observe
from aigo_apply.platforms.docker.platform import DockerPlatform
from aigo_apply.platforms.docker.status import address_of
from aigo_apply.platforms.views import BenchView


@dataclass(frozen=True, kw_only=True)
class BenchRequest:
    """What `bench` asks for: measure these models' engines (every enabled one when empty)."""

    aliases: tuple[str, ...] = ()
    file: str | None = None
    platform: str | None = None


def run_bench(request: BenchRequest, view: BenchView) -> int:
    """Measure each asked model (every enabled one when none is named); exit 1 when one could not be
    measured or failed a request."""
    from aigo_apply.platforms.docker.canary_run import bench_engine  # with httpx and its threads: only bench needs it

    where = open_platform(request.file, request.platform)
    docker = cast(DockerPlatform, where)  # a platform that lacks no "bench" measures this machine's Docker
    if "bench" in where.lacks or docker.desired is None:
        refuse("bench")
    desired = docker.desired
    unknown = sorted(set(request.aliases) - set(desired.models))
    if unknown:
        raise UsageProblem(f"bench: no enabled model {', '.join(repr(a) for a in unknown)} in {desired.file}")
    observed = observe(desired.project, docker.runtime, state_root=docker.state.parent)
    own = {a: m.container.name for a, m in desired.models.items()}
    running = {c.alias: c for c in observed.ours if c.alias and c.name == own.get(c.alias)}
    sockets = desired.router.spec.get("sockets_dir", "")
    rows: list[JsonObject] = []
    for alias in request.aliases or tuple(sorted(desired.models)):
        model = desired.models[alias]
        settings = model.canary or CanarySettings()
        address = address_of(running.get(alias), sockets, alias)
        row: JsonObject = {"model": alias, "image": model.container.image, "settings": {**settings.to_dict()}}
        if address is None:
            rows.append({**row, "error": "its engine is not running"})
            continue
        if model.spec.get("engine") != "vllm":
            rows.append({**row, "error": f"bench measures vLLM engines only (this one runs {model.spec['engine']})"})
            continue
        try:
            measured = bench_engine(alias, settings, address, model.spec.get("model_dir"))
        except AigoError as exc:
            rows.append({**row, "error": str(exc)})
            continue
        rows.append({**row, **json_object(measured.to_dict())})
    view.bench(json_object({"project": desired.project, "models": rows}))
    return EXIT_ERROR if any(r.get("error") or r.get("errors") for r in rows) else EXIT_OK
