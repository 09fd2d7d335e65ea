"""The router's one /metrics, rendered beside haproxy.cfg: metrics.lua (gathers every routed engine's
/metrics at once on each scrape, before one deadline, labels each series with its model, engine and
project, writes each LoRA adapter's activity under the adapter's own alias (from what vLLM reports of
it), and adds HAProxy's own exporter, bound on a socket inside the router), metrics_text.lua (the check
of every line an engine returns, so that one engine's bad line never makes Prometheus refuse the whole
page; pure Lua, run as it is by the unit tests) and engine_http.lua (the bounded HTTP exchange with an
engine that metrics.lua and swap.lua share). Pure, like the rest of router/: every value is checked
right before it becomes part of a Lua literal."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aigo_apply.config.engine_kinds import ENGINES
from aigo_apply.desired.types import Route, RouterSettings
from aigo_apply.router.haproxy_safety import check_lua_value
from aigo_apply.router.haproxy_swap import LuaAddress, lua_address

if TYPE_CHECKING:
    import jinja2

METRICS_TEMPLATE = "metrics.lua.j2"
TEXT_TEMPLATE = "metrics_text.lua.j2"
HTTP_TEMPLATE = "engine_http.lua.j2"
METRICS_FILE = "metrics.lua"
TEXT_FILE = "metrics_text.lua"
HTTP_FILE = "engine_http.lua"
TEMPLATES = (METRICS_TEMPLATE, TEXT_TEMPLATE, HTTP_TEMPLATE)  # what the router's files are made from
OWN_SOCKET = "/tmp/aigo-own-metrics.sock"  # inside the router container only: HAProxy's own exporter
TIMEOUT_S = 2  # the longest one engine's /metrics may take for the stall watch (a busy vLLM answers in milliseconds)
# One deadline for a scrape's whole gather, from the request's arrival: well inside Prometheus' default
# scrape timeout of 10 s (shorter when the scrape says it times out sooner), so the page always comes.
GATHER_S = 2.5  # as long as the page waited for a late engine before (2 s each, and 0.5 s)
MERGE_S = 1  # the most the page then spends merging the engines' text (a starved router leaves the rest out)
MAX_LINE = 64 * 1024  # the longest line of an engine's text taken
MAX_BYTES = 4 * 1024 * 1024  # the most of one engine's answer read (vLLM's is some 100 KiB per model)
# What the stall watch reads of each engine (aigo-apply starts SGLang with --enable-metrics and
# llama.cpp with --metrics): the gauge of requests running and the counter of generated tokens.
ACTIVITY = {name: (kind.running_metric, kind.tokens_metric) for name, kind in ENGINES.items()}


# vLLM v0.31.0's only series that names adapters (vllm/v1/metrics/loggers.py): a gauge set to the
# time of each scheduler step, labelled with the adapters that had requests running and waiting then
# (comma-separated); each label set stays in the page, so the newest (largest) value is the present.
# Its request and token counters are labelled with the base model's name only.
LORA_INFO = "vllm:lora_requests_info"


def render(env: jinja2.Environment, settings: RouterSettings, routes: list[Route], kubernetes: bool) -> dict[str, str]:
    """engine_http.lua, metrics_text.lua and metrics.lua for these routes. On Kubernetes an engine is reached at the
    address HAProxy resolved for its backend (Lua cannot resolve a Service's name itself)."""
    project = check_lua_value("project", settings.project)
    adapters: dict[str, list[str]] = {}
    for adapter in sorted(settings.adapters):
        adapters.setdefault(adapter.base, []).append(check_lua_value("adapter alias", adapter.alias))
    engines = [_engine(r, kubernetes, adapters.get(r.alias, [])) for r in sorted(routes) if r.owned_by in ACTIVITY]
    return {
        HTTP_FILE: env.get_template(HTTP_TEMPLATE).render(project=project),
        TEXT_FILE: env.get_template(TEXT_TEMPLATE).render(project=project, max_line=MAX_LINE),
        METRICS_FILE: env.get_template(METRICS_TEMPLATE).render(
            project=project,
            engines=engines,
            own_socket=f"unix@{OWN_SOCKET}",
            timeout_s=TIMEOUT_S,
            gather_ms=int(GATHER_S * 1000),
            merge_ms=MERGE_S * 1000,
            max_bytes=MAX_BYTES,
            lora_info=LORA_INFO,
            stall_s=check_lua_value("router.stall_seconds", settings.stall_s),
            watch_s=watch_interval(settings.stall_s),
        ),
    }


def watch_interval(stall_s: int) -> int:
    """How often the router reads each engine for the stall check: a quarter of the stall time, 1-15 s."""
    return max(1, min(15, stall_s // 4))


def _engine(route: Route, kubernetes: bool, adapters: list[str]) -> dict[str, object]:
    """What metrics.lua knows of one engine; `adapters`: the LoRA adapters it serves (vLLM only), whose
    activity the router reads from vLLM's LORA_INFO gauge and writes under each adapter's own alias."""
    where: LuaAddress = {"addr": None, "port": None} if kubernetes else lua_address(route)
    return {
        "adapters": adapters if ENGINES[route.owned_by].adapters else [],
        "alias": check_lua_value("model alias", route.alias),
        "engine": check_lua_value("engine name", route.owned_by),
        "backend": check_lua_value("backend name", route.backend),
        "running": ACTIVITY[route.owned_by][0],
        "tokens": ACTIVITY[route.owned_by][1],
        **where,
    }
