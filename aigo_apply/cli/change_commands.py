"""Commands that change the machine: apply, destroy, and watch (which keeps routes in step). Each
parses its options into a request (platforms/requests.py) and runs its use case with the view of its
-o/--output (cli/views.py)."""

from __future__ import annotations

import re
from pathlib import Path

import click

from aigo_apply.cli.group import (
    _confirm,
    canary_options,
    cli,
    file_option,
    force_conflicts_option,
    ignore_option,
    lock_option,
    output_option,
    path_value,
    platform_option,
    pull_option,
    replace_option,
    target_option,
    yes_option,
)


@cli.command()
@click.argument("planfile", required=False, type=click.Path(dir_okay=False, path_type=Path), callback=path_value)
@file_option
@output_option
@yes_option
@pull_option
@lock_option
@replace_option
@target_option("Apply")
@ignore_option
@click.option("--locked", is_flag=True, help="Install exactly the model commits and images aigo.lock records.")
@platform_option
@force_conflicts_option
@canary_options
def apply(
    planfile: Path | None,
    file: str | None,
    output: str,
    yes: bool,
    pull: str,
    lock_timeout: float,
    replace: tuple[str, ...],
    target: tuple[str, ...],
    ignore: tuple[str, ...],
    locked: bool,
    platform: str | None,
    force_conflicts: bool,
    skip_canary: bool,
    require_canary: bool,
) -> int:
    """Converge this machine to the file (or to a saved PLANFILE): pull, start, create, recreate, remove.
    A successful apply writes aigo.lock next to the file."""
    from aigo_apply.app.apply import ApplyRequest, run_apply
    from aigo_apply.cli.views import view_for

    if locked and planfile:
        raise click.UsageError("--locked applies the file; a saved plan already says what it installs")
    if (skip_canary or require_canary) and planfile:
        raise click.UsageError(
            "--skip-canary and --require-canary go with `plan --out`: a saved plan records its canary options"
        )
    request = ApplyRequest(
        file=file,
        planfile=planfile,
        yes=yes,
        pull=pull,
        lock_timeout=lock_timeout,
        replace=replace,
        target=target,
        ignore=ignore,
        locked=locked,
        platform=platform,
        force_conflicts=force_conflicts,
        skip_canary=skip_canary,
        require_canary=require_canary,
    )
    if skip_canary and require_canary:
        raise click.UsageError("--skip-canary and --require-canary contradict each other: pass one")
    return run_apply(request, view_for(output, _confirm()))


@cli.command()
@file_option
@output_option
@yes_option
@lock_option
@click.option("--project", metavar="NAME", help="Destroy this project without reading a config file.")
@platform_option
def destroy(
    file: str | None, output: str, yes: bool, lock_timeout: float, project: str | None, platform: str | None
) -> int:
    """Remove every container of the project (never anything else)."""
    from aigo_apply.app.apply import ApplyRequest, run_destroy
    from aigo_apply.cli.views import view_for
    from aigo_apply.config.schema import schema

    if project is not None and not re.search(schema()["properties"]["project"]["pattern"], project):
        raise click.BadParameter(
            f"{project!r} is not a project name (as `project:` in aigo.yaml)", param_hint="--project"
        )
    if project is not None and platform == "kubernetes":
        raise click.UsageError("--project destroys on Docker; on a cluster, name the file with -f")
    request = ApplyRequest(
        file=file, yes=yes, pull="never", lock_timeout=lock_timeout, platform=platform, project=project
    )
    return run_destroy(request, view_for(output, _confirm()))


@cli.command()
@file_option
def watch(file: str | None) -> int:
    """Follow Docker events: remove a dead engine's route at once, re-add it once it is ready again."""
    from aigo_apply.app.watch import WatchRequest, run_watch
    from aigo_apply.cli.views import view_for

    return run_watch(WatchRequest(file=file), view_for("text"))
