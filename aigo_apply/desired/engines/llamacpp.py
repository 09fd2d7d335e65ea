"""llama.cpp: the `llama-server` command line and container for one GGUF model.

Order: --model (the .gguf file inside the mounted folder, so split files find their siblings),
--alias, --ctx-size, --n-gpu-layers, --split-mode row when tensor parallelism is asked for, --jinja
(tool calling through the model's chat template), --metrics (the router's one /metrics gathers it),
then the fixed in-container host and port.
llama.cpp has no memory fraction: it takes what the layers it offloads and the context need.
"""

from __future__ import annotations

from aigo_apply.config.engine_kinds import LLAMACPP
from aigo_apply.desired.engines.common import MODEL_MOUNT, check_command, engine_container, number
from aigo_apply.desired.model_store import gguf_parts
from aigo_apply.desired.spec import ModelSpec
from aigo_apply.desired.types import ContainerSpec, Mount
from aigo_apply.errors import UnsafeSetting

ENTRYPOINT = ("/app/llama-server",)  # the official image's server binary
ALL_LAYERS = 999  # more layers than any model has: "all" on every llama-server build
FLAGS = (
    "--model",
    "--alias",
    "--ctx-size",
    "--n-gpu-layers",
    "--split-mode",
    "--jinja",
    "--metrics",
    "--host",
    "--port",
)


def render(project: str, alias: str, spec: ModelSpec) -> ContainerSpec:
    settings = spec.get("llama.cpp", {})
    name = spec.get("model_file", "")
    if not name.endswith(".gguf") or ".." in name.split("/") or name.startswith("/"):
        raise UnsafeSetting(f"model '{alias}': {name!r} is not a .gguf file inside the model folder")
    folder = f"{MODEL_MOUNT}/{alias}"
    layers = settings.get("gpu_layers", "all")
    command = [
        "--model",
        f"{folder}/{name}",
        "--alias",
        alias,
        "--ctx-size",
        str(spec["context_length"]),
        "--n-gpu-layers",
        "0" if spec["gpus"] == "none" else str(ALL_LAYERS) if layers == "all" else number(layers),
    ]
    if settings.get("tensor_parallel_size", 1) > 1:
        command += ["--split-mode", "row"]
    command += ["--jinja", "--metrics", "--host", "0.0.0.0", "--port", str(LLAMACPP.container_port)]
    check_command("llama.cpp", alias, command, FLAGS)
    return engine_container(
        project, alias, spec, command, model_mounts(spec, folder), LLAMACPP.container_port, ENTRYPOINT
    )


def model_mounts(spec: ModelSpec, folder: str) -> list[Mount]:
    """A downloaded model: its own folder in the model store (it holds only what was selected). A
    local file: that file alone (every part of a split file), never the folder it sits in, which
    may be `/` or a home folder."""
    if "path" not in spec["source"]:
        return [Mount(spec["model_dir"], folder, True)]
    return [
        Mount(f"{spec['model_dir'].rstrip('/')}/{name}", f"{folder}/{name}", True)
        for name in gguf_parts(spec["model_file"])
    ]
