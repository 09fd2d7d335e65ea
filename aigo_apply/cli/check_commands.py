"""Commands that read and report, and never change the machine: validate, plan, show (a saved
plan), readiness, status, render. Each parses its options into a request (platforms/requests.py) and runs its use case with
the view of its -o/--output (cli/views.py); `plan --out` writes only its plan file, the safe way
(app/saved_plan.save_plan)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from aigo_apply.cli.group import (
    alias_values,
    canary_options,
    cli,
    file_option,
    ignore_option,
    output_option,
    output_option_with,
    path_value,
    platform_option,
    replace_option,
    seconds_between,
    target_option,
)
from aigo_apply.config.engine_kinds import DEFAULT_ENGINE, ENGINE_NAMES


@cli.command()
@click.argument("files", nargs=-1, metavar="[FILE]...")
@file_option
@output_option_with("github", help="Human text, JSON (with format_version), or GitHub Actions annotations (-o github).")
def validate(files: tuple[str, ...], file: str | None, output: str) -> int:
    """Check config files (-f FILE, FILE..., default ./aigo.yaml) against the schema and the cross-field
    rules; report every problem of each."""
    from aigo_apply.app.checking import ValidateRequest, run_validate
    from aigo_apply.cli.views import view_for

    if any(f == "" or "\x00" in f for f in files):
        raise click.BadParameter("a FILE is empty or holds a NUL character", param_hint="FILE")
    paths = tuple(dict.fromkeys([*files, *([file] if file else [])]))
    if output == "json" and len(paths) > 1:
        raise click.UsageError("-o json validates one file; run it once per file")
    return run_validate(ValidateRequest(files=paths), view_for(output))


@cli.command()
@file_option
@output_option_with(
    "markdown", help="Human text, the plan's JSON contract (format_version 1), or Markdown for a pull request comment."
)
@click.option("--detailed-exitcode", is_flag=True, help="Exit 0 with no changes, 2 with changes, 1 on error.")
@click.option("--diff", "show_diff", is_flag=True, help="Show the unified diff of the router's config files.")
@click.option(
    "--out",
    "out",
    metavar="PLANFILE",
    type=click.Path(dir_okay=False, path_type=Path),
    callback=path_value,
    help="Save the plan (with a fingerprint of what it observed) for `aigo-apply apply PLANFILE`.",
)
@replace_option
@target_option("Plan")
@ignore_option
@platform_option
@canary_options
def plan(
    file: str | None,
    output: str,
    detailed_exitcode: bool,
    show_diff: bool,
    out: Path | None,
    replace: tuple[str, ...],
    target: tuple[str, ...],
    ignore: tuple[str, ...],
    platform: str | None,
    skip_canary: bool,
    require_canary: bool,
) -> int:
    """Show what apply would change on this machine, and why."""
    from aigo_apply.app.show import PlanCommand, run_plan
    from aigo_apply.cli.views import view_for

    request = PlanCommand(
        file=file,
        show_diff=show_diff,
        out=out,
        detailed_exitcode=detailed_exitcode,
        replace=replace,
        target=target,
        ignore=ignore,
        platform=platform,
        skip_canary=skip_canary,
        require_canary=require_canary,
    )
    if skip_canary and require_canary:
        raise click.UsageError("--skip-canary and --require-canary contradict each other: pass one")
    return run_plan(request, view_for(output))


@cli.command("show")
@click.argument("planfile", metavar="PLANFILE", type=click.Path(dir_okay=False, path_type=Path), callback=path_value)
@output_option_with(
    "markdown", help="Human text, the plan's JSON contract (format_version 1), or Markdown for a pull request comment."
)
@click.option("--diff", "show_diff", is_flag=True, help="Show the router files' diff, if the plan was saved with it.")
def show_cmd(planfile: Path, output: str, show_diff: bool) -> int:
    """Print a plan saved by `plan --out` as `plan` prints it (text, -o json, -o markdown).

    The file is read as one nobody reviewed (bounded, strict JSON, its shape checked); nothing is asked
    of this machine: `aigo-apply apply PLANFILE` makes the plan again and acts only if it is this one."""
    from aigo_apply.app.show import ShowRequest, run_show
    from aigo_apply.cli.views import view_for

    return run_show(ShowRequest(planfile=planfile, show_diff=show_diff), view_for(output))


@cli.command()
@file_option
@output_option
@click.option(
    "--engine",
    type=click.Choice(list(ENGINE_NAMES)),
    default=DEFAULT_ENGINE,
    show_default=True,
    help="The engine whose image the report shows.",
)
def readiness(file: str | None, output: str, engine: str) -> int:
    """Check this host for the file's engines: Docker, GPU plumbing, NVIDIA driver, GPUs. Exit 1 if blocked."""
    from aigo_apply.app.checking import ReadinessRequest, run_readiness
    from aigo_apply.cli.views import view_for

    return run_readiness(ReadinessRequest(file=file, engine=engine), view_for(output))


@cli.command()
@file_option
@output_option
@platform_option
def status(file: str | None, output: str, platform: str | None) -> int:
    """Show each model's container state, readiness, port, image and uptime, and any drift."""
    from aigo_apply.app.show import StatusRequest, run_status
    from aigo_apply.cli.views import view_for

    return run_status(StatusRequest(file=file, platform=platform), view_for(output))


@cli.command("render")
@click.argument("alias", metavar="[ALIAS]", required=False)
@file_option
@click.option(
    "--as",
    "form",
    type=click.Choice(["docker-run", "kubernetes"]),
    default="docker-run",
    show_default=True,
    help="What to render: the `docker run` line of ALIAS, or Kubernetes objects (all, or ALIAS's) as YAML.",
)
def render_cmd(alias: str | None, file: str | None, form: str) -> int:
    """Print the exact `docker run` command for ALIAS (or `router`), or with --as kubernetes every
    Kubernetes object of the file (or ALIAS's, or the router's) for `kubectl apply --server-side -f -`;
    secrets appear as references, never values."""
    from aigo_apply.app.render import RenderRequest, run_render
    from aigo_apply.cli.views import view_for

    if form == "docker-run" and alias is None:
        raise click.UsageError("--as docker-run renders one container: name a model ALIAS, or router")
    return run_render(RenderRequest(alias=alias, file=file, form=form), view_for("text"))


@cli.command()
@click.argument("names", nargs=-1, metavar="[ALIAS|router]...")
@click.option("--follow", is_flag=True, help="Go on printing new lines, across a replace, until Ctrl-C.")
@click.option(
    "-n", "--tail", type=click.IntRange(0, 10**9), default=None, metavar="N", help="Only the last N lines of each."
)
@click.option("--since", "since", default=None, metavar="DURATION", help="Only lines of the last 30s, 10m, 1h30m...")
@click.option(
    "--failed",
    is_flag=True,
    help="The whole log apply kept of each model's newest failed start (its container is gone).",
)
@file_option
@output_option
@platform_option
def logs(
    names: tuple[str, ...],
    follow: bool,
    tail: int | None,
    since: str | None,
    failed: bool,
    file: str | None,
    output: str,
    platform: str | None,
) -> int:
    """Show what the models' engines (and the router) print, each line prefixed with its model; secrets redacted.

    -f is --file, the config file, as in every command here (not --follow, as in `docker logs -f`)."""
    from aigo_apply.app.logs import parse_since, run_logs
    from aigo_apply.cli.views import view_for
    from aigo_apply.platforms.requests import LogsRequest

    if file is not None and _a_model_not_a_file(file):
        what = "the router" if file == "router" else "a model of the config"
        raise click.UsageError(  # (an alias is letters, digits, '.', '_' and '-': nothing to escape)
            f"-f is --file here (the config file), and '{file}' is no file but {what}; "
            f"did you mean --follow? (`aigo-apply logs --follow {file}`)"
        )

    request = LogsRequest(
        names=names,
        follow=follow,
        tail=tail,
        since_s=None if since is None else parse_since(since),
        failed=failed,
        file=file,
        platform=platform,
    )
    return run_logs(request, view_for(output))


def _a_model_not_a_file(value: str) -> bool:
    """`logs -f chat` where chat is no file but a model alias of the default config (or `router`):
    `docker logs -f` and `kubectl logs -f` follow, so the -f meant --follow (asked only when -f names
    no file)."""
    from aigo_apply.config.load import choose_file
    from aigo_apply.config.names import ALIAS_RE
    from aigo_apply.config.yaml_source import load
    from aigo_apply.errors import AigoError

    if not ALIAS_RE.match(value) or os.path.lexists(value):
        return False
    if value == "router":  # a name logs takes in every project
        return True
    try:
        data = load(Path(choose_file(None))).data
        models = data.get("models") if isinstance(data, dict) else None
    except (AigoError, AttributeError):  # no default config, or not one: nothing says it is a model
        return False
    return isinstance(models, dict) and value in models


@cli.command()
@click.option("--once", is_flag=True, help="One view (of two reads --interval apart), for scripts.")
@click.option(
    "--interval",
    type=float,
    callback=seconds_between(0.5, 60),
    default=2.0,
    show_default=True,
    metavar="SECONDS",
    help="Seconds between reads (0.5 to 60).",
)
@file_option
@output_option
@platform_option
def top(once: bool, interval: float, file: str | None, output: str, platform: str | None) -> int:
    """A live view of each model: state, requests running and waiting, tokens/s, KV cache, sleep; GPU memory."""
    from aigo_apply.app.top import TopRequest, run_top
    from aigo_apply.cli.views import view_for

    return run_top(TopRequest(once=once, interval=interval, file=file, platform=platform), view_for(output))


@cli.command()
@click.argument("aliases", nargs=-1, metavar="[ALIAS]...", callback=alias_values)
@file_option
@output_option
@platform_option
def bench(aliases: tuple[str, ...], file: str | None, output: str, platform: str | None) -> int:
    """Measure each model's engine as it serves now (the canary gate's requests): tokens/s, time to first token."""
    from aigo_apply.app.bench import BenchRequest, run_bench
    from aigo_apply.cli.views import view_for

    return run_bench(BenchRequest(aliases=aliases, file=file, platform=platform), view_for(output))
