"""`validate` and `readiness` as use cases: each file checked against the schema and the cross-field
rules (every problem of each file), and this host checked for the file's engines. What they found
goes to the view (platforms/views.py); the exit code is theirs."""

from __future__ import annotations

from dataclasses import dataclass

from aigo_apply.adapters.docker_engine import DockerRuntime
from aigo_apply.config.load import choose_file
from aigo_apply.desired.images import image_object
from aigo_apply.errors import EXIT_ERROR, EXIT_OK, ConfigFileError, ConfigInvalid
from aigo_apply.observe.config_file import load_config
from aigo_apply.platforms.docker.planning import host_checks, load_desired
from aigo_apply.platforms.views import Readiness, ReadinessView, ValidateView


@dataclass(frozen=True, kw_only=True)
class ValidateRequest:
    """What `validate` asks for: each file once, in the order given."""

    files: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class ReadinessRequest:
    """What `readiness` asks for: the file, and the engine whose image and host it checks."""

    file: str | None = None
    engine: str = "vllm"


def run_validate(request: ValidateRequest, view: ValidateView) -> int:
    """Every file is validated (a text view raises the problems of a single file, for the error
    boundary to say); exit 1 if any is not valid."""
    paths = list(request.files) or [choose_file(None)]
    alone = len(paths) == 1
    status = EXIT_OK
    for path in paths:
        try:
            config = load_config(path)
        except ConfigFileError as exc:
            view.unreadable(exc, alone)
            status = EXIT_ERROR
            continue
        except ConfigInvalid as exc:
            view.invalid(exc, alone)
            status = EXIT_ERROR
            continue
        view.valid(path, config.data["project"], len(config.data.get("models", {})))
    return status


def run_readiness(request: ReadinessRequest, view: ReadinessView) -> int:
    """Docker, GPU plumbing, the NVIDIA driver and GPUs for the file's engines; exit 1 if blocked."""
    desired = load_desired(request.file)
    checks, ledger = host_checks(desired, DockerRuntime())
    engine = request.engine
    image = (
        desired.vllm_image if engine == "vllm" else image_object(load_config(choose_file(request.file)).data, engine)
    )
    report = Readiness(desired.project, engine, image, tuple(checks), ledger)
    view.readiness(report)
    return EXIT_ERROR if report.blocked else EXIT_OK
