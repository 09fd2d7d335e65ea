"""Commands that read and report, and never change the machine: validate, plan, readiness,
status, render. `plan --out` writes only its plan file, the safe way (plan/types.save). What they print
goes through cli/reporter.echo: secrets redacted, nothing a terminal would act on."""

from __future__ import annotations

import json
from pathlib import Path

import click

from aigo_apply.cli.ci_output import command
from aigo_apply.cli.group import (
    cli,
    file_option,
    ignore_option,
    load_config_data,
    output_option,
    output_option_with,
    path_value,
    platform_option,
    replace_option,
    target_option,
)
from aigo_apply.config.annotations import file_error_line, problem_lines
from aigo_apply.errors import (
    EXIT_CHANGES,
    EXIT_ERROR,
    EXIT_OK,
    ConfigFileError,
    ConfigInvalid,
    PlanFileError,
    UsageProblem,
    shown_path,
)


@cli.command()
@click.argument("files", nargs=-1, metavar="[FILE]...")
@file_option
@output_option_with(
    "github", help="Human text, the versioned JSON contract, or GitHub Actions annotations (-o github)."
)
def validate(files: tuple[str, ...], file: str | None, output: str) -> int:
    """Check config files (-f FILE, FILE..., default ./aigo.yaml) against the schema and the cross-field
    rules; report every problem of each."""
    from aigo_apply.config.load import choose_file

    if any(f == "" or "\x00" in f for f in files):
        raise click.BadParameter("a FILE is empty or holds a NUL character", param_hint="FILE")
    paths = list(dict.fromkeys([*files, *([file] if file else [])])) or [choose_file(None)]
    if output == "json" and len(paths) > 1:
        raise click.UsageError("-o json validates one file; run it once per file")
    status = EXIT_OK
    for path in paths:
        try:
            status = max(status, _validate_one(path, output))
        except ConfigFileError as exc:
            if output != "github" and len(paths) == 1:
                raise
            if output == "github":
                command(file_error_line(exc))
            else:
                click.echo(f"error: {exc}", err=True)
            status = EXIT_ERROR
        except ConfigInvalid as exc:  # text, several files: say it and go on to the next file
            if len(paths) == 1:
                raise
            for line in exc.lines():
                click.echo(line, err=True)
            status = EXIT_ERROR
    return status


def _validate_one(path: str, output: str) -> int:
    from aigo_apply.config.load import load_config

    try:
        config = load_config(path)
    except ConfigInvalid as exc:
        if output == "json":
            click.echo(
                json.dumps({"file": path, "valid": False, "problems": [p.__dict__ for p in exc.problems]}, indent=2)
            )
            return EXIT_ERROR
        if output == "github":
            for line in problem_lines(path, exc.problems):
                command(line)  # an annotation: the one output line that is a workflow command
            return EXIT_ERROR
        raise
    models = len(config.data.get("models", {}))
    if output == "json":
        click.echo(
            json.dumps(
                {"file": path, "valid": True, "problems": [], "project": config.data["project"], "models": models},
                indent=2,
            )
        )
    else:
        shown = shown_path(path) if path.isprintable() else repr(path)  # (plan.text.shown's rule: validate is quick)
        click.echo(f"{shown}: valid (project '{config.data['project']}', {models} model{'s' if models != 1 else ''})")
    return EXIT_OK


@cli.command()
@file_option
@output_option_with("markdown", help="Human text, the versioned JSON contract, or Markdown for a pull request comment.")
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
) -> int:
    """Show what apply would change on this machine, and why."""
    from aigo_apply.app.choose_platform import open_platform
    from aigo_apply.app.planning import make_plan
    from aigo_apply.cli.reporter import echo
    from aigo_apply.plan import types as plan_file
    from aigo_apply.plan.facts import PlanRequest
    from aigo_apply.plan.text import plan_json, plan_text, shown

    request = PlanRequest(frozenset(replace), frozenset(target), frozenset(ignore))
    where = open_platform(file, platform, plans=True)
    if out is not None and where.name == "kubernetes":
        raise UsageProblem("--out: a saved plan is for Docker only for now (nothing was saved)")
    result = make_plan(where, request)
    if output == "markdown":
        from aigo_apply.plan.markdown import plan_markdown

        echo(plan_markdown(result).rstrip("\n"), colours=False)
    else:
        echo(plan_json(result) if output == "json" else plan_text(result, show_diff))
    if out is not None:
        if not result.config_file.isprintable():  # apply PLANFILE would refuse the plan: say so now
            raise PlanFileError(
                f"the config file's name {shown(result.config_file)} holds characters a saved plan refuses; "
                "rename the file to save a plan for it (nothing was saved)"
            )
        plan_file.save(result, out)
        if output == "text":
            echo(
                f"\nSaved the plan to {shown(out)}; `aigo-apply apply {shown(out)}` carries it out if nothing has "
                "changed since."
            )
    if result.blockers:
        return EXIT_ERROR
    return EXIT_CHANGES if detailed_exitcode and result.has_changes else EXIT_OK


@cli.command()
@file_option
@output_option
@click.option(
    "--engine",
    type=click.Choice(["vllm", "sglang", "llama.cpp"]),
    default="vllm",
    show_default=True,
    help="The engine whose image the report shows.",
)
def readiness(file: str | None, output: str, engine: str) -> int:
    """Check this host for the file's engines: Docker, GPU plumbing, NVIDIA driver, GPUs. Exit 1 if blocked."""
    from aigo_apply.adapters.docker_engine import DockerRuntime
    from aigo_apply.app.planning import host_checks, load_desired
    from aigo_apply.cli.reporter import echo
    from aigo_apply.desired.images import image_object
    from aigo_apply.plan.gpu_ledger import render as ledger_lines
    from aigo_apply.plan.text import printable

    desired = load_desired(file)
    checks, ledger = host_checks(desired, DockerRuntime())
    image_info = desired.vllm_image if engine == "vllm" else image_object(load_config_data(file), engine)
    report = {
        "project": desired.project,
        "image": image_info,
        "checks": [c.to_dict() for c in checks],
        "gpu_ledger": ledger,
        "blocked": any(c.status == "blocking" for c in checks),
    }
    if output == "json":
        click.echo(json.dumps(report, indent=2))
    else:
        marks = {
            "ok": click.style("ok", fg="green"),
            "warning": click.style("warning", fg="yellow"),
            "blocking": click.style("blocking", fg="red", bold=True),
        }
        echo(
            f"image: {image_info['imageReference'] or f'(no tag: set engines.{engine}.image_tag)'}"
            + (" (tag overridden)" if image_info["tagOverridden"] else "")
        )
        for check in checks:
            echo(f"  {marks[check.status]:<8} {check.id}: {printable(check.message, keep='')}")
            if check.remediation and check.status != "ok":
                echo(f"           fix: {printable(check.remediation, keep='')}")
        for line in ledger_lines(ledger):
            echo("  " + printable(line, keep=""))
    return EXIT_ERROR if report["blocked"] else EXIT_OK


@cli.command()
@file_option
@output_option
@platform_option
def status(file: str | None, output: str, platform: str | None) -> int:
    """Show each model's container state, readiness, port, image and uptime, and any drift."""
    from aigo_apply.app.choose_platform import open_platform
    from aigo_apply.cli.reporter import echo

    where = open_platform(file, platform)
    report = where.status()
    echo(json.dumps(report, indent=2) if output == "json" else where.status_text(report), colours=False)
    return EXIT_OK


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
    from aigo_apply.cli.reporter import echo

    if form == "kubernetes":
        from aigo_apply.app.host_context import current_host
        from aigo_apply.config.kube_rules import placement_problems
        from aigo_apply.config.load import choose_file, load_config
        from aigo_apply.desired.build import build_desired
        from aigo_apply.kube.manifests import selected
        from aigo_apply.kube.render_yaml import to_yaml
        from aigo_apply.kube.settings import settings_of

        config = load_config(choose_file(file))
        unplaceable = placement_problems(config.file, config.data, config.marks)  # a docker file's too
        if unplaceable:
            raise ConfigInvalid(config.file, unplaceable)
        objects = selected(build_desired(config, current_host()), settings_of(config.data), alias)
        echo(to_yaml(objects).rstrip("\n"), colours=False)
        return EXIT_OK
    if alias is None:
        raise click.UsageError("--as docker-run renders one container: name a model ALIAS, or router")
    from aigo_apply.app.planning import load_desired
    from aigo_apply.desired.docker_run import docker_run
    from aigo_apply.errors import UsageProblem
    from aigo_apply.plan.text import shown

    desired = load_desired(file, "docker")  # what the container would be on Docker, whatever the file's platform
    if alias == "router":
        container = desired.router.container
    elif alias in desired.models:
        container = desired.models[alias].container
    else:
        raise UsageProblem(
            f"no model {alias[:200]!r} in {shown(desired.file)}; models: {', '.join(desired.models) or 'none'}"
        )
    if alias != "router":  # what the plan's model.path blocker refuses (a split part that is a symlink...)
        from aigo_apply.errors import AigoError
        from aigo_apply.observe.local_sources import local_source_problems

        problems = local_source_problems({alias: desired.models[alias].spec}).get(alias)
        if problems:
            raise AigoError(
                f"{shown(desired.file)}: models.{alias}: "
                + "; ".join(problems)
                + "; apply would refuse to mount it, so there is no docker run line to show: point source.path "
                "at the model's own folder or .gguf file (every part of a split file a regular file)"
            )
    echo(docker_run(container), colours=False)
    return EXIT_OK
