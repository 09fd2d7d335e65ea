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
import stat
import tempfile
from pathlib import Path

from aigo_apply.config.schema import schema
from aigo_apply.errors import AigoError, UsageProblem
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
    """The starter file; with a relative schema reference, the schema copy beside it first."""
    rule = schema()["properties"]["project"]
    if not re.match(rule["pattern"], project):
        raise UsageProblem(f"--project {project!r}: {rule['x-error']}")
    if path.exists() and not force:
        raise AigoError(f"{path} already exists; edit it, or pass --force to overwrite it")
    reference = schema_reference(schema_mode)
    if reference == SCHEMA_COPY:
        write_schema_copy(path.parent)
    path.write_text(render_starter(project, reference), encoding="utf-8")


def schema_text() -> str:
    return (data_dir("schemas") / "aigo.schema.json").read_text(encoding="utf-8")


def write_schema_copy(folder: Path) -> tuple[Path, bool]:
    """Put this version's schema at FOLDER/aigo.schema.json (a generated file: replaced when it differs),
    through a temporary file and a rename; a symlink or anything but a regular file there is refused.
    Returns the path and whether it changed."""
    target = folder / SCHEMA_COPY
    text = schema_text()
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise AigoError(f"{target}: cannot be checked: {exc.strerror or exc}") from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a regular file"
        raise AigoError(f"{target}: is {kind}; remove it (or choose another folder), then write the schema again")
    if info is not None:
        try:
            if target.read_text(encoding="utf-8") == text:
                return target, False
        except (OSError, UnicodeDecodeError):
            pass  # unreadable or not text: replaced below
    try:
        handle, tmp = tempfile.mkstemp(dir=folder, prefix=f".{SCHEMA_COPY}.", suffix=".tmp")
    except OSError as exc:
        raise AigoError(f"{target}: cannot write in {folder}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, stat.S_IMODE(info.st_mode) if info is not None else 0o644)
        os.replace(tmp, target)
    except OSError as exc:
        raise AigoError(f"{target}: cannot write it: {exc.strerror or exc}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target, True
