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
    from aigo_apply.config.load import choose_file
    from aigo_apply.config.machine_text import json_text
    from aigo_apply.plan.text import printable

    target = choose_file(file)
    added = add_model(AddRequest(source=source, config_file=target, alias=alias, write=not dry_run))
    proposal = added.proposal
    code = EXIT_OK if proposal.placed else EXIT_ERROR
    if output == "json":
        document = {
            "alias": proposal.alias,
            "file": added.file,
            "source": added.source,
            "written": added.written,
            "fits": proposal.placed,
            "vllm_release": added.release,
            "files_read": list(added.read),
            "entry": proposal.entry,
            "why": proposal.why,
            "notes": list(proposal.notes),
        }
        click.echo(json_text(document, indent=2))
        return code
    for note in proposal.notes:
        click.echo(printable(f"note: {note}", keep=""), err=True)
    click.echo("models:\n" + added.text, nl=False)  # YAML: its values and comments escape in its own grammar
    if added.written:
        click.echo(printable(f"added model '{proposal.alias}' to {target}; run `aigo-apply plan` to see it", keep=""))
    return code
