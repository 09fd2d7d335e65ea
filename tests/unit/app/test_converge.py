"""The one converge loop (app/converge.py) that apply and destroy run on every platform: the order of
its steps (lock, observe, plan, show, confirm, execute, report, settle), what stops it before the
executor (a blocked plan, no confirmation, nothing to change) and the exit code of each ending. The
platform here is an in-memory one that logs what the loop asks of it; the Docker and Kubernetes
platforms are tested through the real CLI (test_kube_cli.py, tests/docker/)."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import pytest

from aigo_apply.app.converge import converge
from aigo_apply.cli.reporter import TextReporter
from aigo_apply.errors import AigoError, PlanBlocked
from aigo_apply.plan.types import Action, Blocker, Plan
from aigo_apply.platforms.outcome import ApplyReport, Outcome
from aigo_apply.platforms.platform import Run
from aigo_apply.platforms.requests import ApplyRequest

CREATE = Action("model.a", "create", ("no container aigo-lab-a exists",), model="a")


class Platform:
    """Logs each call the loop makes, in order."""

    name, where, project, file, desired = "fake", " on the fake", "lab", "aigo.yaml", None

    def __init__(self, plan: Plan, report: ApplyReport | None = None):
        self.calls: list[str] = []
        self._plan, self._report = plan, report or ApplyReport([Outcome("model.a", "create", True, "")], False)

    def admit(self, request, saved) -> None:
        self.calls.append("admit")

    @contextmanager
    def lock(self, command, timeout):
        self.calls.append(f"lock {command} {timeout}")
        try:
            yield
        finally:
            self.calls.append("unlock")

    def observe(self):
        self.calls.append("observe")
        return "observed"

    def plan(self, observed, request) -> Plan:
        self.calls.append(f"plan {observed}")
        return self._plan

    def destroy_plan(self, observed) -> Plan:
        return self.plan(observed, None)

    def show(self, console, command, plan) -> None:
        self.calls.append("show")

    def executor(self, command, plan, observed, request, console):
        self.calls.append(f"executor {command} {observed}")
        return Run(threading.Event(), lambda: self.calls.append("run") or self._report)

    def settled(self, command, plan, request, console, canaries=()) -> None:
        self.calls.append(f"settled {command}")

    def status(self):
        return {}

    def status_text(self, report) -> str:
        return ""


def _run(platform: Platform, ask: bool = True, confirm=None, **options) -> int:
    console = TextReporter()
    console.confirm = confirm
    request = ApplyRequest(lock_timeout=2.0, **options)
    return converge(platform, "apply", request, console, lambda observed: platform.plan(observed, None), ask)


def test_the_steps_come_in_one_order_and_the_lock_is_held_throughout(capsys):
    asked: list[str] = []
    platform = Platform(Plan("lab", "aigo.yaml", "", (CREATE,)))
    assert _run(platform, confirm=lambda q: asked.append(q) or True) == 0
    assert platform.calls == [
        "lock apply 2.0",
        "observe",
        "plan observed",
        "show",
        "executor apply observed",
        "run",
        "settled apply",
        "unlock",
    ]
    assert asked == ["Do you want to apply these changes on the fake? Only 'yes' will be accepted"]
    assert "Apply complete: 1 created." in capsys.readouterr().out


def test_nothing_to_change_settles_without_asking_or_executing():
    platform = Platform(Plan("lab", "aigo.yaml", "", (Action("model.a", "noop", ("settings match",)),)))
    assert _run(platform, confirm=lambda q: pytest.fail("asked")) == 0
    assert platform.calls == ["lock apply 2.0", "observe", "plan observed", "show", "settled apply", "unlock"]


def test_a_blocked_plan_is_shown_then_refused_before_anything_acts():
    blocked = Plan("lab", "aigo.yaml", "", (CREATE,), blockers=(Blocker("gpu.memory", "too big", "smaller"),))
    platform = Platform(blocked)
    with pytest.raises(PlanBlocked, match=r"apply refused: the plan is blocked \(1 problem above\)"):
        _run(platform, yes=True)
    assert platform.calls == ["lock apply 2.0", "observe", "plan observed", "show", "unlock"]


def test_without_a_terminal_or_yes_it_refuses_and_a_no_cancels():
    platform = Platform(Plan("lab", "aigo.yaml", "", (CREATE,)))
    with pytest.raises(AigoError, match="there is no terminal to ask on; pass -y/--yes"):
        _run(platform)
    assert _run(platform, confirm=lambda q: False) == 1
    assert "executor apply observed" not in platform.calls and "settled apply" not in platform.calls
    assert _run(platform, ask=False) == 0  # a saved plan was the approval


def test_a_failed_or_interrupted_run_reports_its_code_and_does_not_settle(capsys):
    failed = ApplyReport([Outcome("model.a", "create", False, "not ready")], False)
    platform = Platform(Plan("lab", "aigo.yaml", "", (CREATE,)), failed)
    assert _run(platform, yes=True) == 1
    interrupted = ApplyReport([], True)
    assert _run(Platform(Plan("lab", "aigo.yaml", "", (CREATE,)), interrupted), yes=True) == 130
    assert "settled apply" not in platform.calls
    err = capsys.readouterr().err
    assert "Apply failed: nothing changed; 1 failed:" in err and "model.a: not ready" in err
    assert "Apply interrupted: nothing changed. Run `aigo-apply apply` again to converge." in err
