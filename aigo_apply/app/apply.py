"""`apply` and `destroy` end to end, on whichever platform the file (or --platform) names: read and
check a saved plan (bounded and strict) first, then the one converge loop (app/converge.py) with the
plan made now, approved against the saved one when there is one."""

from __future__ import annotations

from typing import Any

from aigo_apply.adapters.runtime import Runtime
from aigo_apply.app.choose_platform import open_platform
from aigo_apply.app.converge import converge
from aigo_apply.app.docker_platform import DockerPlatform
from aigo_apply.app.platform import ApplyOptions, Console, Platform
from aigo_apply.app.saved_plan import approved, config_of, confirm_waivers, read_plan
from aigo_apply.plan.facts import PlanRequest
from aigo_apply.plan.types import Plan

__all__ = ["ApplyOptions", "Console", "open_for_apply", "run_apply", "run_destroy"]


def open_for_apply(opts: ApplyOptions, runtime: Runtime | None = None) -> tuple[Plan | None, Platform[Any]]:
    """The saved plan (when `opts.planfile` names one), read and checked before anything else, and
    the platform of the file it names (or of -f): chosen once, here."""
    saved = read_plan(opts.planfile) if opts.planfile else None
    if saved:
        confirm_waivers(saved, opts.ignore)
    file = opts.file or (config_of(saved) if saved else None)
    return saved, open_platform(file, opts.platform, runtime, plans=True)


def run_apply(
    opts: ApplyOptions, runtime: Runtime | None = None, target: Platform[Any] | None = None, saved: Plan | None = None
) -> int:
    """A saved plan is an approval, not an instruction: the plan is made again from the config file
    and the platform, with the options the saved one records, and carried out only when its
    actions equal the saved ones. Nothing else is read from the plan file. `target`: the platform
    (with `saved`) as open_for_apply chose it; None chooses it here."""
    if target is None:
        saved, target = open_for_apply(opts, runtime)
    request = (
        saved.request
        if saved
        else PlanRequest(
            frozenset(opts.replace), frozenset(opts.target), frozenset(opts.ignore), opts.pull, opts.locked
        )
    )
    target.admit(request, saved)

    def make(observed: Any) -> Plan:
        fresh = target.plan(observed, request)
        return approved(saved, fresh) if saved else fresh

    return converge(target, "apply", opts, make, ask=saved is None)


def run_destroy(
    opts: ApplyOptions, project: str | None = None, runtime: Runtime | None = None, target: Platform[Any] | None = None
) -> int:
    """Every container (or cluster object) of the project goes, nothing else. `project`: destroy
    --project NAME on Docker, without a config file."""
    if target is None:
        target = (
            DockerPlatform.of_project(project, opts.file, runtime)
            if project is not None
            else open_platform(opts.file, opts.platform, runtime)
        )
    return converge(target, "destroy", opts, target.destroy_plan, ask=True)
