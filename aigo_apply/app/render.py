"""`render` as a use case: the exact `docker run` line of one container, or the Kubernetes objects,
the file makes, handed to the view; secrets appear as references, never values."""

from __future__ import annotations

from dataclasses import dataclass

from aigo_apply.config.kube_rules import placement_problems
from aigo_apply.config.load import choose_file
from aigo_apply.config.secret_values import unquoted
from aigo_apply.desired.build import build_desired
from aigo_apply.desired.docker_run import docker_run
from aigo_apply.errors import EXIT_OK, AigoError, ConfigInvalid, UsageProblem
from aigo_apply.kube.manifests import selected
from aigo_apply.kube.render_yaml import to_yaml
from aigo_apply.kube.settings import settings_of
from aigo_apply.observe.config_file import load_config
from aigo_apply.observe.local_sources import local_source_problems
from aigo_apply.plan.text import shown
from aigo_apply.platforms.docker.planning import load_desired
from aigo_apply.platforms.host_context import current_host
from aigo_apply.platforms.views import DocumentView


@dataclass(frozen=True, kw_only=True)
class RenderRequest:
    """What `render` asks for: a `docker run` line of one container, or Kubernetes objects."""

    alias: str | None = None
    file: str | None = None
    form: str = "docker-run"


def run_render(request: RenderRequest, view: DocumentView) -> int:
    """`--as kubernetes`: every object of the file (or ALIAS's, or the router's); `--as docker-run`:
    ALIAS's container (or the router's) as Docker would make it, whatever the file's platform."""
    alias = request.alias
    if request.form == "kubernetes":
        config = load_config(choose_file(request.file))
        unplaceable = placement_problems(config.file, config.data, config.marks)  # a docker file's too
        if unplaceable:
            raise ConfigInvalid(config.file, unquoted(unplaceable))
        objects = selected(build_desired(config, current_host()), settings_of(config.data), alias)
        view.document(to_yaml(objects).rstrip("\n"))
        return EXIT_OK
    if alias is None:
        raise UsageProblem("--as docker-run renders one container: name a model ALIAS, or router")
    desired = load_desired(request.file, "docker")
    if alias == "router":
        container = desired.router.container
    elif alias in desired.models:
        container = desired.models[alias].container
    else:
        raise UsageProblem(
            f"no model {alias[:200]!r} in {shown(desired.file)}; models: {', '.join(desired.models) or 'none'}"
        )
    if alias != "router":  # what the plan's model.path blocker refuses (a split part that is a symlink...)
        problems = local_source_problems({alias: desired.models[alias].spec}).get(alias)
        if problems:
            raise AigoError(
                f"{shown(desired.file)}: models.{alias}: "
                + "; ".join(problems)
                + "; apply would refuse to mount it, so there is no docker run line to show: point source.path "
                "at the model's own folder or .gguf file (every part of a split file a regular file)"
            )
    view.document(docker_run(container))
    return EXIT_OK
