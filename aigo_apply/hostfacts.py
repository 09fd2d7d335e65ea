"""Reads the facts about this host that decide whether engines can run here: the container engine
(Docker, or Podman through its Docker-compatible socket), its GPU plumbing (NVIDIA runtime or CDI
devices), and the NVIDIA driver and GPUs through NVML (nvidia-ml-py). Returns plain data; the checks
that judge it (hostcheck.py) are pure and tested on recorded facts."""

from __future__ import annotations

from typing import Any


def docker_facts(runtime_factory) -> dict[str, Any]:
    """{reachable, problem, engine, version, runtimes, cdi_devices}; never raises."""
    from aigo_apply.errors import DockerUnavailable

    try:
        runtime = runtime_factory()
        info = runtime.info()
    except DockerUnavailable as exc:
        text = str(exc)
        problem = "permission" if "permission denied" in text else "down"
        return {"reachable": False, "problem": problem, "detail": text}
    return docker_facts_from_info(info)


def docker_facts_from_info(info: dict[str, Any]) -> dict[str, Any]:
    """Pure: the parts of GET /info that matter here."""
    server = info.get("ServerVersion", "")
    components = " ".join(str(c) for c in info.get("Components") or [])
    engine = "Podman" if "podman" in (components + " " + str(info.get("Name", "")) + " " +
                                      str(info.get("OperatingSystem", ""))).lower() else "Docker"
    return {
        "reachable": True,
        "problem": None,
        "engine": engine,
        "version": server,
        "runtimes": sorted((info.get("Runtimes") or {}).keys()),
        "cdi_devices": sorted(d.get("ID", "") for d in info.get("DiscoveredDevices") or [] if d.get("Source") == "cdi"),
    }


def nvml_facts() -> dict[str, Any]:
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
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            try:
                memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
                total, used = int(memory.total), int(memory.used)
            except pynvml.NVMLError:  # e.g. unified memory (GB10) reports no framebuffer
                total, used = None, None
            try:
                procs = [{"pid": p.pid, "used": int(p.usedGpuMemory or 0)}
                         for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)]
            except pynvml.NVMLError:
                procs = []
            gpus.append({"index": index, "name": name if isinstance(name, str) else name.decode(),
                         "memory_total": total, "memory_used": used, "processes": procs})
        driver = pynvml.nvmlSystemGetDriverVersion()
        cuda = pynvml.nvmlSystemGetCudaDriverVersion()
        return {"available": True, "problem": None, "driver": driver if isinstance(driver, str) else driver.decode(),
                "cuda_driver": int(cuda), "gpus": gpus}
    except pynvml.NVMLError as exc:
        return {"available": False, "problem": f"NVML failed: {exc}", "gpus": []}
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass
