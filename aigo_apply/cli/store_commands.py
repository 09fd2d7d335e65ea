"""The `image` and `models` groups: what images an engine resolves to and pulls, and the model store.
Each parses its options into a request (platforms/requests.py) and runs its use case (app/store.py) with
the view of its -o/--output (cli/views.py)."""

from __future__ import annotations

import click

from aigo_apply.cli.group import cli, file_option, output_option
from aigo_apply.errors import EXIT_OK, shown_path


@cli.group()
def image() -> None:
    """The image of an engine (vllm, sglang, llama.cpp) or of the router: what the file resolves to, what is local."""


@image.command("inspect")
@click.argument("engine", metavar="ENGINE")
@file_option
@output_option
def image_inspect(engine: str, file: str | None, output: str) -> int:
    """Show image_reference, default_tag, tag_overridden, and the local id and digest."""
    from aigo_apply.app.store import ImageRequest, run_image_inspect
    from aigo_apply.cli.views import view_for

    return run_image_inspect(ImageRequest(engine=engine, file=file), view_for(output))


@image.command("pull")
@click.argument("engine", metavar="ENGINE")
@file_option
@output_option
def image_pull(engine: str, file: str | None, output: str) -> int:
    """Pull the configured image of ENGINE now, with progress."""
    from aigo_apply.app.store import ImageRequest, run_image_pull
    from aigo_apply.cli.views import view_for

    return run_image_pull(ImageRequest(engine=engine, file=file), view_for(output))


@image.command("tag")
@click.argument("engine", metavar="ENGINE")
@click.argument("tag", metavar="[TAG]", required=False)
@click.option("--reset", is_flag=True, help="Remove the override: use the built-in tag again.")
@file_option
def image_tag(engine: str, tag: str | None, reset: bool, file: str | None) -> int:
    """Set ENGINE's image_tag to TAG in the file, or remove it with --reset (comments and layout kept)."""
    from aigo_apply.config.load import choose_file
    from aigo_apply.edit.image_tag import set_tag

    if (tag is None) == (not reset):
        raise click.UsageError("give either TAG or --reset", click.get_current_context())
    target = choose_file(file)
    click.echo(set_tag(target, engine, None if reset else tag).describe(shown_path(target)))
    return EXIT_OK


@cli.group()
def models() -> None:
    """The model store on this host: download ahead of time, list what is stored."""


@models.command("pull")
@click.argument("aliases", metavar="[ALIAS]...", nargs=-1)
@file_option
@output_option
def models_pull(aliases: tuple[str, ...], file: str | None, output: str) -> int:
    """Download the files of the named models (default: all) and their repo LoRA adapters, resumably."""
    from aigo_apply.app.store import ModelsRequest, run_models_pull
    from aigo_apply.cli.views import view_for

    return run_models_pull(ModelsRequest(file=file, aliases=aliases), view_for(output))


@models.command("list")
@file_option
@output_option
def models_list(file: str | None, output: str) -> int:
    """List the downloaded models (repo, revision, commit, size, which models use them)."""
    from aigo_apply.app.store import ModelsRequest, run_models_list
    from aigo_apply.cli.views import view_for

    return run_models_list(ModelsRequest(file=file), view_for(output))
