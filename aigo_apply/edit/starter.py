"""`aigo-apply init`: writes a starter aigo.yaml from templates/aigo.yaml.j2 (Jinja2, strict
undefined) and checks that what it wrote validates; and `aigo-apply schema --write`'s copy of the
JSON Schema.

The file's first line tells editors (yaml-language-server) where the schema is. The reference must
work wherever the file is committed and checked out: the schema's published URL when its `$id` is
one (it carries the format version), else a path relative to the config, `aigo.schema.json`, next to
the file, which init (and `aigo-apply schema --write`) puts there. Never the absolute path of this
installation, which no other machine has."""

from __future__ import annotations

import os
import re
from pathlib import Path

from aigo_apply import safe_read, safe_write
from aigo_apply.config.schema import schema
from aigo_apply.errors import AigoError, UsageProblem
from aigo_apply.observe.config_file import load_config
from aigo_apply.resources import data_dir

SCHEMA_COPY = "aigo.schema.json"  # beside the config; the reference is relative to the config's folder
SCHEMA_MODES = ("auto", "url", "local")


def project_name_for(directory: Path) -> str:
    """A valid project name derived from a folder name ('My Models' -> 'my-models')."""
    name = re.sub(r"[^a-z0-9_-]+", "-", directory.name.lower()).strip("-_")[:32]
    return name or "workstation"


def published_url() -> str | None:
    """The schema's `$id` when it is an https URL (its published, versioned address), else None."""
    ident = schema().get("$id")
    return ident if isinstance(ident, str) and re.fullmatch(r"https://[!-~]+", ident) else None


def schema_reference(mode: str = "auto") -> str:
    """What `$schema=` names: `url` the published schema, `local` the copy beside the config, `auto`
    the first that exists."""
    if mode not in SCHEMA_MODES:
        raise UsageProblem(f"unknown schema reference {mode!r}; use one of {', '.join(SCHEMA_MODES)}")
    url = published_url()
    if mode == "url" and url is None:
        raise UsageProblem(
            "this aigo-apply's schema has no published URL; use the copy beside the file (`aigo-apply schema --write`)"
        )
    return url if url is not None and mode != "local" else SCHEMA_COPY


def modeline(reference: str) -> str:
    return f"# yaml-language-server: $schema={reference}"


def render_starter(project: str, reference: str | None = None) -> str:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    return env.get_template("aigo.yaml.j2").render(
        project=project, alias="qwen3-8b", repo="Qwen/Qwen3-8B", schema_url=reference or schema_reference()
    )


def write_starter(path: Path, project: str, force: bool = False, schema_mode: str = "auto") -> None:
    """The starter file; with a relative schema reference, the schema copy beside it first. Written the
    one safe way (aigo_apply/safe_write.py): never through a symlink (a dangling one would create a
    file where it points), never into a FIFO or device; with --force an existing file is replaced
    keeping its owner and mode, unless it changed meanwhile. The text must validate before it lands."""
    rule = schema()["properties"]["project"]
    if not re.match(rule["pattern"], project):
        raise UsageProblem(f"--project {project!r}: {rule['x-error']}")
    display = safe_read.shown(path)
    if os.path.lexists(path) and not force:
        raise AigoError(f"{display} already exists; edit it, or pass --force to overwrite it")
    current = safe_write.read_current(path, display) if force else None  # a link or FIFO is refused here
    reference = schema_reference(schema_mode)
    if reference == SCHEMA_COPY:
        write_schema_copy(path.parent)
    safe_write.write(path, render_starter(project, reference), display, expect=current, check=_validates)


def _validates(tmp: str) -> None:
    load_config(tmp)  # the starter must validate as written (an unusual --project is reported here)


def schema_text() -> str:
    return (data_dir("schemas") / "aigo.schema.json").read_text(encoding="utf-8")


def write_schema_copy(folder: Path) -> tuple[Path, bool]:
    """Put this version's schema at FOLDER/aigo.schema.json (a generated file: replaced when it differs),
    the one safe way (a symlink or anything but a regular file there is refused). Returns the path and
    whether it changed."""
    target = folder / SCHEMA_COPY
    text = schema_text().encode("utf-8")
    current = safe_write.read_current(target, safe_read.shown(target))
    if current == text:
        return target, False
    safe_write.write(target, text, expect=current, new_mode=0o644)
    return target, True
