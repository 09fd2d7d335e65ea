"""The Docker adapter: the only module that talks to the Docker engine (through the docker SDK's
low-level API client). It maps the SDK's exceptions to ours in one place and counts its API calls,
so benchmarks and tests can prove that reading the machine does not grow with the number of models.
"""

from __future__ import annotations

from typing import Any, Mapping

from aigo_apply.errors import DockerUnavailable
from aigo_apply.model import ContainerSpec

API_VERSION = "1.41"  # Docker 20.10+, and Podman's compatible socket; pinned to skip a version round trip


class DockerRuntime:
    def __init__(self, base_url: str | None = None, timeout: int = 60):
        import docker  # imported here: the CLI's validate path never pays for it
        from docker.utils import kwargs_from_env

        kwargs = kwargs_from_env()
        if base_url:
            kwargs["base_url"] = base_url
        self.calls = 0
        try:
            self.api = docker.APIClient(version=API_VERSION, timeout=timeout, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the SDK raises several types for a bad DOCKER_HOST
            raise DockerUnavailable(_explain(exc, kwargs.get("base_url"))) from None
        self.api.hooks["response"].append(self._count)
        self.where = kwargs.get("base_url") or "unix:///var/run/docker.sock"

    def _count(self, response: Any, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return response

    def _call(self, fn, *args, **kwargs):
        import docker.errors
        import requests.exceptions

        try:
            return fn(*args, **kwargs)
        except docker.errors.APIError as exc:
            raise DockerUnavailable(f"the Docker engine refused the request: {exc.explanation or exc}") from None
        except (requests.exceptions.RequestException, docker.errors.DockerException, OSError) as exc:
            raise DockerUnavailable(_explain(exc, self.where)) from None

    # -- reads ---------------------------------------------------------------------------------
    def list_containers(self) -> list[dict[str, Any]]:
        """Every container (running or not) with labels, state and ports: one API call."""
        return self._call(self.api.containers, all=True)

    def list_images(self) -> list[dict[str, Any]]:
        """Every local image with its tags: one API call."""
        return self._call(self.api.images)

    # -- writes --------------------------------------------------------------------------------
    def create(self, spec: ContainerSpec, env: Mapping[str, str]) -> str:
        """Create (not start) the container `spec` describes, with secrets already resolved in `env`."""
        host_config = self.api.create_host_config(
            binds={m.source: {"bind": m.target, "mode": "ro" if m.read_only else "rw"} for m in spec.mounts},
            port_bindings={spec.container_port: (spec.host_ip, spec.host_port)},
            ipc_mode=spec.ipc_mode,
            restart_policy={"Name": spec.restart_policy},
            device_requests=_device_requests(spec.gpus),
        )
        created = self._call(
            self.api.create_container,
            image=spec.image,
            command=list(spec.command),
            name=spec.name,
            environment=dict(env),
            labels=dict(spec.labels),
            ports=[spec.container_port],
            host_config=host_config,
        )
        return created["Id"]

    def start(self, container: str) -> None:
        self._call(self.api.start, container)

    def stop(self, container: str, timeout: int = 10) -> None:
        self._call(self.api.stop, container, timeout=timeout)

    def remove(self, container: str, force: bool = True) -> None:
        self._call(self.api.remove_container, container, force=force)


def _device_requests(gpus: str | tuple[int, ...]) -> list[Any] | None:
    from docker.types import DeviceRequest

    if gpus == "none":
        return None
    if gpus == "all":
        return [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    return [DeviceRequest(device_ids=[str(g) for g in gpus], capabilities=[["gpu"]])]


def _explain(exc: Exception, where: str | None) -> str:
    text = str(exc)
    where = where or "unix:///var/run/docker.sock"
    if "Permission denied" in text or isinstance(exc, PermissionError):
        return (f"permission denied on the Docker socket ({where}); add your user to the docker group "
                "(sudo usermod -aG docker $USER, then log in again)")
    if "No such file" in text or "Connection refused" in text or "connection" in text.lower():
        return (f"cannot reach the Docker engine at {where}; start it (sudo systemctl start docker), "
                "or point DOCKER_HOST at a running engine or Podman's Docker-compatible socket")
    return f"Docker engine at {where}: {text}"
