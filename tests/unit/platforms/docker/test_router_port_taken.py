"""apply when another program holds the router's port: the router is said to serve only
when this project's router answers (Routes.answer: the routes header of its /v1/models), never
because something answered on its port; a router container that cannot bind (it exits, and Docker's
unless-stopped restarts it forever) fails at once, and what the step made is undone: a created
router is removed, a started one stopped again. On the in-memory runtime (tests/helpers/fakes.py)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from aigo_apply.desired.build import build_desired
from aigo_apply.observe.config_file import load_config
from aigo_apply.observe.containers import parse_state
from aigo_apply.plan.facts import PlanRequest
from aigo_apply.plan.planner import build_plan
from aigo_apply.platforms.docker.executor import Executor
from aigo_apply.platforms.journal import Journal

from helpers.configs import host_context, write_config
from helpers.fakes import FakeReporter, FakeRoutes, FakeRuntime, FakeWaits, Log

CONFIG = """\
version: 1
project: lab
engines: {vllm: {image: local/engine, image_tag: "1"}}
models:
  alpha:
    source: {path: /m/alpha}
    context_length: 4096
    gpus: none
"""
ROUTER = "aigo-lab-router"
FOREIGN = "HTTP 200 without the x-aigo-routes header of this project's router"
BIND_ALERT = (
    "[ALERT]    (1) : Binding [/usr/local/etc/haproxy/aigo/live/haproxy.cfg:40] for frontend aigo: cannot bind "
    "socket (Address already in use) [127.0.0.1:8000]"
)


class PortTaken:
    """Who answers on the router's port while another program holds it: that program (a /health 200
    is what most answer; its /v1/models has no routes header), and the router container's HAProxy
    cannot bind, exits, and Docker restarts it (unless `binds`: it shares the port and stays up)."""

    def __init__(self, rt: FakeRuntime, binds: bool = False):
        self.rt, self.binds, self.looks = rt, binds, 0

    def __call__(self, routes) -> str:
        self.looks += 1
        if not self.binds and ROUTER in self.rt.containers:
            self.rt.logs[ROUTER] = [BIND_ALERT]
            self.rt.containers[ROUTER]["State"] = "restarting"
        return FOREIGN


def _run(tmp_path: Path, router_state: str | None, answer) -> tuple[FakeRuntime, Log, object, float]:
    d = build_desired(load_config(str(write_config(tmp_path, CONFIG))), host_context(Path("/store")))
    log = Log()
    rt = FakeRuntime(log)
    if router_state:
        rt.add_existing(d.router.container, router_state)
    seen = parse_state("lab", rt.list_containers(), rt.list_images(), {}, {})
    plan = build_plan(d, seen, None, PlanRequest())
    (tmp_path / "state").mkdir()
    executor = Executor(
        rt,
        FakeReporter(),
        Journal(tmp_path / "state"),
        routes=FakeRoutes(log, d.router.settings),
        interrupted=threading.Event(),
        make_waiter=FakeWaits(log),
        wait_router=answer(rt),
        router_start_timeout=0.3,
    )
    assert executor.router is not None
    report = executor.run(plan)
    (router,) = [o for o in report.outcomes if o.address == "router"]
    return rt, log, router, executor.router.start_timeout


@pytest.mark.parametrize(("before", "kind"), [(None, "create"), ("exited", "start")])
def test_a_router_that_cannot_bind_is_never_said_to_serve_and_is_not_left_restarting(tmp_path, before, kind):
    rt, log, router, _ = _run(tmp_path, before, PortTaken)
    assert (router.kind, router.ok) == (kind, False)
    assert "serving" not in router.message, router.message
    assert f"its container exited (code 0) before it answered; another program answered on its port ({FOREIGN})" in (
        router.message
    )
    assert (
        "HAProxy cannot listen on 127.0.0.1:8000: another program holds the port (`aigo-apply plan` names it): stop "
        "it, or choose another router.port" in router.message
    )
    if kind == "create":  # the router this apply made is gone, not restarting forever
        assert ROUTER not in rt.containers and log.count("remove", ROUTER) == 1
        assert router.message.endswith(f"the router container {ROUTER} was removed")
    else:  # the router that was stopped is stopped again
        assert rt.state_of(ROUTER) == "exited" and log.count("stop", ROUTER) == 1
        assert router.message.endswith(f"the router container {ROUTER} was stopped")
    assert log.count("route_add", "alpha") == 0  # no route changes through a router that is not serving


def test_a_program_that_answers_while_the_router_stays_up_is_not_taken_for_it(tmp_path):
    """HAProxy listens (a program sharing the port, or one that took it between two looks) but what
    answers is not this project's router: the wait runs out, and the router this step made goes."""
    rt, _, router, timeout = _run(tmp_path, None, lambda rt: PortTaken(rt, binds=True))
    assert not router.ok and "serving" not in router.message
    assert f"it did not answer as this project's router within {timeout:.0f} s ({FOREIGN})" in router.message
    assert ROUTER not in rt.containers


def test_our_router_answering_is_serving(tmp_path):
    rt, _, router, _ = _run(tmp_path, None, lambda rt: lambda routes: "")
    assert router.ok and router.message == "router serving on http://127.0.0.1:8000/v1"
    assert rt.state_of(ROUTER) == "running"
