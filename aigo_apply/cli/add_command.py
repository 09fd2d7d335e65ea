"""`aigo-apply add SOURCE`: the models: entry a model's own files call for, added to the config file
(app/add_model.py), or printed with --dry-run; -o json gives the entry, the reasons and the notes as
one JSON object."""

from __future__ import annotations

import click

from aigo_apply.cli.group import cli, file_option, output_option_with, path_value
from aigo_apply.errors import EXIT_ERROR, EXIT_OK


def _alias(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    from aigo_apply.config.names import ALIAS_RE

    if value is not None and not ALIAS_RE.match(value):
        raise click.BadParameter(
            f"{value[:200]!r} is not a model alias (a letter or digit, then letters, digits, '.', '_' or '-'; at most 64)"
        )
    return value


@cli.command("add")
@click.argument("source", metavar="SOURCE", callback=path_value)
@file_option
@click.option(
    "--alias", metavar="NAME", callback=_alias, help="The model's alias (default: the repo's or folder's name)."
)
@click.option("--dry-run", is_flag=True, help="Print the entry instead of adding it to the file.")
@output_option_with(help="Human text, or the entry with its reasons and notes as JSON.")
def add_cmd(source: str, file: str | None, alias: str | None, dry_run: bool, output: str) -> int:
    """Add a model from its own files: SOURCE is ORG/NAME[@REVISION] on the Hub or a local folder.

    Reads config.json, the chat template and generation_config.json (never the weights), and proposes
    the tool-call and reasoning parsers, a context length and a memory fraction that fit this
    machine's GPUs beside the file's models, each with a comment saying why."""
    from aigo_apply.app.add_model import AddRequest, add_model
    from aigo_apply.cli.views import view_for
    from aigo_apply.config.load import choose_file

    added = add_model(AddRequest(source=source, config_file=choose_file(file), alias=alias, write=not dry_run))
    view_for(output).added(added.to_dict(), added.text)
    return EXIT_OK if added.proposal.placed else EXIT_ERROR
