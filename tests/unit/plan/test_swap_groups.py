"""Swap groups without Docker: declared (on_demand, swap_group, max_awake) and validated, the
vLLM command line and environment of an on-demand model, the GPU ledger's group rules and the host
memory check, the plan's groups and lanes, the router's files (the swap Lua only for on-demand
models, engine control paths blocked for every model), and apply's sleep/wake steps on a fake engine.
The real router and engines run in tests/docker/test_swap_groups_at_docker.py."""

from __future__ import annotations

import json
import time
from pathlib import Path

import jsonschema
import pytest

from aigo_apply.adapters.create_checks import check_container
from aigo_apply.config.swap_groups import SwapGroup, awake_sum, membership, swap_groups
from aigo_apply.desired.build import build_desired
from aigo_apply.desired.types import ContainerSpec, EngineAddress, Route, RouterSettings
from aigo_apply.errors import ConfigInvalid, RouterError, UnsafeSetting
from aigo_apply.observe.config_file import load_config
from aigo_apply.observe.containers import parse_state
from aigo_apply.plan import gpu_ledger
from aigo_apply.plan.facts import PlanFacts
from aigo_apply.plan.planner import build_plan
from aigo_apply.plan.swap_ledger import ASLEEP_BYTES, host_memory_check
from aigo_apply.plan.text import plan_text
from aigo_apply.plan.types import Plan
from aigo_apply.plan.vram import GIB, Estimate
from aigo_apply.platforms.docker.swap_steps import SwapSteps
from aigo_apply.resources import schema_data
from aigo_apply.router.haproxy import render_files

from helpers.configs import host_context, write_config

HEAD = 'version: 1\nproject: lab\nengines: {vllm: {image: local/engine, image_tag: "1"}}\nmodels:\n'


def model(alias: str, extra: str = "", gpus: str = "[0]", fraction: float | None = None) -> str:
    vllm = f"    vllm: {{gpu_memory_utilization: {fraction}}}\n" if fraction is not None else ""
    return f"  {alias}:\n    source: {{path: /m/{alias}}}\n    context_length: 4096\n    gpus: {gpus}\n{extra}{vllm}"


def problems(tmp_path: Path, body: str) -> list[str]:
    with pytest.raises(ConfigInvalid) as info:
        load_config(str(write_config(tmp_path, HEAD + body)))
    return [f"{p.path}: {p.message}" for p in info.value.problems]


def desired(tmp_path: Path, body: str):
    return build_desired(load_config(str(write_config(tmp_path, HEAD + body))), host_context(Path("/store")))


# -- declaration and validation ------------------------------------------------------------------------
def test_groups_are_named_or_implied_by_the_gpus_in_file_order():
    models = {
        "zeta": {"on_demand": True, "gpus": [1, 0]},
        "alpha": {"swap_group": "chat", "max_awake": 2},
        "mid": {"on_demand": True},
        "beta": {"swap_group": "chat"},
        "off": {"swap_group": "chat", "enabled": False},
        "plain": {},
        "not": {"on_demand": False},
    }
    assert swap_groups(models) == (
        SwapGroup("chat", 2, ("alpha", "beta")),
        SwapGroup("gpus-0-1", 1, ("zeta",)),
        SwapGroup("gpus-all", 1, ("mid",)),
    )
    assert SwapGroup("chat", 2, ("alpha", "beta", "c")).first == ("alpha", "beta")


def test_a_group_counts_only_its_max_awake_largest_fractions():
    groups = membership((SwapGroup("g", 1, ("a", "b")), SwapGroup("h", 2, ("c", "d", "e"))))
    fractions = {"a": 0.5, "b": 0.8, "c": 0.1, "d": 0.2, "e": 0.3, "x": 0.05}
    assert awake_sum(list(fractions), fractions, groups) == pytest.approx(0.8 + 0.3 + 0.2 + 0.05)


def test_two_large_models_fit_one_gpu_only_as_a_swap_group(tmp_path):
    body = model("a", fraction=0.85) + model("b", fraction=0.85)
    assert any("GPU 0 would be over-committed" in p for p in problems(tmp_path, body))
    grouped = model("a", "    on_demand: true\n", fraction=0.85) + model("b", "    on_demand: true\n", fraction=0.85)
    d = desired(tmp_path, grouped)
    assert d.swap_groups == (SwapGroup("gpus-0", 1, ("a", "b")),)
    # two awake at once do not fit: the group's two largest count
    two = model("a", "    swap_group: g\n    max_awake: 2\n", fraction=0.6) + model(
        "b", "    swap_group: g\n", fraction=0.6
    )
    found = problems(tmp_path, two)
    assert any("would be over-committed" in p and "counts only its max_awake largest" in p for p in found), found
    # a model outside the group still adds its own fraction to the group's awake share
    mixed = grouped + model("c", fraction=0.2)
    assert any("over-committed" in p for p in problems(tmp_path, mixed))


@pytest.mark.parametrize(
    "body, expected",
    [
        (
            model("a", "    on_demand: false\n    swap_group: g\n"),
            "models.a.swap_group: a swap_group makes the model on demand",
        ),
        (model("a", "    max_awake: 2\n"), "models.a.max_awake: max_awake counts the awake models of a swap group"),
        (
            model("a", "    swap_group: g\n    engine: sglang\n"),
            "models.a.swap_group: SGLang models cannot be on demand yet",
        ),
        (
            "  a:\n    source: {path: /m/a.gguf}\n    context_length: 4096\n    on_demand: true\n",
            "models.a.on_demand: llama.cpp models cannot be on demand: llama-server has no sleep mode",
        ),
        (
            model("a", "    swap_group: g\n", "[0]") + model("b", "    swap_group: g\n", "[1]"),
            "models.b.gpus: the models of swap group 'g' take turns on the same GPUs, but 'b' has gpus [1] and 'a' has [0]",
        ),
        (
            model("a", "    swap_group: g\n    max_awake: 1\n") + model("b", "    swap_group: g\n    max_awake: 2\n"),
            "models.b.max_awake: swap group 'g' has max_awake 1 at model 'a'",
        ),
        (model("a", "    swap_group: Bad Name\n"), "models.a.swap_group: must be 1-32 lowercase letters"),
        (
            model("a", "    on_demand: true\n") + "platform: kubernetes\n",
            "models.a.on_demand: on-demand models run on Docker only for now",
        ),
        (model("a", "    on_demand: true\n    max_awake: 0\n"), "models.a.max_awake"),
    ],
)
def test_declarations_that_cannot_work_are_refused_where_they_are_written(tmp_path, body, expected):
    extra = 'engines: {sglang: {image_tag: "x"}, "llama.cpp": {image_tag: "y"}, vllm: {image: local/engine, image_tag: "1"}}\n'
    text = HEAD.replace('engines: {vllm: {image: local/engine, image_tag: "1"}}\n', extra) + body
    with pytest.raises(ConfigInvalid) as info:
        load_config(str(write_config(tmp_path, text)))
    found = [f"{p.path}: {p.message}" for p in info.value.problems]
    assert any(p.startswith(expected) for p in found), found


# -- the engine -----------------------------------------------------------------------------------------
def test_an_on_demand_vllm_model_gets_sleep_mode_and_its_development_endpoints(tmp_path):
    d = desired(tmp_path, model("a", "    on_demand: true\n") + model("b", gpus="[1]"))
    a, b = d.models["a"], d.models["b"]
    assert a.spec["on_demand"] is True and "on_demand" not in b.spec
    # on its Unix socket: the development endpoints are for the router alone (a port is refused)
    assert a.container.command[-3:] == ("--enable-sleep-mode", "--uds", "/run/aigo/engine.sock")
    assert a.container.host_port is None
    assert ("VLLM_SERVER_DEV_MODE", "1") in a.container.env
    assert "--enable-sleep-mode" not in b.container.command
    assert dict(b.container.env) == {"HF_HUB_OFFLINE": "1"}  # unchanged for every other model
    check_container(_no_mounts(a.container))  # the Docker adapter lets aigo-apply's own setting through...
    without_flag = ContainerSpec(**{**_no_mounts(a.container).__dict__, "command": b.container.command})
    with pytest.raises(UnsafeSetting, match="VLLM_SERVER_DEV_MODE"):  # ...only beside --enable-sleep-mode
        check_container(without_flag)


def _no_mounts(container: ContainerSpec) -> ContainerSpec:
    return ContainerSpec(**{**container.__dict__, "mounts": ()})


def test_a_models_env_still_may_not_open_the_development_endpoints(tmp_path):
    found = problems(tmp_path, model("a", "    on_demand: true\n    env: {VLLM_SERVER_DEV_MODE: '1'}\n"))
    assert any(p.startswith("models.a.env.VLLM_SERVER_DEV_MODE") for p in found), found


# -- the router's files ---------------------------------------------------------------------------------
SETTINGS = RouterSettings("lab", "127.0.0.1", 8000, False)
ROUTES = [Route("a", 20001, 4096), Route("b", 20002, 4096), Route("c", 20003, 4096)]


def test_only_requests_for_on_demand_models_run_lua_and_the_lua_reaches_each_engine_at_its_address():
    plain = render_files(SETTINGS, ROUTES)
    assert "swap.lua" not in plain and "on-demand.map" not in plain
    assert "lua.aigo_wake" not in plain["haproxy.cfg"] and "swap" not in plain["haproxy.cfg"]
    settings = RouterSettings("lab", "127.0.0.1", 8000, False, swap_groups=(SwapGroup("chat", 1, ("a", "b", "z")),))
    files = render_files(settings, ROUTES)
    cfg = files["haproxy.cfg"]
    assert files["on-demand.map"] == "a chat\nb chat\n"  # `z` is not routed: not in the router's group
    assert 'members = {"a", "b", }' in files["swap.lua"] and '["b"] = {group = "chat", ' in files["swap.lua"]
    assert "http-request lua.aigo_wake if known_model on_demand\n" in cfg
    assert cfg.index("lua.aigo_wake") < cfg.index("use_backend")
    assert 'addr = "127.0.0.1", port = 20001}' in files["swap.lua"]
    on_socket = render_files(settings, [Route("a", None, 4096), *ROUTES[1:]])["swap.lua"]
    assert '["a"] = {group = "chat", backend = "' in on_socket
    assert 'addr = "unix@/run/aigo-engines/a/engine.sock"}' in on_socket
    assert "aigo_engine_http(m.addr, m.port, " in on_socket  # a Lua socket: 2.6's httpclient keeps its first dst
    assert "sock:connect(addr)" in files["engine_http.lua"]


def test_every_value_of_the_swap_lua_is_checked_where_it_is_written():
    for group in (SwapGroup('x"; os.exit(1) --', 1, ("a",)), SwapGroup("g", 17, ("a",))):
        with pytest.raises(RouterError):
            render_files(RouterSettings("lab", "127.0.0.1", 8000, False, swap_groups=(group,)), ROUTES)


# -- the ledger and the plan ----------------------------------------------------------------------------
def nvml(total: int = 80 * GIB, host: int | None = 256 * GIB) -> dict:
    gpu = {"index": 0, "name": "H100", "memory_total": total, "memory_used": 0, "processes": []}
    return {"available": True, "gpus": [gpu], "host_memory_total": host}


def facts(weights: dict[str, int]) -> dict:
    return {alias: {"weights": w, "config": None} for alias, w in weights.items()}


def test_the_ledger_counts_the_awake_share_and_what_sleeping_models_keep(tmp_path):
    d = desired(
        tmp_path,
        model("a", "    swap_group: g\n", fraction=0.85)
        + model("b", "    swap_group: g\n", fraction=0.7)
        + model("c", "    swap_group: g\n", fraction=0.5)
        + model("solo", fraction=0.12),
    )
    (row,) = gpu_ledger.build(d, nvml(), facts({"a": 1, "b": 1, "c": 1, "solo": 1}), ours=set())
    assert [m.get("swap_group") for m in row["models"]] == ["g", "g", "g", None]
    assert row["fraction_sum"] == pytest.approx(0.97)  # a (the largest) + solo
    assert row["budget_sum"] == int(0.85 * 80 * GIB) + int(0.12 * 80 * GIB) + 2 * ASLEEP_BYTES
    (group,) = row["swap_groups"]
    assert (group["members"], group["awake_fraction"], group["asleep_bytes"]) == (
        ["a", "b", "c"],
        0.85,
        2 * ASLEEP_BYTES,
    )
    assert row["verdict"] == "blocking"  # 0.97 of 80 GiB plus two sleeping residues exceed the GPU
    assert "swap group g: 1 of 3 awake at once counts 0.85" in "\n".join(gpu_ledger.render([row]))
    d = desired(
        tmp_path, model("a", "    swap_group: g\n", fraction=0.85) + model("b", "    swap_group: g\n", fraction=0.7)
    )
    (row,) = gpu_ledger.build(d, nvml(), facts({"a": 1, "b": 1}), ours=set())
    assert row["verdict"] == "ok" and row["budget_sum"] == int(0.85 * 80 * GIB) + ASLEEP_BYTES


def test_sleeping_models_weights_must_fit_in_host_memory(tmp_path):
    d = desired(
        tmp_path,
        model("a", "    swap_group: g\n", fraction=0.8) + model("b", "    swap_group: g\n", fraction=0.8)
        + model("c", "    swap_group: g\n", fraction=0.8),
    )  # fmt: skip
    weights = {"a": 60 * GIB, "b": 40 * GIB, "c": 20 * GIB}
    check = host_memory_check(d, 256 * GIB, weights)
    assert check and check.status == "ok" and "up to 100.0 GiB (g: 100.0 GiB)" in check.message  # all but the smallest
    check = host_memory_check(d, 120 * GIB, weights)
    assert check and check.status == "warning" and "above 75%" in check.message
    check = host_memory_check(d, 64 * GIB, weights)
    assert check and check.status == "blocking" and check.id == "host.memory" and check.remediation
    check = host_memory_check(d, 256 * GIB, {**weights, "c": None})
    assert check and check.status == "warning" and "the size of c is unknown" in check.message
    assert host_memory_check(desired(tmp_path, model("x")), 1, {"x": 10}) is None


def test_the_plan_shows_the_groups_and_starts_a_groups_models_in_one_lane(tmp_path):
    body = (
        model("a", "    swap_group: chat\n", "none") + model("b", "    swap_group: chat\n", "none")
        + model("c", gpus="none") + model("d", "    on_demand: true\n", "none")
    )  # fmt: skip
    d = desired(tmp_path, body)
    plan = build_plan(d, parse_state("lab", [], []), PlanFacts())
    assert plan.lanes == (("model.a", "model.b"), ("model.c",), ("model.d",))
    data = plan.to_dict()
    assert data["swap_groups"] == [
        {"name": "chat", "max_awake": 1, "members": ["a", "b"], "gpus": "none", "awake_after_apply": ["a"]},
        {"name": "gpus-none", "max_awake": 1, "members": ["d"], "gpus": "none", "awake_after_apply": ["d"]},
    ]
    jsonschema.validate(data, schema_data("plan.schema.json"))
    again = Plan.from_dict(json.loads(json.dumps(data)))  # a saved plan reads back
    assert again.swap_groups == plan.swap_groups
    text = plan_text(plan)
    assert "Swap groups (on-demand models sleep until a request names one; the router wakes it):" in text
    assert "  chat (gpus none): a, b; at most 1 awake, awake after apply: a" in text
    plain = build_plan(desired(tmp_path, model("c", gpus="none")), parse_state("lab", [], []), PlanFacts())
    assert "swap_groups" not in plain.to_dict() and "Swap groups" not in plan_text(plain)


# -- apply's steps --------------------------------------------------------------------------------------
class FakeEngines:
    """Engines answering /is_sleeping, /sleep and /wake_up by address; every call recorded."""

    def __init__(self, addresses: dict, fail: set[str] = frozenset(), absent: set[str] = frozenset()):
        self.by_address = {p: a for a, p in addresses.items()}
        self.asleep, self.fail, self.absent, self.calls = set(), set(fail), set(absent), []

    def __call__(self, address, method: str, path: str) -> tuple[int, str]:
        alias = self.by_address[address]
        self.calls.append((alias, method, path.split("?")[0]))
        if alias in self.absent:  # not started yet
            return 0, "connection refused"
        if path == "/is_sleeping":
            return 200, json.dumps({"is_sleeping": alias in self.asleep})
        if alias in self.fail:
            return 500, "boom"
        (self.asleep.add if path.startswith("/sleep") else self.asleep.discard)(alias)
        return 200, ""


class Log:
    def __init__(self):
        self.steps = []

    def step(self, address, step, outcome, message):
        self.steps.append((address, step, outcome))


def test_apply_makes_room_sleeps_all_but_the_first_and_wakes_the_first_at_the_end(tmp_path):
    d = desired(
        tmp_path,
        model("a", "    swap_group: g\n", "none") + model("b", "    swap_group: g\n", "none") + model("c", gpus="none"),
    )
    plan = build_plan(d, parse_state("lab", [], []), PlanFacts())
    ports = {a: EngineAddress.of(m.spec) for a, m in d.models.items()}
    assert ports["a"].socket and ports["a"].socket.endswith("/sockets/a/engine.sock")
    engines, log = FakeEngines(ports, absent={"a", "b"}), Log()
    (tmp_path / "router" / "holds").mkdir(parents=True)
    (tmp_path / "router" / "holds" / "old").write_text("aigo-apply pid 1 until 9999999999\n")  # a killed apply's
    steps = SwapSteps(plan, d.swap_groups, log, tmp_path / "router", call=engines)
    spec = {alias: m.spec for alias, m in d.models.items()}

    assert not (tmp_path / "router" / "holds" / "old").exists()  # cleared: this apply holds the project's lock
    steps.before_start("c", spec["c"])  # not on demand: nothing
    assert engines.calls == [] and list((tmp_path / "router" / "holds").iterdir()) == []
    steps.before_start("a", spec["a"])
    engines.absent.discard("a")  # started
    hold = (tmp_path / "router" / "holds" / "g").read_text()  # the router runs no swap of g meanwhile...
    assert int(hold.split(" until ")[1].split()[0]) > time.time() + 1800  # ...until the plan's longest start
    assert int(hold.split(" lease ")[1]) <= time.time() + 16  # is over, while this apply renews its lease
    steps.after_ready("a", spec["a"], ports["a"])  # the group's first stays awake
    steps.before_start("b", spec["b"])  # a is awake: it goes to sleep so that b finds the memory free
    engines.absent.discard("b")
    steps.after_ready("b", spec["b"], ports["b"])  # b is not the first: it sleeps once proven ready
    assert engines.asleep == {"a", "b"}
    steps.finish()
    assert engines.asleep == {"b"} and not (tmp_path / "router" / "holds" / "g").exists()
    assert [s for s in log.steps if s[1] in ("sleep", "wake")] == [
        ("model.a", "sleep", "ok"),
        ("model.b", "sleep", "ok"),
        ("model.a", "wake", "ok"),
    ]


def test_a_model_that_cannot_be_put_to_sleep_fails_its_step(tmp_path):
    d = desired(tmp_path, model("a", "    swap_group: g\n") + model("b", "    swap_group: g\n"))
    plan = build_plan(d, parse_state("lab", [], []), PlanFacts())
    ports = {a: EngineAddress.of(m.spec) for a, m in d.models.items()}
    steps = SwapSteps(plan, d.swap_groups, Log(), None, call=FakeEngines(ports, fail={"b"}))
    with pytest.raises(Exception, match="model b is ready but could not be put to sleep: the engine answered 500"):
        steps.after_ready("b", d.models["b"].spec, ports["b"])


def test_the_plan_and_an_estimate_stay_what_they_were_for_files_without_groups(tmp_path):
    d = desired(tmp_path, model("a", fraction=0.5))
    (row,) = gpu_ledger.build(d, nvml(), facts({"a": 1}), ours=set())
    assert "swap_groups" not in row and all("swap_group" not in m for m in row["models"])
    assert Estimate(1, 0, 0, 0, 1, 1).total == 1
