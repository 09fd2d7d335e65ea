"""The click group and what its commands share: the common options (each checked where it is read:
an empty -f, an unknown readiness check id or a --target that is no alias is a usage error, not
silently something else), the confirmation prompt, the console (human or JSON lines) and reading a
config's data."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from aigo_apply import __version__

CommandFunction = TypeVar("CommandFunction", bound=Callable[..., object])  # what an option decorates


def path_value(ctx: click.Context, param: click.Parameter, value: str | Path | None) -> str | Path | None:
    """A path option or argument as given; an empty one (`-f ''`) would otherwise mean the default
    file, or (click.Path makes '' into '.') the current folder; a NUL cannot be in any file name."""
    if value == "" or (isinstance(value, Path) and str(value) == "."):
        raise click.BadParameter("is empty; pass a file's path (or leave the option out)")
    if value is not None and "\x00" in str(value):
        raise click.BadParameter("holds a NUL character, which no file name can")
    return value


def _check_ids(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    from aigo_apply.plan.plan_file import READINESS_CHECK_IDS

    unknown = next((v for v in values if v not in READINESS_CHECK_IDS), None)
    if unknown is not None:
        raise click.BadParameter(
            f"{unknown[:200]!r} is not a readiness check id; the ids are {', '.join(READINESS_CHECK_IDS)} "
            "(`aigo-apply readiness` shows this host's checks)"
        )
    return values


def alias_values(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    """--target and --replace name models: anything that is not an alias cannot be one."""
    from aigo_apply.config.names import ALIAS_RE

    bad = next((v for v in values if not ALIAS_RE.match(v)), None)
    if bad is not None:
        raise click.BadParameter(
            f"{bad[:200]!r} is not a model alias (a letter or digit, then letters, digits, '.', '_' or '-'; at most 64)"
        )
    return values


file_option = click.option(
    "-f",
    "--file",
    "file",
    metavar="FILE",
    default=None,
    callback=path_value,
    help="Config file (default: $AIGO_FILE, else ./aigo.yaml).",
)
ignore_option = click.option(
    "--ignore-readiness",
    "ignore",
    metavar="CHECK_ID",
    multiple=True,
    callback=_check_ids,
    help="Do not let this readiness check block (the plan says so).",
)


def output_option_with(
    *extra: str, help: str = "Human text, or JSON for programs (every document and line carries format_version)."
) -> Callable[[CommandFunction], CommandFunction]:
    """-o/--output: human text, JSON (each document or line with its format_version), and the
    command's own extra formats."""
    return click.option(
        "-o", "--output", type=click.Choice(["text", "json", *extra]), default="text", show_default=True, help=help
    )


output_option = output_option_with()


def canary_options(f: CommandFunction) -> CommandFunction:
    """--skip-canary and --require-canary (plan and apply): the canary gates of the plan's replaces."""
    f = click.option(
        "--require-canary",
        is_flag=True,
        help="Refuse the plan if a replace of a running model would run no canary gate.",
    )(f)
    return click.option(
        "--skip-canary",
        is_flag=True,
        help="Run no canary gate: each replace moves its route once the new engine is ready (said so).",
    )(f)


replace_option = click.option(
    "--replace",
    "replace",
    metavar="ALIAS",
    multiple=True,
    callback=alias_values,
    help="Recreate this model even if unchanged.",
)


platform_option = click.option(
    "--platform",
    type=click.Choice(["docker", "kubernetes"]),
    default=None,
    help="Where to act: this machine's Docker or the file's Kubernetes cluster (default: the file's `platform:`, docker).",
)
force_conflicts_option = click.option(
    "--force-conflicts",
    is_flag=True,
    help="Kubernetes: take over fields another field manager owns (server-side apply's force).",
)


def target_option(verb: str) -> Callable[[CommandFunction], CommandFunction]:
    """--target ALIAS: act on this model only (`verb`: what the command does to it)."""
    return click.option(
        "--target",
        "target",
        metavar="ALIAS",
        multiple=True,
        callback=alias_values,
        help=f"{verb} only this model (repeatable).",
    )


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name="aigo-apply")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Run LLM serving engines on this workstation from one declared file: validate, plan, apply."""
    if os.environ.get("NO_COLOR"):  # https://no-color.org: colours are otherwise used on terminals only
        ctx.color = False


def _confirm() -> Callable[[str], bool] | None:
    if not sys.stdin.isatty():
        return None
    return lambda question: click.prompt(question, default="", show_default=False).strip() == "yes"


pull_option = click.option(
    "--pull",
    type=click.Choice(["missing", "always", "never"]),
    default="missing",
    show_default=True,
    help="Pull images that are missing, every image used, or none.",
)
yes_option = click.option(
    "-y", "--yes", "--auto-approve", "yes", is_flag=True, help="Do not ask for confirmation (Terraform's spelling too)."
)


def seconds_between(low: float, high: float) -> Callable[[click.Context, click.Parameter, float], float]:
    """A click callback for a float option of seconds: finite and from `low` to `high`, else a usage
    error (exit 64). click's FloatRange lets `nan` through (every comparison with NaN is false), and
    `nan` or `inf` would then wait forever or end in a traceback where the wait is used."""

    def check(ctx: click.Context, param: click.Parameter, value: float) -> float:
        if not math.isfinite(value) or not low <= value <= high:
            raise click.BadParameter(f"{value} is not a number of seconds from {low:g} to {high:g}")
        return value

    return check


_seconds = seconds_between(0, 86400)  # a finite, non-negative wait


lock_option = click.option(
    "--lock-timeout",
    type=float,
    callback=_seconds,
    default=0.0,
    show_default=True,
    metavar="SECONDS",
    help="How long to wait for another apply or destroy of this project to finish.",
)
