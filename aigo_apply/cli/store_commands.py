"""The `image` and `models` groups: what images an engine resolves to and pulls, and the model store."""

from __future__ import annotations

import json

import click

from aigo_apply.cli.group import (
    _console,
    cli,
    file_option,
    load_config_data,
    output_option,
)
from aigo_apply.errors import EXIT_OK, AigoError


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
    from aigo_apply.apply.fetch_steps import pull_image
    from aigo_apply.desired import images

    reference = images.image_object(load_config_data(file), engine)["imageReference"]
    if reference is None:
        raise AigoError(f"{engine} has no built-in image tag; set engines.{engine}.image_tag in the file first")
    pull_image(DockerRuntime(), _console(output), reference)
    return EXIT_OK


@image.command("tag")
@click.argument("engine", metavar="ENGINE")
@click.argument("tag", metavar="[TAG]", required=False)
@click.option("--reset", is_flag=True, help="Remove the override: use the built-in tag again.")
@file_option
def image_tag(engine: str, tag: str | None, reset: bool, file: str | None) -> int:
    """Set ENGINE's image_tag to TAG in the file, or remove it with --reset (comments and layout kept)."""
    from aigo_apply.app.image_tag import set_tag
    from aigo_apply.config.load import choose_file

    if (tag is None) == (not reset):
        raise click.UsageError("give either TAG or --reset", click.get_current_context())
    target = choose_file(file)
    click.echo(set_tag(target, engine, None if reset else tag).describe(target))
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

    pull(load_desired(file), aliases, _console(output))
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
