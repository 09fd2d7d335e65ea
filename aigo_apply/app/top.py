"""`aigo-apply top`: a live view of what each model's engine is doing, refreshed every few seconds
until Ctrl-C (or once, for scripts): its container's state, requests running and waiting, tokens
per second, KV cache use and sleep state, read from each engine's own /metrics at once; and each
GPU's memory (NVML) when there are GPUs. Tokens per second is the change of the engine's generated
token count between two reads, divided by the time between them: nothing is estimated."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, cast

from aigo_apply.adapters.engine_metrics import fetch, samples, total
from aigo_apply.adapters.host import nvml_facts
from aigo_apply.adapters.runtime import Runtime
from aigo_apply.app.choose_platform import open_platform
from aigo_apply.desired.types import DesiredState
from aigo_apply.errors import EXIT_OK
from aigo_apply.json_types import arr, json_object, obj
from aigo_apply.platforms.capabilities import refuse
from aigo_apply.platforms.docker.planning import observe
from aigo_apply.platforms.docker.platform import DockerPlatform
from aigo_apply.platforms.docker.status import address_of
from aigo_apply.platforms.views import TopView


@dataclass(frozen=True, kw_only=True)
class TopRequest:
    """What `top` asks for: a live view every `interval` seconds, or one view of two reads that far apart."""

    once: bool = False
    interval: float = 2.0
    file: str | None = None
    platform: str | None = None


TIMEOUT = 1.0


class ModelRead(TypedDict):
    """One read of one model's engine (None: its /metrics did not say)."""

    state: str
    running: float | None
    waiting: float | None
    tokens: float | None
    kv_cache_usage: float | None
    asleep: bool | None


class Sample(TypedDict):
    at: float  # time.monotonic() of the read
    models: dict[str, ModelRead]


class TopRow(TypedDict):
    """One row of the view (and of `top -o json`'s models)."""

    model: str
    state: str
    requests_running: int | None
    requests_waiting: int | None
    tokens_per_second: float | None
    kv_cache_usage: float | None
    sleep: str | None


class GpuMemory(TypedDict):
    """One GPU of the view (NVML's figures, bytes)."""

    index: int
    name: str
    memory_used: int
    memory_total: int


def asleep(text: str) -> bool | None:
    """vLLM's engine_sleep_state: awake 0 is a sleeping engine; None when it does not say."""
    for labels, value in samples(text, "vllm:engine_sleep_state"):
        if labels.get("sleep_state") == "awake":
            return value.startswith("0")
    return None


def sample(desired: DesiredState, runtime: Runtime, state_root: Path) -> Sample:
    """One read of every model: {alias: {state, running, waiting, tokens, kv_cache_usage, asleep}, at}."""
    observed = observe(desired.project, runtime, state_root=state_root)
    own = {a: m.container.name for a, m in desired.models.items()}
    containers = {c.alias: c for c in observed.ours if c.alias and c.name == own.get(c.alias, c.name)}
    aliases = sorted(set(desired.models) | set(containers))
    sockets = desired.router.spec.get("sockets_dir", "")
    where = {a: address_of(containers.get(a), sockets, a) for a in aliases}
    with ThreadPoolExecutor(max_workers=min(16, max(1, len(aliases)))) as pool:
        texts = dict(zip(aliases, pool.map(lambda a: fetch(where[a], TIMEOUT), aliases), strict=True))
    at = time.monotonic()
    out: dict[str, ModelRead] = {}
    for alias in aliases:
        text, c = texts[alias] or "", containers.get(alias)
        out[alias] = {
            "state": c.state if c else "absent",
            "running": total(text, "vllm:num_requests_running"),
            "waiting": total(text, "vllm:num_requests_waiting"),
            "tokens": total(text, "vllm:generation_tokens_total"),
            "kv_cache_usage": total(text, "vllm:kv_cache_usage_perc"),
            "asleep": asleep(text),
        }
    return {"at": at, "models": out}


def rows(before: Sample | None, now: Sample) -> list[TopRow]:
    """The view's rows: each model's last read, with tokens per second since the read before."""
    out: list[TopRow] = []
    elapsed = now["at"] - before["at"] if before else 0.0
    for alias, m in now["models"].items():
        earlier = before["models"].get(alias) if before else None
        tokens_before = earlier["tokens"] if earlier else None
        rate = None
        if tokens_before is not None and m["tokens"] is not None and elapsed > 0:
            rate = max(0.0, (m["tokens"] - tokens_before) / elapsed)
        out.append(
            {
                "model": alias,
                "state": m["state"],
                "requests_running": _int(m["running"]),
                "requests_waiting": _int(m["waiting"]),
                "tokens_per_second": None if rate is None else round(rate, 1),
                "kv_cache_usage": m["kv_cache_usage"],
                "sleep": None if m["asleep"] is None else "asleep" if m["asleep"] else "awake",
            }
        )
    return out


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def gpus() -> list[GpuMemory]:
    """Each GPU's memory (NVML); [] where there is none."""
    out: list[GpuMemory] = []
    for gpu in arr(nvml_facts().get("gpus")):
        g = obj(gpu)
        index, name, used, total = g.get("index"), g.get("name"), g.get("memory_used"), g.get("memory_total")
        if type(index) is int and isinstance(name, str) and type(used) is int and type(total) is int:  # NVML's
            out.append({"index": index, "name": name, "memory_used": used, "memory_total": total})
    return out


def run_top(request: TopRequest, view: TopView) -> int:
    """Read, show, wait `interval`, again, until Ctrl-C (the error boundary ends it with 130); with
    `once`, two reads `interval` apart (so tokens per second is measured) and one view."""
    where = open_platform(request.file, request.platform)
    docker = cast(DockerPlatform, where)  # a platform that lacks no "top" reads this machine's Docker
    if "top" in where.lacks or docker.desired is None:
        refuse("top")
    desired, runtime, state_root = docker.desired, docker.runtime, docker.state.parent
    before = sample(desired, runtime, state_root)
    devices = gpus()
    if request.once:
        time.sleep(request.interval)
        now = sample(desired, runtime, state_root)
        view.top(json_object({"project": desired.project, "models": rows(before, now), "gpus": devices}), live=False)
        return EXIT_OK
    while True:
        time.sleep(request.interval)
        now = sample(desired, runtime, state_root)
        view.top(json_object({"project": desired.project, "models": rows(before, now), "gpus": gpus()}), live=True)
        before = now
