"""`plan`, `show` and `status` as use cases, on the platform chosen once: the plan made fresh from what
runs now, shown by the view, saved for `apply PLANFILE` when asked, with its exit code (1 blocked, 2
with changes under --detailed-exitcode); a saved plan shown as `plan` shows it, read by the one
bounded reader (app/saved_plan.read_plan); and what runs now, in the platform's one-screen report."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aigo_apply.app.choose_platform import open_platform
from aigo_apply.app.saved_plan import read_plan, save_plan
from aigo_apply.errors import EXIT_CHANGES, EXIT_ERROR, EXIT_OK, PlanFileError
from aigo_apply.plan.facts import PlanRequest
from aigo_apply.plan.text import shown
from aigo_apply.platforms.capabilities import refuse_lacking
from aigo_apply.platforms.docker import planning
from aigo_apply.platforms.views import PlanView, StatusView


@dataclass(frozen=True, kw_only=True)
class PlanCommand:
    """What `plan` asks for: the file, what to show or save, and the plan's own options (replace,
    target, ignored checks, the canary switches) as `apply` takes them."""

    file: str | None = None
    show_diff: bool = False
    out: Path | None = None
    detailed_exitcode: bool = False
    replace: tuple[str, ...] = ()
    target: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    platform: str | None = None
    skip_canary: bool = False
    require_canary: bool = False


@dataclass(frozen=True, kw_only=True)
class ShowRequest:
    """What `show` asks for: a saved plan's file, and whether to show the router diff it may carry."""

    planfile: Path
    show_diff: bool = False


@dataclass(frozen=True, kw_only=True)
class StatusRequest:
    """What `status` asks for: the file (or the current folder's), on its platform or --platform."""

    file: str | None = None
    platform: str | None = None


def run_plan(request: PlanCommand, view: PlanView) -> int:
    wanted = PlanRequest(
        frozenset(request.replace),
        frozenset(request.target),
        frozenset(request.ignore),
        skip_canary=request.skip_canary,
        require_canary=request.require_canary,
    )
    where = open_platform(request.file, request.platform, plans=True)
    if request.out is not None:
        refuse_lacking(where.lacks, "saved_plan")
    result = planning.make_plan(where, wanted)  # (a module attribute: tests put another in its place)
    view.plan(result, request.show_diff)
    if request.out is not None:
        if not result.config_file.isprintable():  # apply PLANFILE would refuse the plan: say so now
            raise PlanFileError(
                f"the config file's name {shown(result.config_file)} holds characters a saved plan refuses; "
                "rename the file to save a plan for it (nothing was saved)"
            )
        save_plan(result, request.out)
        view.plan_saved(request.out)
    if result.blockers:
        return EXIT_ERROR
    return EXIT_CHANGES if request.detailed_exitcode and result.has_changes else EXIT_OK


def run_show(request: ShowRequest, view: PlanView) -> int:
    """A saved plan as `plan` printed it; nothing of this machine is read (PlanFileError if the file
    is not one `plan --out` wrote)."""
    view.plan(read_plan(request.planfile), request.show_diff)
    return EXIT_OK


def run_status(request: StatusRequest, view: StatusView) -> int:
    where = open_platform(request.file, request.platform)
    view.status(where.status(), where.status_text)
    return EXIT_OK
