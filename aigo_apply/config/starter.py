"""`aigo-apply init`: writes a starter aigo.yaml from templates/aigo.yaml.j2 (Jinja2, strict
undefined) and checks that what it wrote validates."""

from __future__ import annotations

import re
from pathlib import Path

from aigo_apply.config.schema import schema
from aigo_apply.errors import AigoError, UsageProblem
from aigo_apply.resources import data_dir


def project_name_for(directory: Path) -> str:
    """A valid project name derived from a folder name ('My Models' -> 'my-models')."""
    name = re.sub(r"[^a-z0-9_-]+", "-", directory.name.lower()).strip("-_")[:32]
    return name or "workstation"


def render_starter(project: str) -> str:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    schema = data_dir("schemas") / "aigo.schema.json"
    return env.get_template("aigo.yaml.j2").render(
        project=project, alias="qwen3-8b", repo="Qwen/Qwen3-8B", schema_url=schema.as_uri()
    )


def write_starter(path: Path, project: str, force: bool = False) -> None:

    rule = schema()["properties"]["project"]
    if not re.match(rule["pattern"], project):
        raise UsageProblem(f"--project {project!r}: {rule['x-error']}")
    if path.exists() and not force:
        raise AigoError(f"{path} already exists; edit it, or pass --force to overwrite it")
    path.write_text(render_starter(project), encoding="utf-8")
