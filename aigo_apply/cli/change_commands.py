"""Commands that change the machine: apply, destroy, and watch (which keeps routes in step)."""

from __future__ import annotations

import re
from pathlib import Path

import click

from aigo_apply.cli.group import (
    _confirm,
    _console,
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
from aigo_apply.errors import EXIT_OK, AigoError


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
) -> int:
    """Converge this machine to the file (or to a saved PLANFILE): pull, start, create, recreate, remove.
    A successful apply writes aigo.lock next to the file."""
    from aigo_apply.app.apply import ApplyOptions, open_for_apply, run_apply

    if locked and planfile:
        raise click.UsageError("--locked applies the file; a saved plan already says what it installs")
    options = ApplyOptions(
        _console(output),
        file,
        planfile,
        yes,
        pull,
        output,
        lock_timeout,
        replace,
        target,
        _confirm(),
        ignore,
        locked,
        platform,
        force_conflicts=force_conflicts,
    )
    saved, where = open_for_apply(options)
    if locked and where.name == "kubernetes":
        raise click.UsageError("--locked: aigo.lock pins what this machine runs; on a cluster it is not used")
    return run_apply(options, target=where, saved=saved)


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
    from aigo_apply.app.apply import ApplyOptions, run_destroy
    from aigo_apply.config.schema import schema

    if project is not None and not re.search(schema()["properties"]["project"]["pattern"], project):
        raise click.BadParameter(
            f"{project!r} is not a project name (as `project:` in aigo.yaml)", param_hint="--project"
        )
    options = ApplyOptions(
        _console(output), file, None, yes, "never", output, lock_timeout, confirm=_confirm(), platform=platform
    )
    if project is not None and platform == "kubernetes":
        raise click.UsageError("--project destroys on Docker; on a cluster, name the file with -f")
    return run_destroy(options, project)


@cli.command()
@file_option
def watch(file: str | None) -> int:
    """Follow Docker events: remove a dead engine's route at once, re-add it once it is ready again."""
    from aigo_apply.adapters.docker_engine import DockerRuntime
    from aigo_apply.app.docker_platform import router_for
    from aigo_apply.app.planning import load_desired, observe
    from aigo_apply.app.watch import Watcher
    from aigo_apply.plan.types import Plan

    desired = load_desired(file)
    runtime = DockerRuntime(timeout=None)
    observed = observe(desired.project, runtime)
    router = router_for(Plan(desired.project, desired.file, "", ()), observed, runtime, desired)
    if router is None:
        raise AigoError(f"project '{desired.project}' has no router yet; run `aigo-apply apply` first")
    specs = {alias: m.spec for alias, m in desired.models.items()}
    from aigo_apply.cli.reporter import echo

    watcher = Watcher(runtime, router, desired.project, specs, lambda line: echo(line, colours=False))
    watcher.install_signals()
    watcher.run()
    click.echo("watch stopped")
    return EXIT_OK
