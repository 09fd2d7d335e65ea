"""What the readiness checks gathered for a plan add to it: a blocking check is a blocker (a warning
when --ignore-readiness names it), a warning check a warning. Pure. The planner adds the checks it
is given (plan/planner.build_plan); the Docker plan adds, to the plan made once, the checks of the
secrets its changes need (platforms/docker/planning.plan_for), which only that plan can say."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from aigo_apply.plan.host_checks import Check
from aigo_apply.plan.types import Blocker, Plan


def findings(checks: Iterable[Check], ignore: frozenset[str]) -> tuple[list[Blocker], list[str]]:
    """The blockers and the warnings `checks` give, in their order (`ignore`: the waived checks)."""
    blockers: list[Blocker] = []
    warnings: list[str] = []
    for check in checks:
        if check.status == "blocking" and check.id in ignore:
            warnings.append(f"readiness check {check.id} ignored (--ignore-readiness): {check.message}")
        elif check.status == "blocking":
            blockers.append(Blocker(check.id, check.message, check.remediation, "host"))
        elif check.status == "warning":
            warnings.append(
                f"{check.id}: {check.message} ({check.remediation})" if check.remediation else check.message
            )
    return blockers, warnings


def with_checks(plan: Plan, checks: Iterable[Check]) -> Plan:
    """`plan` with what `checks` find after its own blockers and warnings, as if the planner had been
    given them last (its request's waivers apply)."""
    blockers, warnings = findings(checks, plan.request.ignore)
    if not blockers and not warnings:
        return plan
    return dataclasses.replace(plan, blockers=plan.blockers + tuple(blockers), warnings=plan.warnings + tuple(warnings))
