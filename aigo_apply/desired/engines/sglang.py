"""SGLang: the `python3 -m sglang.launch_server` command line and container for one model.

Order: --model-path, --served-model-name, --context-length, --mem-fraction-static, then one flag per
setting that is set, --enable-metrics (the router's one /metrics gathers it), then the fixed in-container
host and port. SGLang listens on 127.0.0.1 unless
told otherwise, so --host 0.0.0.0 is fixed: the port is still published on the host's 127.0.0.1 only.
"""

from __future__ import annotations

from aigo_apply.config.engine_kinds import SGLANG
from aigo_apply.desired.engines.common import (
    MODEL_MOUNT,
    cache_mount,
    check_command,
    engine_container,
    number,
)
from aigo_apply.desired.spec import ModelSpec
from aigo_apply.desired.types import ContainerSpec, Mount
from aigo_apply.errors import UnsafeSetting

ENTRYPOINT = ("python3", "-m", "sglang.launch_server")
FLAGS = (
    "--model-path",
    "--served-model-name",
    "--context-length",
    "--mem-fraction-static",
    "--tp-size",
    "--trust-remote-code",
    "--enable-metrics",
    "--host",
    "--port",
)


def render(project: str, alias: str, spec: ModelSpec) -> ContainerSpec:
    settings = spec.get("sglang", {})
    fraction = settings["gpu_memory_utilization"]
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
        raise UnsafeSetting(f"model '{alias}': sglang.gpu_memory_utilization {fraction!r} is not a fraction in (0, 1]")
    model_path = f"{MODEL_MOUNT}/{alias}"
    command = [
        "--model-path",
        model_path,
        "--served-model-name",
        alias,
        "--context-length",
        str(spec["context_length"]),
        "--mem-fraction-static",
        number(fraction),
    ]
    if "tensor_parallel_size" in settings:
        command += ["--tp-size", number(settings["tensor_parallel_size"])]
    if settings.get("trust_remote_code"):
        command.append("--trust-remote-code")
    command += ["--enable-metrics", "--host", "0.0.0.0", "--port", str(SGLANG.container_port)]
    check_command("SGLang", alias, command, FLAGS)
    return engine_container(
        project,
        alias,
        spec,
        command,
        [Mount(spec["model_dir"], model_path, True), cache_mount(project, spec["image"])],
        SGLANG.container_port,
        ENTRYPOINT,
    )
