"""`apply` and `destroy` end to end, on whichever platform the file (or --platform) names: read and
check a saved plan (bounded and strict) first, then the one converge loop (app/converge.py) with the
plan made now, approved against the saved one when there is one."""

from __future__ import annotations

from typing import Any

from aigo_apply.adapters.runtime import Runtime
from aigo_apply.app.choose_platform import open_platform
from aigo_apply.app.converge import converge
from aigo_apply.app.saved_plan import approved, config_of, confirm_waivers, read_plan
from aigo_apply.plan.facts import PlanRequest
from aigo_apply.plan.types import Plan
from aigo_apply.platforms.capabilities import refuse_lacking
from aigo_apply.platforms.docker.platform import DockerPlatform
from aigo_apply.platforms.platform import Platform
from aigo_apply.platforms.requests import ApplyRequest
from aigo_apply.platforms.views import Console

__all__ = ["ApplyRequest", "Console", "open_for_apply", "run_apply", "run_destroy"]


def open_for_apply(request: ApplyRequest, runtime: Runtime | None = None) -> tuple[Plan | None, Platform[Any]]:
    """The saved plan (when `request.planfile` names one), read and checked before anything else, and
    the platform of the file it names (or of -f): chosen once, here."""
    saved = read_plan(request.planfile) if request.planfile else None
    if saved:
        confirm_waivers(saved, request.ignore)
    file = request.file or (config_of(saved) if saved else None)
    locked = saved.request.locked if saved else request.locked  # as run_apply's plan pins its downloads
    return saved, open_platform(file, request.platform, runtime, plans=True, locked=locked)


def run_apply(
    request: ApplyRequest,
    console: Console,
    runtime: Runtime | None = None,
    target: Platform[Any] | None = None,
    saved: Plan | None = None,
) -> int:
    """A saved plan is an approval, not an instruction: the plan is made again from the config file
    and the platform, with the options the saved one records, and carried out only when its
    actions equal the saved ones. Nothing else is read from the plan file. `target`: the platform
    (with `saved`) as open_for_apply chose it; None chooses it here."""
    if target is None:
        saved, target = open_for_apply(request, runtime)
    if request.locked:
        refuse_lacking(target.lacks, "lock")
    wanted = (
        saved.request
        if saved
        else PlanRequest(
            frozenset(request.replace),
            frozenset(request.target),
            frozenset(request.ignore),
            request.pull,
            request.locked,
            request.skip_canary,
            request.require_canary,
        )
    )
    target.admit(wanted, saved)

    def make(observed: Any) -> Plan:
        fresh = target.plan(observed, wanted)
        return approved(saved, fresh) if saved else fresh

    return converge(target, "apply", request, console, make, ask=saved is None)


def run_destroy(
    request: ApplyRequest, console: Console, runtime: Runtime | None = None, target: Platform[Any] | None = None
) -> int:
    """Every container (or cluster object) of the project goes, nothing else. `request.project`:
    destroy --project NAME on Docker, without a config file."""
    if target is None:
        target = (
            DockerPlatform.of_project(request.project, request.file, runtime)
            if request.project is not None
            else open_platform(request.file, request.platform, runtime)
        )
    return converge(target, "destroy", request, console, target.destroy_plan, ask=True)
