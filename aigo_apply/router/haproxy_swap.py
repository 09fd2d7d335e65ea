"""The router's part of swap groups (issue 19), rendered beside haproxy.cfg: swap.lua (the action
that wakes a sleeping on-demand model before its request is forwarded, and /metrics/swaps) and
on-demand.map (alias -> group: the ACL that sends only those requests through Lua). Also the engine
control paths the router never forwards, whichever model a request names. Pure; every value is
checked again right before it becomes part of a Lua literal."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aigo_apply.config.swap_groups import MAX_AWAKE_LIMIT
from aigo_apply.desired.engines.router import ROUTER_MOUNT
from aigo_apply.desired.types import Route, RouterSettings
from aigo_apply.errors import RouterError
from aigo_apply.router.haproxy_safety import check_lua_value

if TYPE_CHECKING:
    import jinja2

SWAP_TEMPLATE = "swap.lua.j2"
SWAP_FILE = "swap.lua"
MAP_FILE = "on-demand.map"
MAX_WAIT_S = 300  # a request for a sleeping model waits at most this long (or router.timeout if shorter)
CALL_MS = 120_000  # one /sleep or /wake_up call (level 1 moves the weights between GPU and host memory)
LEARN_MS = 2_000
HOLDS = "holds"  # in the router's state folder: one file per swap group apply is starting a model of
HOLD_DIR = f"{ROUTER_MOUNT}/{HOLDS}"

# Engine control, never forwarded to an engine (404 like any unknown path), however a client spells
# the path (HAProxy decodes percent-escapes first, as the engine's server does). vLLM registers the
# first group with VLLM_SERVER_DEV_MODE=1, which aigo-apply sets on on-demand engines (their /sleep,
# /wake_up and /is_sleeping are for the router alone): entrypoints/serve/dev/{cache,rlhf,rpc,server_info,
# sleep}/api_router.py of v0.31.0 (v0.32.0 moved the rlhf group to entrypoints/rl/online and added
# two). The rest control the engine without dev mode: elastic expert parallelism (registered for
# every generating model) and the profiler.
ENGINE_CONTROL_PATHS = (
    "/sleep", "/wake_up", "/is_sleeping", "/release_kv_cache_memory",
    "/reset_prefix_cache", "/reset_mm_cache", "/reset_encoder_cache",
    "/collective_rpc", "/server_info",
    "/pause", "/resume", "/is_paused", "/abort_requests", "/get_world_size", "/weight_info",
    "/init_weight_transfer_engine", "/shutdown_weight_transfer_engine", "/start_weight_update",
    "/start_draft_weight_update", "/update_weights", "/finish_weight_update", "/update_weight_version",
    "/weight_checker",
    "/scale_elastic_ep", "/is_scaling_elastic_ep", "/start_profile", "/stop_profile",
    # SGLang 0.5.6 (srt/entrypoints/http_server.py) serves these with no dev mode and no key: weights
    # swapped from a path or a process group, server state, memory, sessions, LoRA adapters, logging
    "/abort_request", "/clear_hicache_storage_backend", "/close_session", "/configure_logging",
    "/continue_generation", "/destroy_weights_update_group", "/dump_expert_distribution_record",
    "/flush_cache", "/freeze_gc", "/generate_from_file", "/get_server_info", "/get_weights_by_name",
    "/init_weights_send_group_for_remote_instance", "/init_weights_update_group", "/load_lora_adapter",
    "/open_session", "/pause_generation", "/release_memory_occupation", "/resume_memory_occupation",
    "/send_weights_to_remote_instance", "/set_internal_state", "/slow_down",
    "/start_expert_distribution_record", "/stop_expert_distribution_record", "/unload_lora_adapter",
    "/update_weights_from_disk", "/update_weights_from_distributed", "/update_weights_from_ipc",
    "/update_weights_from_tensor", "/weights_checker",
)  # fmt: skip


def control_path_lines(per_line: int = 9) -> list[str]:
    """The paths as words of `acl` lines (HAProxy takes at most 64 words a line)."""
    paths = list(ENGINE_CONTROL_PATHS)
    return [" ".join(paths[i : i + per_line]) for i in range(0, len(paths), per_line)]


def render(env: jinja2.Environment, settings: RouterSettings, routes: list[Route]) -> dict[str, str]:
    """swap.lua and on-demand.map for the groups' routed members; nothing without any."""
    by_alias = {r.alias: r for r in routes}
    groups, members = [], []
    for group in sorted(settings.swap_groups):
        routed = [a for a in group.members if a in by_alias]
        if not routed:
            continue
        name = check_lua_value("swap group", group.name)
        awake = check_lua_value("max_awake", group.max_awake)
        if not 1 <= awake <= MAX_AWAKE_LIMIT:
            raise RouterError(f"router: refusing max_awake {awake!r} of swap group {name}: it must be 1-16")
        groups.append(
            {"name": name, "max_awake": awake, "members": [check_lua_value("model alias", a) for a in routed]}
        )
        for alias in routed:
            route = by_alias[alias]
            members.append(
                {
                    "alias": check_lua_value("model alias", alias),
                    "group": name,
                    "backend": check_lua_value("backend name", route.backend),
                    "port": check_lua_value("port", route.port),
                }
            )
    if not groups:
        return {}
    values: dict[str, Any] = {
        "project": check_lua_value("project", settings.project),
        "groups": groups,
        "members": members,
        "wait_ms": min(MAX_WAIT_S, settings.timeout_s) * 1000,
        "call_ms": CALL_MS,
        "learn_ms": LEARN_MS,
        "hold_dir": HOLD_DIR,
    }
    return {
        SWAP_FILE: env.get_template(SWAP_TEMPLATE).render(**values),
        MAP_FILE: "".join(f"{m['alias']} {m['group']}\n" for m in members),
    }
