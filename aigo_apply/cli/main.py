"""The command line: wiring only. Each command builds its collaborators, calls the core and picks
the exit code; `main` is the one error boundary (AigoError -> message and its code, usage -> 64,
Ctrl-C -> 130, anything unexpected -> 3 with a short report)."""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import click

from aigo_apply import __version__
from aigo_apply.errors import (
    EXIT_CHANGES,
    EXIT_ERROR,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    AigoError,
    ConfigInvalid,
)

file_option = click.option(
    "-f", "--file", "file", metavar="FILE", default=None, help="Config file (default: $AIGO_FILE, else ./aigo.yaml)."
)
output_option = click.option(
    "-o",
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Human text, or the versioned JSON contract.",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name="aigo-apply")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Run LLM serving engines on this workstation from one declared file: validate, plan, apply."""
    if os.environ.get("NO_COLOR"):  # https://no-color.org: colours are otherwise used on terminals only
        ctx.color = False


@cli.command()
@file_option
@click.option("--project", metavar="NAME", help="Project name (default: derived from the current folder's name).")
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
def init(file: str | None, project: str | None, force: bool) -> int:
    """Write a starter config file (./aigo.yaml unless -f/AIGO_FILE says otherwise)."""
    from aigo_apply.config.load import choose_file, load_config
    from aigo_apply.config.starter import project_name_for, write_starter

    path = Path(choose_file(file))
    write_starter(path, project or project_name_for(Path.cwd()), force)
    load_config(str(path))  # what we write must validate; an invalid --project is reported here
    click.echo(f"wrote {path}; next: edit it, then `aigo-apply validate` and `aigo-apply plan`")
    return EXIT_OK


@cli.command()
@file_option
@output_option
def validate(file: str | None, output: str) -> int:
    """Check the config file against the schema and the cross-field rules; report every problem."""
    from aigo_apply.config.load import choose_file, load_config

    path = choose_file(file)
    try:
        config = load_config(path)
    except ConfigInvalid as exc:
        if output == "json":
            click.echo(
                json.dumps({"file": path, "valid": False, "problems": [p.__dict__ for p in exc.problems]}, indent=2)
            )
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
        click.echo(f"{path}: valid (project '{config.data['project']}', {models} model{'s' if models != 1 else ''})")
    return EXIT_OK


@cli.command()
@file_option
@output_option
@click.option("--detailed-exitcode", is_flag=True, help="Exit 0 with no changes, 2 with changes, 1 on error.")
@click.option("--diff", "show_diff", is_flag=True, help="Show the unified diff of the router's config files.")
@click.option(
    "--out",
    "out",
    metavar="PLANFILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Save the plan (with a fingerprint of what it observed) for `aigo-apply apply PLANFILE`.",
)
@click.option("--replace", "replace", metavar="ALIAS", multiple=True, help="Recreate this model even if unchanged.")
@click.option("--target", "target", metavar="ALIAS", multiple=True, help="Plan only this model (repeatable).")
@click.option(
    "--ignore-readiness",
    "ignore",
    metavar="CHECK_ID",
    multiple=True,
    help="Do not let this readiness check block (the plan says so).",
)
def plan(
    file: str | None,
    output: str,
    detailed_exitcode: bool,
    show_diff: bool,
    out: Path | None,
    replace: tuple[str, ...],
    target: tuple[str, ...],
    ignore: tuple[str, ...],
) -> int:
    """Show what apply would change on this machine, and why."""
    from aigo_apply.app.planning import make_plan
    from aigo_apply.plan import types as plan_file
    from aigo_apply.plan.text import plan_json, plan_text

    result = make_plan(file, replace, target, ignore=ignore)
    click.echo(plan_json(result) if output == "json" else plan_text(result, show_diff))
    if out is not None:
        plan_file.save(result, out)
        if output == "text":
            click.echo(
                f"\nSaved the plan to {out}; `aigo-apply apply {out}` carries it out if nothing has changed since."
            )
    if result.blockers:
        return EXIT_ERROR
    return EXIT_CHANGES if detailed_exitcode and result.has_changes else EXIT_OK


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
yes_option = click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
lock_option = click.option(
    "--lock-timeout",
    type=float,
    default=0.0,
    show_default=True,
    metavar="SECONDS",
    help="How long to wait for another apply or destroy of this project to finish.",
)


@cli.command()
@click.argument("planfile", required=False, type=click.Path(dir_okay=False, path_type=Path))
@file_option
@output_option
@yes_option
@pull_option
@lock_option
@click.option("--replace", "replace", metavar="ALIAS", multiple=True, help="Recreate this model even if unchanged.")
@click.option("--target", "target", metavar="ALIAS", multiple=True, help="Apply only this model (repeatable).")
@click.option(
    "--ignore-readiness",
    "ignore",
    metavar="CHECK_ID",
    multiple=True,
    help="Do not let this readiness check block (the plan says so).",
)
@click.option("--locked", is_flag=True, help="Install exactly the model commits and images aigo.lock records.")
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
) -> int:
    """Converge this machine to the file (or to a saved PLANFILE): pull, start, create, recreate, remove.
    A successful apply writes aigo.lock next to the file."""
    from aigo_apply.app.apply import ApplyOptions, run_apply

    if locked and planfile:
        raise click.UsageError("--locked applies the file; a saved plan already says what it installs")
    return run_apply(
        ApplyOptions(file, planfile, yes, pull, output, lock_timeout, replace, target, _confirm(), ignore, locked)
    )


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
    from aigo_apply.desired.images import image_object
    from aigo_apply.plan.gpu_ledger import render as ledger_lines

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
        click.echo(
            f"image: {image_info['imageReference'] or f'(no tag: set engines.{engine}.image_tag)'}"
            + (" (tag overridden)" if image_info["tagOverridden"] else "")
        )
        for check in checks:
            click.echo(f"  {marks[check.status]:<8} {check.id}: {check.message}")
            if check.remediation and check.status != "ok":
                click.echo(f"           fix: {check.remediation}")
        for line in ledger_lines(ledger):
            click.echo("  " + line)
    return EXIT_ERROR if report["blocked"] else EXIT_OK


@cli.command()
@file_option
@output_option
@yes_option
@lock_option
@click.option("--project", metavar="NAME", help="Destroy this project without reading a config file.")
def destroy(file: str | None, output: str, yes: bool, lock_timeout: float, project: str | None) -> int:
    """Remove every container of the project (never anything else)."""
    from aigo_apply.app.apply import ApplyOptions, run_destroy

    return run_destroy(ApplyOptions(file, None, yes, "never", output, lock_timeout, confirm=_confirm()), project)


@cli.command()
@file_option
@output_option
def status(file: str | None, output: str) -> int:
    """Show each model's container state, readiness, port, image and uptime, and any drift."""
    from aigo_apply.app import status as model_status
    from aigo_apply.app.planning import load_desired, observe

    desired = load_desired(file)
    report = model_status.collect(desired, observe(desired.project))
    click.echo(json.dumps(report, indent=2) if output == "json" else model_status.render(report))
    return EXIT_OK


@cli.command()
@file_option
def watch(file: str | None) -> int:
    """Follow Docker events: remove a dead engine's route at once, re-add it once it is ready again."""
    from aigo_apply.adapters.docker_engine import DockerRuntime
    from aigo_apply.app.apply import router_for
    from aigo_apply.app.planning import load_desired, observe
    from aigo_apply.app.watch import Watcher
    from aigo_apply.desired.build import route_of
    from aigo_apply.errors import AigoError
    from aigo_apply.plan.types import Plan

    desired = load_desired(file)
    runtime = DockerRuntime(timeout=None)
    observed = observe(desired.project, runtime)
    router = router_for(Plan(desired.project, desired.file, "", ()), observed, runtime)
    if router is None:
        raise AigoError(f"project '{desired.project}' has no router yet; run `aigo-apply apply` first")
    routes = {alias: route_of(m) for alias, m in desired.models.items()}
    watcher = Watcher(runtime, router, desired.project, routes, lambda line: click.echo(line, err=False))
    watcher.install_signals()
    watcher.run()
    click.echo("watch stopped")
    return EXIT_OK


@cli.command("render")
@click.argument("alias", metavar="ALIAS")
@file_option
@click.option(
    "--as", "form", type=click.Choice(["docker-run"]), default="docker-run", show_default=True, help="What to render."
)
def render_cmd(alias: str, file: str | None, form: str) -> int:
    """Print the exact `docker run` command for ALIAS (or `router`); secrets appear as references."""
    from aigo_apply.app.planning import load_desired
    from aigo_apply.desired.docker_run import docker_run
    from aigo_apply.errors import UsageProblem

    desired = load_desired(file)
    if alias == "router":
        container = desired.router.container
    elif alias in desired.models:
        container = desired.models[alias].container
    else:
        raise UsageProblem(f"no model '{alias}' in {desired.file}; models: {', '.join(desired.models) or 'none'}")
    click.echo(docker_run(container))
    return EXIT_OK


@cli.command("export")
@click.argument("alias", metavar="ALIAS")
@file_option
@click.option(
    "-o",
    "--out",
    "out",
    metavar="NAME.baimodel",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write here instead of printing.",
)
def export_cmd(alias: str, file: str | None, out: Path | None) -> int:
    """Write ALIAS as a portable model definition, without this machine's settings."""
    from aigo_apply.app.portable import export_model
    from aigo_apply.config.load import choose_file

    text = export_model(choose_file(file), alias)
    if out is None:
        click.echo(text, nl=False)
    else:
        out.write_text(text, encoding="utf-8")
        click.echo(f"wrote {out}")
    return EXIT_OK


@cli.command("import")
@click.argument("definition", metavar="NAME.baimodel")
@file_option
@click.option("--as", "alias", metavar="ALIAS", help="Use another alias than the definition's.")
@click.option("--write", is_flag=True, help="Add the entry to the config file (which must still validate).")
def import_cmd(definition: str, file: str | None, alias: str | None, write: bool) -> int:
    """Print the models: entry for a portable definition, or add it to the file with --write."""
    from aigo_apply.app.portable import add_to_file, entry_text, read_definition
    from aigo_apply.config.load import choose_file

    name, model = read_definition(definition, alias)
    if not write:
        click.echo("models:\n" + entry_text(name, model), nl=False)
        return EXIT_OK
    target = choose_file(file)
    add_to_file(target, name, model)
    click.echo(f"added model '{name}' to {target}; run `aigo-apply plan` to see what it does here")
    return EXIT_OK


@cli.group()
def image() -> None:
    """The image of an engine (vllm, sglang, llama.cpp) or of the router: what the file resolves to, what is local."""


@image.command("inspect")
@click.argument("engine", metavar="ENGINE")
@file_option
@output_option
def image_inspect(engine: str, file: str | None, output: str) -> int:
    """Show imageReference, defaultTag, tagOverridden, and the local id and digest."""
    from aigo_apply.adapters.docker_engine import DockerRuntime
    from aigo_apply.desired import images

    info = images.image_object(load_config_data(file), engine)
    reference = info["imageReference"]
    info = images.with_local(info, DockerRuntime().inspect_image(reference) if reference else None)
    click.echo(json.dumps(info, indent=2) if output == "json" else images.render(info))
    return EXIT_OK


@image.command("pull")
@click.argument("engine", metavar="ENGINE")
@file_option
@output_option
def image_pull(engine: str, file: str | None, output: str) -> int:
    """Pull the configured image of ENGINE now, with progress."""
    from aigo_apply.adapters.docker_engine import DockerRuntime
    from aigo_apply.apply.executor import pull_image
    from aigo_apply.cli.reporter import JsonReporter, TextReporter
    from aigo_apply.desired import images

    reference = images.image_object(load_config_data(file), engine)["imageReference"]
    if reference is None:
        raise AigoError(f"{engine} has no built-in image tag; set engines.{engine}.image_tag in the file first")
    pull_image(DockerRuntime(), JsonReporter() if output == "json" else TextReporter(), reference)
    return EXIT_OK


@cli.group()
def models() -> None:
    """The model store on this host: download ahead of time, list what is stored."""


@models.command("pull")
@click.argument("aliases", metavar="[ALIAS]...", nargs=-1)
@file_option
@output_option
def models_pull(aliases: tuple[str, ...], file: str | None, output: str) -> int:
    """Download the files of the named models (default: all) from Hugging Face, resumably."""
    from aigo_apply.app.models import pull
    from aigo_apply.app.planning import load_desired
    from aigo_apply.cli.reporter import JsonReporter, TextReporter

    pull(load_desired(file), aliases, JsonReporter() if output == "json" else TextReporter())
    return EXIT_OK


@models.command("list")
@file_option
@output_option
def models_list(file: str | None, output: str) -> int:
    """List the downloaded models (repo, revision, commit, size, which models use them)."""
    from aigo_apply.app.models import listing, render
    from aigo_apply.app.planning import load_desired

    desired = load_desired(file)
    rows = listing(desired, desired.models_dir)
    click.echo(json.dumps(rows, indent=2) if output == "json" else render(rows))
    return EXIT_OK


def load_config_data(file: str | None) -> dict:
    from aigo_apply.config.load import choose_file, load_config

    return load_config(choose_file(file)).data


def main(argv: list[str] | None = None) -> None:
    try:
        code = cli.main(args=argv, prog_name="aigo-apply", standalone_mode=False)
    except click.exceptions.UsageError as exc:
        exc.show()
        code = EXIT_USAGE
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("\ninterrupted", err=True)
        code = EXIT_INTERRUPTED
    except click.ClickException as exc:
        exc.show()
        code = EXIT_ERROR
    except AigoError as exc:
        for line in exc.lines():
            click.echo(line, err=True)
        code = exc.exit_code
    except Exception:
        click.echo(
            "internal error in aigo-apply " + __version__ + " (a bug; please report it with this output):", err=True
        )
        click.echo(traceback.format_exc(limit=-8), err=True)
        code = EXIT_INTERNAL
    sys.exit(code if isinstance(code, int) else EXIT_OK)


def entry() -> None:
    """The console script: `main`, then leave without the interpreter's teardown. Freeing every
    module and object at exit costs 0.1-0.2 s, a visible share of a no-op apply; by then every
    file we wrote is closed (context managers), the lock is released and worker threads are done,
    so only the standard streams need flushing. In-process callers (tests) use `main`."""
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`| head`) must not turn into an error
            pass
    os._exit(code)
