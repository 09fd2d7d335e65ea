"""Reads the facts about this host that decide whether engines can run here: the container engine
(Docker, or Podman through its Docker-compatible socket), its GPU plumbing (NVIDIA runtime or CDI
devices), and the NVIDIA driver and GPUs through NVML (nvidia-ml-py). Returns plain data; the checks
that judge it (hostcheck.py) are pure and tested on recorded facts."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Mapping

from aigo_apply.adapters.runtime import Runtime
from aigo_apply.errors import DockerUnavailable
from aigo_apply.json_types import JsonObject, JsonValue, arr, obj, text
from aigo_apply.observe import docker_answers

_CONTAINER_ID = re.compile(r"(?:docker[-/]|/libpod-|crio-|containerd[-/])?([0-9a-f]{64})")


def docker_facts(runtime_factory: Callable[[], Runtime], installed: Callable[[], bool] | None = None) -> JsonObject:
    """{reachable, problem, engine, version, runtimes, cdi_devices}; never raises. An engine that
    does not answer is `missing` when nothing of one is on this host (`installed`: docker_installed),
    `permission` when its socket refuses this user, else `down`."""

    try:
        runtime = runtime_factory()
        info = runtime.info()
    except DockerUnavailable as exc:
        text = str(exc)
        if "permission denied" in text:
            problem = "permission"
        elif not (installed or docker_installed)():
            problem = "missing"
        else:
            problem = "down"
        return {"reachable": False, "problem": problem, "detail": text}
    return docker_facts_from_info(info)


def docker_installed(
    environ: Mapping[str, str] = os.environ,
    which: Callable[[str], str | None] = shutil.which,
    exists: Callable[[str], bool] = os.path.exists,
) -> bool:
    """Whether a container engine is on this host at all: a `docker`, `dockerd` or `podman` program
    on PATH, or a socket where one listens (DOCKER_HOST's, Docker's, Podman's rootful or rootless).
    A DOCKER_HOST that is not a local socket names an engine elsewhere: installed, as far as we can tell."""
    host = environ.get("DOCKER_HOST", "")
    if host and not host.startswith("unix://"):
        return True
    runtime_dir = environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    sockets = [host.removeprefix("unix://")] if host else []
    sockets += [
        "/var/run/docker.sock",
        "/run/docker.sock",
        "/run/podman/podman.sock",
        f"{runtime_dir}/docker.sock",
        f"{runtime_dir}/podman/podman.sock",
    ]
    return any(which(name) for name in ("docker", "dockerd", "podman")) or any(exists(s) for s in sockets)


def docker_facts_from_info(info: object) -> JsonObject:
    """Pure: the parts of GET /info that matter here, each read for its type (observe/docker_answers.py;
    an answer that is not an object has none)."""
    info = docker_answers.info(info if isinstance(info, dict) else {})
    server = text(info.get("ServerVersion"))
    components = " ".join(
        f"{c.get('Name', '')} {c.get('Version', '')}" for c in arr(info.get("Components")) if isinstance(c, dict)
    )
    named = f"{components} {info.get('Name', '')} {info.get('OperatingSystem', '')}"
    engine = "Podman" if "podman" in named.lower() else "Docker"
    return {
        "reachable": True,
        "problem": None,
        "engine": engine,
        "version": server,
        "runtimes": [*sorted(obj(info.get("Runtimes")))],
        "cdi_devices": [
            *sorted(
                text(d["ID"])
                for d in arr(info.get("DiscoveredDevices"))
                if isinstance(d, dict) and d.get("Source") == "cdi" and d.get("ID")
            )
        ],
    }


def nvml_facts() -> JsonObject:
    """{available, problem, driver, cuda_driver, gpus: [{index, name, memory_total, memory_used, processes}]}."""
    try:
        import pynvml
    except ImportError:
        return {"available": False, "problem": "nvidia-ml-py is not installed", "gpus": []}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return {"available": False, "problem": f"NVML could not start: {exc}", "gpus": []}
    try:
        gpus: list[JsonValue] = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            try:
                memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
                total, used = int(memory.total), int(memory.used)
            except pynvml.NVMLError:  # e.g. unified memory (GB10) reports no framebuffer
                total, used = None, None
            unified = total is None
            if unified:  # the GPU shares the host's memory: count that
                total, used = host_memory()
            try:
                procs: list[JsonValue] = [
                    process_facts(p.pid, int(p.usedGpuMemory or 0))
                    for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
                ]
            except pynvml.NVMLError:
                procs = []
            gpus.append(
                {
                    "index": index,
                    "name": name if isinstance(name, str) else name.decode(),
                    "memory_total": total,
                    "memory_used": used,
                    "unified_memory": unified,
                    "processes": procs,
                }
            )
        driver = pynvml.nvmlSystemGetDriverVersion()
        cuda = pynvml.nvmlSystemGetCudaDriverVersion()
        return {
            "available": True,
            "problem": None,
            "driver": driver if isinstance(driver, str) else driver.decode(),
            "cuda_driver": int(cuda),
            "gpus": gpus,
            "host_memory_total": host_memory()[0],  # sleeping models' weights wait there (plan/swap_ledger.py)
        }
    except pynvml.NVMLError as exc:
        return {"available": False, "problem": f"NVML failed: {exc}", "gpus": []}
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def process_facts(pid: int, used: int) -> JsonObject:
    """A GPU process: its name, and the container it runs in (from /proc/PID/cgroup), so the ledger
    can tell this project's engines from everything else holding GPU memory."""

    def read(name: str) -> str:
        try:
            with open(f"/proc/{pid}/{name}", encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    return {
        "pid": pid,
        "used": used,
        "name": read("comm").strip(),
        "container_id": container_id_from_cgroup(read("cgroup")),
    }


def container_id_from_cgroup(text: str) -> str | None:
    """The 64-hex container id in a /proc/PID/cgroup file (cgroup v1 `/docker/ID`, v2
    `docker-ID.scope`, Podman `libpod-ID`), or None for a process outside containers."""
    for line in text.splitlines():
        match = _CONTAINER_ID.search(line.rsplit(":", 1)[-1])
        if match:
            return match.group(1)
    return None


def host_memory() -> tuple[int | None, int | None]:
    """(total, in use) of host memory from /proc/meminfo, for GPUs with unified memory."""
    values: dict[str, int] = {}
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                key, _, rest = line.partition(":")
                values[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return None, None
    total, available = values.get("MemTotal"), values.get("MemAvailable")
    return total, (total - available if total is not None and available is not None else None)
