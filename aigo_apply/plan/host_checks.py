"""Readiness checks: can the engines this file asks for run on this host? Pure functions of the
host facts (hostfacts.py) and the desired state; each check has an id, a status (`ok`, `warning`,
`blocking`), a plain message and the one step that fixes it. Blocking checks become plan blockers,
and apply refuses to start while one stands (unless --ignore-readiness ID)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from aigo_apply.config.engine_kinds import ENGINES, in_layers, tag_cuda
from aigo_apply.config.vllm_facts import facts as vllm_facts
from aigo_apply.desired.images import ImageObject
from aigo_apply.desired.types import DesiredState

MIN_DRIVER_CUDA13 = 580  # the default v0.31.0 image is a CUDA 13 build: R580 or newer
MIN_DRIVER = {
    13: MIN_DRIVER_CUDA13,
    12: 525,
}  # CUDA major -> oldest driver branch (NVIDIA's minor version compatibility)


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


def run_checks(facts: dict[str, Any], desired: DesiredState, image: ImageObject) -> list[Check]:
    """`image`: the vLLM image object (images.image_object); the other engines' images come from
    the specs of the models that run on them. Each engine's image is checked against the driver by
    its own rule: an SGLang-only file is never held to vLLM's CUDA 13 build."""
    checks = [_docker(facts["docker"])]
    needs = gpu_needs(desired)
    if not needs["models"]:
        checks.append(Check("nvidia.gpus", "ok", "no model asks for a GPU; NVIDIA checks skipped"))
        return checks
    who = ", ".join(needs["models"])
    if facts["docker"].get("reachable"):
        checks.append(_gpu_runtime(facts["docker"], who))
    checks += _nvidia(facts["nvml"], who, needs["indices"], engine_images(desired, image))
    if facts["nvml"].get("available"):
        checks += parallel_checks(desired, len(facts["nvml"].get("gpus", []))) + kernel_checks(desired)
    return checks


def parallel_checks(desired: DesiredState, count: int) -> list[Check]:
    """`gpus: all` with tensor_parallel_size above the GPUs this machine has: vLLM and SGLang fail at
    start (after the image pull and minutes of loading), and the fit check would divide the weights
    by GPUs that do not exist. A list of GPUs is checked against tp when the file is validated."""
    checks = []
    for alias, model in sorted(desired.models.items()):
        spec = model.spec
        tp = spec.get(spec["engine"], {}).get("tensor_parallel_size", 1)
        if spec["gpus"] == "all" and not in_layers(spec["engine"]) and tp > count:
            checks.append(
                Check(
                    "gpu.parallel",
                    "blocking",
                    f"model '{alias}': tensor_parallel_size {tp} needs {tp} GPUs, but `gpus: all` sees "
                    f"{count} on this machine",
                    f"lower tensor_parallel_size to {max(1, count)} or less, or run it on a machine with {tp} GPUs",
                )
            )
    return checks


def kernel_checks(desired: DesiredState) -> list[Check]:
    """A vLLM MoE kernel that exists only for AMD GPUs (ROCm), asked for on this NVIDIA host: vLLM
    takes the name (it is one of its choices) and fails when the model loads. A warning, not a
    blocker: the facts file's note is the only source, and vLLM may widen a kernel's support."""
    rocm_only = {
        name for name, note in moe_restrictions().items() if "rocm" in note.lower() and "cuda" not in note.lower()
    }
    checks = []
    for alias, model in sorted(desired.models.items()):
        backend = model.spec.get("vllm", {}).get("moe_backend") if model.spec["engine"] == "vllm" else None
        if backend in rocm_only:
            checks.append(
                Check(
                    "engine.moe_backend",
                    "warning",
                    f"model '{alias}': moe_backend '{backend}' is a ROCm (AMD GPU) kernel "
                    f"({moe_restrictions()[backend]}); this host's GPUs are NVIDIA, so vLLM will fail when the model loads",
                    "remove moe_backend (vLLM picks one: auto), or name an NVIDIA kernel such as triton or cutlass",
                )
            )
    return checks


def moe_restrictions() -> dict[str, str]:
    """moe_backend -> the hardware note vLLM's own docstring gives it (schemas/vllm-v0.31.0.json)."""
    notes: dict[str, str] = vllm_facts()["moe_backends_info"].get("restrictions_from_docstring", {})
    return notes


def engine_images(desired: DesiredState, vllm_image: ImageObject) -> dict[str, dict[str, Any]]:
    """engine -> {image_reference, tag, cuda} for the engines of the models that want a GPU; `cuda`
    is the CUDA major version the image is built for, when known (None: aigo-apply cannot tell)."""
    out: dict[str, dict[str, Any]] = {}
    for model in desired.models.values():
        engine = model.spec.get("engine", "vllm")
        if model.spec["gpus"] == "none" or engine in out:
            continue
        if engine == "vllm":
            reference, tag = vllm_image.get("image_reference"), str(vllm_image.get("tag") or "")
        else:
            reference = str(model.spec.get("image", ""))
            tag = reference.rpartition(":")[2] if ":" in reference.rpartition("/")[2] else ""
        out[engine] = {"image_reference": reference, "tag": tag, "cuda": image_cuda(engine, tag)}
    return out


def image_cuda(engine: str, tag: str) -> int | None:
    """The CUDA major version an engine image is built for: named by its tag (`-cu129`, `-cu130`),
    or vLLM's own release tags without a suffix (CUDA 13 since v0.31.0); else unknown."""
    kind = ENGINES.get(engine)
    return kind.image_cuda(tag) if kind else tag_cuda(tag)


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


def store_checks(problems: dict[str, list[str]]) -> list[Check]:
    """A model whose download folder in the model store is a link (or holds one) blocks the plan: a
    download would write, and the engine mount, wherever it leads (observe/markers.store_link)."""
    return [
        Check(
            "model.store",
            "blocking",
            f"model '{alias}': " + "; ".join(found),
            "remove the link: aigo-apply downloads only into real folders below defaults.models_dir "
            "(to keep models on another disk, point defaults.models_dir there)",
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


def _nvidia(nvml: dict[str, Any], who: str, indices: list[int], images: dict[str, dict[str, Any]]) -> list[Check]:
    if not nvml.get("available"):
        return [
            Check(
                "nvidia.driver",
                "blocking",
                f"models {who} ask for GPUs, but no NVIDIA driver answers ({nvml.get('problem')})",
                _install_driver(images),
            )
        ]
    major = int(found.group(1)) if (found := re.match(r"(\d+)", nvml.get("driver", ""))) else 0
    checks = [_driver_fits(engine, image, nvml, major) for engine, image in sorted(images.items())]
    return checks + _gpu_indices(nvml, indices)


def _install_driver(images: dict[str, dict[str, Any]]) -> str:
    """The fix when no driver answers: the driver the file's images need, as far as it is known."""
    known = {e: i for e, i in images.items() if i["cuda"] is not None}
    unknown = sorted(i["image_reference"] for i in images.values() if i["cuda"] is None)
    newest = max((i["cuda"] for i in known.values()), default=None)
    text = "Install the NVIDIA driver"
    if newest is not None:
        refs = ", ".join(sorted(i["image_reference"] for i in known.values() if i["cuda"] == newest))
        floor = MIN_DRIVER.get(newest)
        text += f", R{floor} or newer" if floor else f", one for CUDA {newest}"
        text += f" for the CUDA {newest} image {refs}"
    if unknown:
        text += f"; which driver {', '.join(unknown)} needs is not known to aigo-apply (see its documentation)"
    return text + "; or set `gpus: none` on models that need no GPU"


def _driver_fits(engine: str, image: dict[str, Any], nvml: dict[str, Any], major: int) -> Check:
    """One engine's image against the driver: vLLM's rule is `nvidia.driver`, others `nvidia.driver.ENGINE`."""
    kind = ENGINES.get(engine)
    check_id = kind.driver_check if kind else f"nvidia.driver.{engine}"
    reference, cuda = image.get("image_reference"), image["cuda"]
    if cuda is None:
        return Check(
            check_id,
            "warning",
            f"driver {nvml['driver']} answers, but which CUDA version {reference} is built for is not known to "
            "aigo-apply (its tag names none), so the driver was not checked against it",
            f"check the driver {reference} needs in its documentation, or use a tag that names its CUDA "
            "version (such as -cu129)",
        )
    floor = MIN_DRIVER.get(cuda, 0)
    if major >= floor:
        return Check(check_id, "ok", f"driver {nvml['driver']} fits {reference}")
    if kind and kind.cuda12_tag and cuda == 13:
        fix = f"set `engines.{engine}.image_tag: {kind.cuda12_tag}` (or upgrade the driver to R{floor}+)"
    elif cuda == 13:
        fix = f"upgrade the driver to R{floor}+, or set engines.{engine}.image_tag to a tag built for CUDA 12"
    else:
        fix = f"upgrade the driver to R{floor}+"
    return Check(
        check_id,
        "blocking",
        f"driver {nvml['driver']} is older than R{floor}, which the CUDA {cuda} image {reference} needs",
        fix,
    )


def _gpu_indices(nvml: dict[str, Any], indices: list[int]) -> list[Check]:
    checks = []
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
