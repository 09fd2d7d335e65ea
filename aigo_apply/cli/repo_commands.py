"""Commands for config repositories and the tools around them: `fmt` (the canonical layout, or
`--check` with a diff, for pre-commit and CI), `schema` (print the JSON Schema, or `--write` a copy
beside the config that a relative `$schema=` reference can name on every machine) and `completion`
(the shell's completion script, click's own). The work is in edit/fmt.py and edit/starter.py; this is
wiring."""

from __future__ import annotations

from pathlib import Path

import click
from click.shell_completion import get_completion_class

from aigo_apply.cli.group import cli, file_option
from aigo_apply.errors import EXIT_ERROR, EXIT_OK, AigoError, shown_path


def _paths(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    for value in values:
        if value == "":
            raise click.BadParameter("a FILE is empty; pass a file's path")
        if "\x00" in value:
            raise click.BadParameter("a FILE holds a NUL character, which no file name can")
    return tuple(dict.fromkeys(values))  # each file once, in the order given


@cli.command("fmt")
@click.argument("files", nargs=-1, metavar="[FILE]...", callback=_paths)
@click.option("--check", is_flag=True, help="Change nothing; print a diff and exit 1 if a file is not formatted.")
def fmt_cmd(files: tuple[str, ...], check: bool) -> int:
    """Rewrite config files into the canonical layout (default: $AIGO_FILE, else ./aigo.yaml).

    Key order of the configuration reference (docs/configuration.md), two-space indent, comments kept, quotes where YAML would read
    another value. A file that does not validate is refused and left as it is."""
    from aigo_apply.cli.reporter import echo
    from aigo_apply.config.load import choose_file
    from aigo_apply.edit.fmt import format_file
    from aigo_apply.plan.text import shown

    status = EXIT_OK
    for file in files or (choose_file(None),):
        try:
            result = format_file(file, write=not check)
        except AigoError as exc:
            for line in exc.lines():
                echo(line, err=True, colours=False)
            status = EXIT_ERROR
            continue
        if not result.changed:
            continue
        if check:
            echo(result.diff().rstrip("\n"), colours=False)
            line = f"{shown_path(shown(file))}: not formatted; `aigo-apply fmt {shown(file)}` rewrites it"
            echo(line, err=True, colours=False)
            status = EXIT_ERROR
        else:
            echo(f"formatted {shown(file)}", colours=False)
    return status


@cli.command("schema")
@file_option
@click.option("--write", is_flag=True, help="Copy the schema beside the config file as aigo.schema.json.")
def schema_cmd(file: str | None, write: bool) -> int:
    """Print the config's JSON Schema, or write it beside the config for editors (`--write`)."""
    from aigo_apply import safe_read
    from aigo_apply.cli.ci_output import machine
    from aigo_apply.cli.reporter import echo
    from aigo_apply.config.load import choose_file
    from aigo_apply.edit.starter import SCHEMA_COPY, modeline, schema_text, write_schema_copy
    from aigo_apply.plan.text import shown

    if not write:
        click.echo(machine(schema_text(), "JSON Schema"), nl=False)
        return EXIT_OK
    config = Path(choose_file(file)).expanduser()
    folder = config.parent
    if not folder.is_dir():
        raise AigoError(f"{shown(folder)}: no such folder for {shown(config)}; create it or choose another -f FILE")
    target, changed = write_schema_copy(folder)
    echo(f"{'wrote' if changed else 'up to date:'} {shown(target)}", colours=False)
    line = modeline(SCHEMA_COPY)
    try:  # the one bounded reader: a regular file only (opening a FIFO there would wait for a writer)
        raw = safe_read.read(config, safe_read.CONFIG, missing_ok=True) or b""
        first = raw.decode("utf-8").lstrip("\ufeff").split("\n", 1)[0].rstrip("\r")
    except (AigoError, UnicodeDecodeError):
        first = ""
    if first != line:
        echo(f"make this the first line of {shown(config)} (commit both files):\n{line}", colours=False)
    return EXIT_OK


SHELLS = ("bash", "zsh", "fish")
COMPLETE_VAR = "_AIGO_APPLY_COMPLETE"  # click's name for it: `_{PROG_NAME}_COMPLETE`; cli/main.py reads it too


@cli.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
def completion_cmd(shell: str) -> int:
    """Print the completion script of SHELL (bash, zsh or fish), click's own.

    \b
    bash: eval "$(aigo-apply completion bash)"     (in ~/.bashrc)
    zsh:  eval "$(aigo-apply completion zsh)"      (in ~/.zshrc)
    fish: aigo-apply completion fish > ~/.config/fish/completions/aigo-apply.fish"""
    script_class = get_completion_class(shell)
    assert script_class is not None  # every name in SHELLS is one of click's
    click.echo(script_class(cli, {}, "aigo-apply", COMPLETE_VAR).source())
    return EXIT_OK
