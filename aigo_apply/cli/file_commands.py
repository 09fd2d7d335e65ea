"""Commands that write files: init (a starter aigo.yaml), export and import (portable `.baimodel`
definitions)."""

from __future__ import annotations

from pathlib import Path

import click

from aigo_apply.cli.ci_output import machine
from aigo_apply.cli.group import (
    cli,
    file_option,
    path_value,
)
from aigo_apply.errors import EXIT_OK


@cli.command()
@file_option
@click.option("--project", metavar="NAME", help="Project name (default: derived from the current folder's name).")
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
def init(file: str | None, project: str | None, force: bool) -> int:
    """Write a starter config file (./aigo.yaml unless -f/AIGO_FILE says otherwise)."""
    from aigo_apply.config.load import choose_file
    from aigo_apply.edit.starter import project_name_for, write_starter
    from aigo_apply.observe.config_file import load_config
    from aigo_apply.plan.text import printable

    path = Path(choose_file(file))
    write_starter(path, project or project_name_for(Path.cwd()), force)
    load_config(str(path))  # what we write must validate; an invalid --project is reported here
    click.echo(printable(f"wrote {path}; next: edit it, then `aigo-apply validate` and `aigo-apply plan`", keep=""))
    return EXIT_OK


def _no_short_out(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """`export -o FILE` wrote a file while `-o` is the output format of every other command (so
    `export -o json` wrote a file named json): refused, with the option that writes a file."""
    if value is not None:
        raise click.UsageError(
            "-o is the output format in every other command, so export no longer takes it for its file: "
            "write the definition with --out NAME.baimodel (without it, export prints the definition)"
        )


@cli.command("export")
@click.argument("alias", metavar="ALIAS")
@file_option
@click.option(
    "--out",
    "out",
    metavar="NAME.baimodel",
    type=click.Path(dir_okay=False, path_type=Path),
    callback=path_value,
    help="Write here instead of printing.",
)
@click.option("-o", "old_out", metavar="FILE", hidden=True, expose_value=False, callback=_no_short_out)
def export_cmd(alias: str, file: str | None, out: Path | None) -> int:
    """Write ALIAS as a portable model definition, without this machine's settings."""
    from aigo_apply import safe_write
    from aigo_apply.config.load import choose_file
    from aigo_apply.edit.portable import export_model
    from aigo_apply.plan.text import printable

    text, warnings = export_model(choose_file(file), alias)
    for warning in warnings:
        click.echo(printable(f"warning: {warning}", keep=""), err=True)
    if out is None:
        click.echo(machine(text, "model definition (YAML)"), nl=False)
    else:  # never through a symlink, into a FIFO or a device
        safe_write.write(out, text, expect=safe_write.ANY, new_mode=0o644, what="definition")
        click.echo(printable(f"wrote {out}", keep=""))  # one line, whatever the file is called
    return EXIT_OK


@cli.command("import")
@click.argument("definition", metavar="NAME.baimodel")
@file_option
@click.option("--as", "alias", metavar="ALIAS", help="Use another alias than the definition's.")
@click.option("--write", is_flag=True, help="Add the entry to the config file (which must still validate).")
def import_cmd(definition: str, file: str | None, alias: str | None, write: bool) -> int:
    """Print the models: entry for a portable definition, or add it to the file with --write."""
    from aigo_apply.config.load import choose_file
    from aigo_apply.edit.portable import add_to_file, entry_text, read_definition
    from aigo_apply.plan.text import printable

    target = choose_file(file)
    name, model, notes = read_definition(definition, alias, target)  # checked as the config checks a model
    for note in notes:
        click.echo(printable(f"note: {note}", keep=""), err=True)
    if not write:
        click.echo(machine("models:\n" + entry_text(name, model), "YAML entry"), nl=False)  # escaped in YAML
        return EXIT_OK
    add_to_file(target, name, model)
    click.echo(printable(f"added model '{name}' to {target}; run `aigo-apply plan` to see what it does here", keep=""))
    return EXIT_OK
