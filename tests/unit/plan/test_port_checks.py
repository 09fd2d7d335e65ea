"""Host ports at plan time (plan/port_checks.py), pure: the router's address and each published engine
port against listening sockets given as data. A socket something else holds on a clashing address
blocks the plan (`host.port`) naming the setting, the port, the address and the process where known;
what this project's own containers hold is no clash, and what another container holds is said once,
by the planner's conflict.port."""

from __future__ import annotations

import pytest

from aigo_apply.observe.containers import parse_state
from aigo_apply.observe.listeners import Listener
from aigo_apply.plan.facts import PlanFacts, PlanRequest
from aigo_apply.plan.planner import build_plan
from aigo_apply.plan.port_checks import Wanted, clashes, port_checks, wanted

from helpers.planner_inputs import CONFIG, desired, observed, running

WITH_PORT = CONFIG.replace("    context_length: 8K\n", "    context_length: 8K\n    port: 8101\n")
NOTHING = parse_state("lab", [], [])


def ollama(address: str, port: int) -> Listener:
    return Listener(address, port, 4242, 1000, 1234, "ollama")


def checks_for(d, seen, sockets):
    return port_checks(clashes(wanted(d), seen, sockets))


def test_the_router_and_every_published_engine_port_are_wanted_with_their_setting(tmp_path):
    d = desired(tmp_path, WITH_PORT.replace("models:", "router: {port: 8200, bind: '::'}\nmodels:"))
    assert wanted(d) == [Wanted("router.port", "::", 8200), Wanted("models.beta.port", "127.0.0.1", 8101)]
    (tmp_path / "b").mkdir()
    assert wanted(desired(tmp_path / "b")) == [Wanted("router.port", "127.0.0.1", 8000)]  # socket engines: none


def test_a_program_on_the_routers_port_blocks_the_plan_naming_port_address_and_process(tmp_path):
    d = desired(tmp_path)
    checks = checks_for(d, NOTHING, [ollama("127.0.0.1", 8000)])
    assert [(c.id, c.status) for c in checks] == [("host.port", "blocking")]
    assert checks[0].message == "router.port 8000: 127.0.0.1:8000 is already in use by ollama (pid 1234)"
    assert checks[0].remediation == "stop it, or choose another router.port"
    plan = build_plan(d, NOTHING, PlanFacts(checks=tuple(checks)))
    assert [(b.id, b.message, b.remediation) for b in plan.blockers] == [
        ("host.port", checks[0].message, checks[0].remediation)
    ]
    assert plan.summary["blocked"]
    # a readiness check: --ignore-readiness host.port lets it through, and the plan says so
    ignored = build_plan(d, NOTHING, PlanFacts(checks=tuple(checks)), PlanRequest(ignore=frozenset({"host.port"})))
    assert not ignored.blockers and any("host.port ignored" in w for w in ignored.warnings)


def test_a_published_engine_port_in_use_names_the_models_setting(tmp_path):
    d = desired(tmp_path, WITH_PORT)
    (check,) = checks_for(d, NOTHING, [Listener("0.0.0.0", 8101, 7, 1000, 77, "python3")])
    assert check.message == "models.beta.port 8101: 0.0.0.0:8101 is already in use by python3 (pid 77)"
    assert check.remediation == "stop it, or choose another models.beta.port"


@pytest.mark.parametrize(
    ("bind", "address", "clash"),
    [
        ("127.0.0.1", "127.0.0.1", True),
        ("127.0.0.1", "0.0.0.0", True),  # every address, loopback included
        ("127.0.0.1", "::", True),
        ("0.0.0.0", "127.0.0.1", True),  # the router would listen on every address, that one too
        ("0.0.0.0", "192.168.1.5", True),
        ("::", "::1", True),
        ("::", "127.0.0.1", True),
        ("127.0.0.1", "192.168.1.5", False),  # another address of this host: both can listen
        ("127.0.0.1", "127.0.0.2", False),
        ("127.0.0.1", "::1", False),
        ("::1", "127.0.0.1", False),
    ],
)
def test_a_socket_clashes_on_the_same_address_or_when_either_is_a_wildcard(tmp_path, bind, address, clash):
    d = desired(tmp_path, CONFIG.replace("models:", f"router: {{port: 8000, bind: '{bind}'}}\nmodels:"))
    found = checks_for(d, NOTHING, [ollama(address, 8000)])
    assert bool(found) is clash, found


def test_a_socket_on_another_port_is_no_clash(tmp_path):
    d = desired(tmp_path, WITH_PORT)
    assert checks_for(d, NOTHING, [ollama("127.0.0.1", 8001), ollama("0.0.0.0", 11434), ollama("::", 8102)]) == []


def _our_router(d, state: str) -> dict:
    """The list entry of this project's router as Docker reports it: on the host network."""
    (entry,) = [e for e in running(d) if e["Id"] == "id-router"]
    return {**entry, "State": state, "HostConfig": {"NetworkMode": "host"}}


def test_our_running_router_and_our_engines_published_ports_are_no_clash(tmp_path):
    d = desired(tmp_path, WITH_PORT)
    ours = observed(d, [_our_router(d, "running")] + running(d, router=False))
    haproxy = Listener("127.0.0.1", 8000, 11, 1000)  # owner unknown: another user's, or a container's
    docker_proxy = Listener("127.0.0.1", 8101, 12, 0)  # Docker publishes beta's port through it
    assert checks_for(d, ours, [haproxy, docker_proxy]) == []


def test_our_router_restarting_holds_nothing_so_the_program_in_its_place_is_named(tmp_path):
    """The router that could not bind restarts forever (unless-stopped); the port is the other
    program's, and the plan must say so rather than take it for the router's."""
    d = desired(tmp_path)
    restarting = observed(d, [_our_router(d, "restarting")] + running(d, router=False))
    (check,) = checks_for(d, restarting, [ollama("127.0.0.1", 8000)])
    assert check.message == "router.port 8000: 127.0.0.1:8000 is already in use by ollama (pid 1234)"


def test_a_port_another_container_publishes_is_said_once_by_conflict_port(tmp_path):
    d = desired(tmp_path, WITH_PORT)
    web = {
        "Id": "f2",
        "Names": ["/web"],
        "State": "running",
        "Labels": {},
        "Ports": [{"IP": "0.0.0.0", "PrivatePort": 80, "PublicPort": 8101}],
    }
    seen = observed(d, running(d) + [web])
    proxy = Listener("0.0.0.0", 8101, 13, 0, 99, "docker-proxy")
    checks = checks_for(d, seen, [proxy])
    assert checks == []
    plan = build_plan(d, seen, PlanFacts(checks=tuple(checks)))
    assert [(b.id, b.address) for b in plan.blockers] == [("conflict.port", "model.beta")]


def test_an_owner_the_host_does_not_say_is_said_so_with_the_command_that_tells(tmp_path):
    d = desired(tmp_path)
    (check,) = checks_for(d, NOTHING, [Listener("0.0.0.0", 8000, 5, 0)])
    assert check.message.startswith(
        "router.port 8000: 0.0.0.0:8000 is already in use by a program this user cannot see"
    )
    assert check.remediation == (
        "stop it, or choose another router.port (`sudo ss -ltnp 'sport = :8000'` names the program)"
    )
    (proxy,) = checks_for(d, NOTHING, [Listener("127.0.0.1", 8000, 6, 0, 321, "docker-proxy")])
    assert "docker-proxy (pid 321), for a container this Docker engine does not list" in proxy.message


def test_every_socket_that_takes_a_setting_is_named_in_its_one_check(tmp_path):
    d = desired(tmp_path, WITH_PORT)
    sockets = [ollama("::", 8000), ollama("0.0.0.0", 8000), Listener("127.0.0.1", 8101, 9, 1000, 55, "llama-swap")]
    router, beta = checks_for(d, NOTHING, sockets)
    assert router.message == (
        "router.port 8000: 0.0.0.0:8000 is already in use by ollama (pid 1234); [::]:8000 is already in use by "
        "ollama (pid 1234)"
    )
    assert beta.message == "models.beta.port 8101: 127.0.0.1:8101 is already in use by llama-swap (pid 55)"
