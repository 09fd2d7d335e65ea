"""Readiness checks: can the engines this file asks for run on this host? Pure functions of the
host facts (hostfacts.py) and the desired state; each check has an id, a status (`ok`, `warning`,
`blocking`), a plain message and the one step that fixes it. Blocking checks become plan blockers,
and apply refuses to start while one stands (unless --ignore-readiness ID)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from aigo_apply.config.defaults import VLLM_DEFAULT_TAG
from aigo_apply.desired.types import DesiredState

MIN_DRIVER_CUDA13 = 580  # the default v0.31.0 image is a CUDA 13 build: R580 or newer
CU12_TAG = f"{VLLM_DEFAULT_TAG}-cu129"


@dataclass(frozen=True)
class Check:
    id: str
    status: str  # ok | warning | blocking
    message: str
    remediation: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def gpu_needs(desired: DesiredState) -> dict[str, Any]:
    """Which models want GPUs, and which explicit indices they name."""
    wanting = {a: m.spec["gpus"] for a, m in desired.models.items() if m.spec["gpus"] != "none"}
    indices = sorted({i for g in wanting.values() if isinstance(g, list) for i in g})
    return {"models": sorted(wanting), "indices": indices}


def run_checks(facts: dict[str, Any], desired: DesiredState, image: dict[str, Any]) -> list[Check]:
    checks = [_docker(facts["docker"])]
    needs = gpu_needs(desired)
    if not needs["models"]:
        checks.append(Check("nvidia.gpus", "ok", "no model asks for a GPU; NVIDIA checks skipped"))
        return checks
    who = ", ".join(needs["models"])
    if facts["docker"].get("reachable"):
        checks.append(_gpu_runtime(facts["docker"], who))
    checks += _nvidia(facts["nvml"], who, needs["indices"], image)
    return checks


def source_checks(problems: dict[str, list[str]]) -> list[Check]:
    """A model whose local source is missing or not a model blocks the plan (Docker would mount an
    empty folder it creates itself); one check per model, naming what is wrong."""
    return [
        Check(
            "model.path",
            "blocking",
            f"model '{alias}': " + "; ".join(found),
            "point source.path at the model's folder (config.json and weights) or its .gguf file, or download it first",
        )
        for alias, found in sorted(problems.items())
    ]


def _docker(docker: dict[str, Any]) -> Check:
    if docker.get("reachable"):
        return Check("docker.engine", "ok", f"{docker['engine']} {docker['version']} is reachable")
    if docker.get("problem") == "permission":
        return Check(
            "docker.engine",
            "blocking",
            "the Docker socket refuses this user",
            "Add your user to the docker group: sudo usermod -aG docker $USER, then log in again",
        )
    if docker.get("problem") == "missing":
        return Check(
            "docker.engine",
            "blocking",
            "Docker is not installed",
            "Install Docker (e.g. sudo apt-get install docker.io), or point DOCKER_HOST at Podman's socket",
        )
    return Check(
        "docker.engine",
        "blocking",
        f"the Docker engine is not reachable ({docker.get('detail', '')})",
        "Start the Docker service: sudo systemctl start docker",
    )


def _gpu_runtime(docker: dict[str, Any], who: str) -> Check:
    if "nvidia" in docker.get("runtimes", []) or any(
        d.startswith("nvidia.com/gpu") for d in docker.get("cdi_devices", [])
    ):
        return Check("docker.gpu_runtime", "ok", "the container engine can pass NVIDIA GPUs into containers")
    return Check(
        "docker.gpu_runtime",
        "blocking",
        f"models {who} ask for GPUs, but {docker.get('engine', 'Docker')} has no NVIDIA runtime and no "
        "NVIDIA CDI devices",
        "Install the NVIDIA Container Toolkit: sudo nvidia-ctk runtime configure --runtime=docker, then restart Docker",
    )


def _nvidia(nvml: dict[str, Any], who: str, indices: list[int], image: dict[str, Any]) -> list[Check]:
    if not nvml.get("available"):
        return [
            Check(
                "nvidia.driver",
                "blocking",
                f"models {who} ask for GPUs, but no NVIDIA driver answers ({nvml.get('problem')})",
                "Install the NVIDIA driver, R580 or newer (or set `gpus: none` on models that need no GPU)",
            )
        ]
    checks = []
    major = int(found.group(1)) if (found := re.match(r"(\d+)", nvml.get("driver", ""))) else 0
    tag = image.get("tag", "")
    cuda13 = not re.search(r"-cu1[0-2]\d", tag)
    if major < MIN_DRIVER_CUDA13 and cuda13:
        checks.append(
            Check(
                "nvidia.driver",
                "blocking",
                f"driver {nvml['driver']} is older than R{MIN_DRIVER_CUDA13}, which the CUDA 13 image "
                f"{image.get('imageReference')} needs",
                f"set `engines.vllm.image_tag: {CU12_TAG}` (or upgrade the driver to R{MIN_DRIVER_CUDA13}+)",
            )
        )
    else:
        checks.append(Check("nvidia.driver", "ok", f"driver {nvml['driver']} fits {image.get('imageReference')}"))
    count = len(nvml.get("gpus", []))
    missing = [i for i in indices if i >= count]
    if missing:
        checks.append(
            Check(
                "nvidia.gpu_index",
                "blocking",
                f"GPU {', '.join(map(str, missing))} does not exist: this machine has {count} GPU"
                f"{'s' if count != 1 else ''} (0-{count - 1})"
                if count
                else "no GPU is visible",
                "list only existing GPU indices in `gpus:`",
            )
        )
    elif count == 0:
        checks.append(
            Check(
                "nvidia.gpu_index",
                "blocking",
                "the driver answers but sees no GPU",
                "check `nvidia-smi`; the GPU may be disabled or held by a VM",
            )
        )
    else:
        names = ", ".join(f"{g['index']}: {g['name']}" for g in nvml["gpus"])
        checks.append(Check("nvidia.gpu_index", "ok", f"GPUs present ({names})"))
    return checks
