"""The `image` and `models` commands as use cases: what an engine's image resolves to and pulling it,
downloading the file's models ahead of time and listing the model store; shown by the view."""

from __future__ import annotations

from dataclasses import dataclass

from aigo_apply.adapters.docker_engine import DockerRuntime
from aigo_apply.app.models import listing, pull
from aigo_apply.config.load import choose_file
from aigo_apply.desired import images
from aigo_apply.errors import EXIT_OK, AigoError
from aigo_apply.observe.config_file import load_config
from aigo_apply.platforms.docker.fetch_steps import pull_image
from aigo_apply.platforms.docker.planning import load_desired
from aigo_apply.platforms.views import Console, StoreView


@dataclass(frozen=True, kw_only=True)
class ImageRequest:
    """What `image inspect` and `image pull` ask for: the engine whose image, in which file."""

    engine: str
    file: str | None = None


@dataclass(frozen=True, kw_only=True)
class ModelsRequest:
    """What `models pull` and `models list` ask for: the file, and the models (all when none)."""

    file: str | None = None
    aliases: tuple[str, ...] = ()


def run_image_inspect(request: ImageRequest, view: StoreView) -> int:
    info = images.image_object(load_config(choose_file(request.file)).data, request.engine)
    reference = info["image_reference"]
    view.image(images.with_local(info, DockerRuntime().inspect_image(reference) if reference else None))
    return EXIT_OK


def run_image_pull(request: ImageRequest, console: Console) -> int:
    engine = request.engine
    reference = images.image_object(load_config(choose_file(request.file)).data, engine)["image_reference"]
    if reference is None:
        raise AigoError(f"{engine} has no built-in image tag; set engines.{engine}.image_tag in the file first")
    pull_image(DockerRuntime(), console, reference)
    return EXIT_OK


def run_models_pull(request: ModelsRequest, console: Console) -> int:
    pull(load_desired(request.file), request.aliases, console)
    return EXIT_OK


def run_models_list(request: ModelsRequest, view: StoreView) -> int:
    desired = load_desired(request.file)
    view.stored_models(listing(desired, desired.models_dir))
    return EXIT_OK
