"""The Docker adapter (the first implementation of adapters/runtime.Runtime): the only module that
talks to the Docker engine. The three reads a plan makes (container list, image list, /info) go
over the standard library (adapters/docker_http.py), so plan and a no-op apply never import the
docker SDK and requests; everything else goes through the SDK's low-level API client, made on first
use. It maps every failure to DockerUnavailable in one place (`_errors`) and counts its API calls,
so benchmarks and tests can prove that reading the machine does not grow with the number of models.
Its named volumes (made with our labels before a container mounts them, listed, removed) are in
adapters/docker_volumes.py.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TypedDict

from aigo_apply.adapters import docker_http
from aigo_apply.adapters.create_checks import check_container
from aigo_apply.adapters.docker_sdk import DockerAPI, Stream
from aigo_apply.adapters.docker_volumes import DockerVolumes
from aigo_apply.adapters.engine_sockets import prepare_socket_mounts
from aigo_apply.desired import labels
from aigo_apply.desired.types import CONFINED_CAPS, ContainerSpec
from aigo_apply.errors import DockerUnavailable, visible
from aigo_apply.json_types import JsonObject, JsonValue, obj, text
from aigo_apply.observe import docker_answers
from aigo_apply.observe.docker_answers import ContainerConfig
from aigo_apply.observe.label_checks import engine_names

API_VERSION = docker_http.API_VERSION
_CONFINED = {"cap_drop": ["ALL"], "cap_add": list(CONFINED_CAPS), "security_opt": ["no-new-privileges:true"]}


class _Ahead(TypedDict, total=False):
    """What the thread of prefetch_info left: the answer to GET /info, or what it raised."""

    found: JsonValue
    error: BaseException


class DockerRuntime(DockerVolumes):
    def __init__(self, base_url: str | None = None, timeout: int | None = 60):  # None: no timeout (events)
        self.calls = 0
        self.waited = 0.0  # seconds spent on the plan's three reads (the engine answering), for benchmarks
        self._base_url, self._timeout = base_url, timeout
        host = base_url or os.environ.get("DOCKER_HOST")
        self.where = host or "unix:///var/run/docker.sock"
        # the plan's reads without the SDK, where the transport is a plain socket (else None: the SDK)
        self._http = docker_http.for_host(host, os.environ, API_VERSION, timeout)
        self._api: DockerAPI | None = None
        # a GET /info asked ahead (prefetch_info): its thread and answer
        self._info: tuple[threading.Thread, _Ahead] | None = None

    def prefetch_info(self) -> None:
        """Ask for GET /info now, on a connection of its own, while the container and image lists are
        read: the engine takes longer to gather it than to list 200 containers, and a plan reads it
        only after them. Still one call; its answer (or failure) comes out of info() as before."""
        if self._http is None or self._info is not None:
            return
        http, box = self._http, _Ahead()

        def fetch() -> None:
            try:
                box["found"] = http.get(*docker_http.INFO)
            except BaseException as exc:  # handed to the caller of info(), mapped there
                box["error"] = exc

        thread = threading.Thread(target=fetch, name="docker-info", daemon=True)
        thread.start()
        self._info = (thread, box)

    @property
    def api(self) -> DockerAPI:
        """The docker SDK's low-level client, made (and the SDK imported) on first use."""
        if self._api is None:
            import docker
            from docker.utils import kwargs_from_env

            why = docker_http.host_problem(self.where)  # a name urllib3 refuses only once it connects
            if why:
                raise DockerUnavailable(docker_http.unusable_host(self.where, why))
            try:  # DOCKER_HOST and DOCKER_CERT_PATH are parsed here: a malformed one is one clear line
                kwargs = {**kwargs_from_env(), **({"base_url": self._base_url} if self._base_url else {})}
                api = docker.APIClient(version=API_VERSION, timeout=self._timeout, **kwargs)
            except (ValueError, docker.errors.DockerException) as exc:
                raise DockerUnavailable(docker_http.unusable_host(self.where, exc)) from None
            client: DockerAPI = api  # the SDK has no type information: docker_sdk.DockerAPI says what it is
            client.hooks["response"].append(self._count)
            self._api = client
        return self._api

    def _count(self, response: object, *args: object, **kwargs: object) -> object:
        self.calls += 1
        return response

    def _get(self, path: str, params: Mapping[str, object] | None, sdk: Callable[[], JsonValue]) -> JsonValue:
        """GET `path` over the light client, or through the SDK (`sdk`) when it has none."""
        if self._http is None:
            with self._errors():
                return sdk()
        self.calls += 1
        start = time.perf_counter()
        ahead, self._info = (self._info, None) if path == docker_http.INFO[0] else (None, self._info)
        try:
            if ahead is not None:
                ahead[0].join()
                if "error" in ahead[1]:
                    raise ahead[1]["error"]
                return ahead[1]["found"]
            return self._http.get(path, params)
        except ValueError as exc:
            raise DockerUnavailable(
                f"Docker engine at {docker_http.shown_host(self.where)}: {visible(str(exc))}"
            ) from None
        except OSError as exc:
            raise DockerUnavailable(_explain(exc, self.where)) from None
        finally:
            self.waited += time.perf_counter() - start

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Map every failure of the SDK (and the socket under it) to DockerUnavailable."""
        import docker.errors  # imported here: the plan's reads (docker_http) never need the SDK
        import requests.exceptions

        try:
            yield
        except docker.errors.NotFound as exc:
            raise DockerUnavailable(f"the Docker engine says: {exc.explanation or exc}") from None
        except docker.errors.APIError as exc:
            raise DockerUnavailable(f"the Docker engine refused the request: {exc.explanation or exc}") from None
        except (requests.exceptions.RequestException, docker.errors.DockerException, OSError, ValueError) as exc:
            raise DockerUnavailable(_explain(exc, self.where)) from None  # (ValueError: urllib3's LocationParseError)

    # -- reads ---------------------------------------------------------------------------------
    def engine_events(self, project: str) -> _EngineEvents:
        """The project's engine containers dying and starting, as Docker reports them (a stream
        whose `close()` ends the iteration); each event names the model alias and container id. Only
        containers under the name the tool gives their alias count: copied labels on another name do not."""
        filters = {
            "type": "container",
            "label": [
                f"{labels.MANAGED_BY}={labels.MANAGER}",
                f"{labels.PROJECT}={project}",
                f"{labels.ROLE}={labels.ROLE_ENGINE}",
            ],
            "event": ["die", "start"],
        }
        with self._errors():
            return _EngineEvents(self.api.events(filters=filters, decode=True), project)

    def list_containers(self) -> list[JsonObject]:
        """Every container (running or not) with labels, state and ports: one API call."""
        return docker_answers.container_list(
            self._get(*docker_http.LIST_CONTAINERS, lambda: self.api.containers(all=True))
        )

    def list_images(self) -> list[JsonObject]:
        """Every local image with its tags: one API call."""
        return docker_answers.image_list(self._get(*docker_http.LIST_IMAGES, lambda: self.api.images()))

    def state(self, container: str) -> JsonObject:
        """The container's State object (Status, Running, ExitCode, ...); {} when it is gone."""
        import docker.errors

        with self._errors():
            try:
                found = self.api.inspect_container(container)
            except docker.errors.NotFound:
                return {}
        return docker_answers.container_state(found.get("State") if isinstance(found, dict) else found)

    def logs_tail(self, container: str, lines: int = 20) -> list[str]:
        """The last log lines of a container (stdout and stderr), or [] when it cannot be read."""
        try:
            with self._errors():
                raw = self.api.logs(container, tail=lines, stdout=True, stderr=True)
        except DockerUnavailable:
            return []
        return raw.decode("utf-8", errors="replace").splitlines()[-lines:]

    def log_lines(self, container: str, follow: bool, tail: int | None, since: float | None) -> Iterator[str]:
        """A container's output (stdout and stderr) line by line: the last `tail` lines (all: None)
        since `since` (a Unix time), then, with `follow`, each new line until the container stops."""
        with self._errors():
            chunks = self.api.logs(
                container, stream=True, follow=follow, tail="all" if tail is None else tail, since=since
            )
        rest = b""
        with self._errors():
            for chunk in chunks:
                *lines, rest = (rest + chunk).split(b"\n")
                yield from (line.decode("utf-8", errors="replace") for line in lines)
        if rest:
            yield rest.decode("utf-8", errors="replace")

    def container_config(self, container: str) -> ContainerConfig:
        """What a container was created with: its environment (`env`) and command line (`cmd`,
        after the entry point); {} when it is gone."""
        try:
            with self._errors():
                found = self.api.inspect_container(container)
        except DockerUnavailable:
            return {}
        return docker_answers.container_config(found)

    def info(self) -> JsonObject:
        """GET /info: engine version, runtimes, CDI devices."""
        return docker_answers.info(self._get(*docker_http.INFO, lambda: self.api.info()))

    def tag(self, source: str, reference: str) -> None:
        """Point `repo:tag` at the image `source` (an id or a digest reference)."""
        with self._errors():
            self.api.tag(source, *_split_reference(reference), force=True)

    def inspect_image(self, reference: str) -> JsonObject | None:
        """GET /images/{ref}/json, or None when the image is not on this machine."""
        import docker.errors

        with self._errors():
            try:
                found = self.api.inspect_image(reference)
            except docker.errors.ImageNotFound:
                return None
        return docker_answers.image_inspection(found)

    # -- writes --------------------------------------------------------------------------------
    def create(self, spec: ContainerSpec, env: Mapping[str, str]) -> str:
        """Create (not start) the container `spec` describes, with secrets already resolved in `env`."""
        prepare_socket_mounts(spec)  # before the mounts' check: they must exist, with this tool's modes
        check_container(spec)
        published, project = spec.host_port is not None, spec.labels.get(labels.PROJECT, "")
        with self._errors():
            if labels.is_ours(dict(spec.labels), project):
                self.make_volumes(spec, project)
            host_config = self.api.create_host_config(
                binds={m.source: {"bind": m.target, "mode": "ro" if m.read_only else "rw"} for m in spec.mounts},
                port_bindings={spec.container_port: (spec.host_ip, spec.host_port)} if published else None,
                ipc_mode=spec.ipc_mode,
                shm_size=spec.shm_size,
                network_mode=spec.network_mode,
                restart_policy={"Name": spec.restart_policy},
                device_requests=_device_requests(spec.gpus),
                cpu_shares=spec.cpu_shares,
                log_config=spec.logs.log_config() if spec.logs else None,  # check_container: always rotated
                **(_CONFINED if spec.confined else {}),
            )
            created = self.api.create_container(
                image=spec.image,
                command=list(spec.command),
                name=spec.name,
                environment=dict(env),
                labels=dict(spec.labels),
                ports=[spec.container_port] if published else None,
                entrypoint=list(spec.entrypoint) if spec.entrypoint is not None else None,
                user=spec.user or "",
                host_config=host_config,
            )
        return created["Id"]

    def start(self, container: str) -> None:
        with self._errors():
            self.api.start(container)

    def unpause(self, container: str) -> None:
        with self._errors():
            self.api.unpause(container)

    def stop(self, container: str, timeout: int = 30) -> None:
        """Stop gracefully (SIGTERM, then SIGKILL after `timeout` s): vLLM frees GPU memory on TERM."""
        with self._errors():
            self.api.stop(container, timeout=timeout)

    def remove(self, container: str, force: bool = True) -> None:
        with self._errors():
            self.api.remove_container(container, force=force)

    def rename(self, container: str, name: str) -> None:
        with self._errors():
            self.api.rename(container, name)

    def kill(self, container: str, signal: str) -> None:
        with self._errors():
            self.api.kill(container, signal=signal)

    def process_count(self, container: str) -> int:
        """How many processes run in a container now (the router: HAProxy's master and its workers,
        old ones included while they finish their requests after a reload)."""
        with self._errors():
            found = self.api.top(container)
        rows = found.get("Processes") if isinstance(found, dict) else None
        return len(rows) if isinstance(rows, list) else 0

    def exec(self, container: str, command: list[str]) -> tuple[int, str]:
        """Run a command in a running container; returns its exit code and combined output."""
        with self._errors():
            exec_id = self.api.exec_create(container, command, stdout=True, stderr=True)["Id"]
            output = self.api.exec_start(exec_id)
            code = self.api.exec_inspect(exec_id).get("ExitCode")
        return (code if code is not None else -1), output.decode("utf-8", errors="replace")

    def run_once(
        self, image: str, command: list[str], entrypoint: list[str], binds: dict[str, str], user: str | None = None
    ) -> tuple[int, str]:
        """Run a throwaway container (no network) to completion; returns exit code and output."""
        with self._errors():
            host_config = self.api.create_host_config(
                binds={src: {"bind": dst, "mode": "ro"} for src, dst in binds.items()}, network_mode="none"
            )
            cid = self.api.create_container(
                image=image, command=command, entrypoint=entrypoint, user=user or "", host_config=host_config
            )["Id"]
            try:
                self.api.start(cid)
                code = self.api.wait(cid, timeout=60).get("StatusCode", -1)
                output = self.api.logs(cid, stdout=True, stderr=True).decode("utf-8", errors="replace")
            finally:
                self.api.remove_container(cid, force=True)
        return code, output

    def pull(self, reference: str, on_event: Callable[[JsonObject], None] | None = None) -> None:
        """Pull `repo:tag` or `repo@sha256:...`, passing each progress event (id, status,
        progressDetail) to `on_event`."""
        repository, tag = _split_reference(reference)
        try:
            with self._errors():
                for event in self.api.pull(repository, tag=tag, stream=True, decode=True):
                    if "error" in event:
                        raise DockerUnavailable(event["error"])
                    if on_event:
                        on_event(event)
        except DockerUnavailable as exc:
            raise DockerUnavailable(
                f"pulling {reference} failed: {exc}; check the name and tag, or the registry "
                "(build or load the image locally and use --pull never)"
            ) from None


class _EngineEvents:
    """Docker's event stream reduced to what watch needs: {"action", "alias", "container"}."""

    def __init__(self, stream: Stream, project: str):
        self._stream, self._project = stream, project

    def __iter__(self) -> Iterator[dict[str, str]]:
        for raw in self._stream:
            event = docker_answers.event(raw)
            attributes = obj(obj(event.get("Actor")).get("Attributes"))
            alias = attributes.get(labels.MODEL)
            if not isinstance(alias, str) or attributes.get("name") != engine_names(self._project, alias)[0]:
                continue  # another name carrying the labels is not the model's container
            status = event.get("status")
            if isinstance(status, str) and status in ("die", "start"):
                yield {"action": status, "alias": alias, "container": text(event.get("id"))}

    def close(self) -> None:
        self._stream.close()


def _split_reference(reference: str) -> tuple[str, str]:
    """`repo:tag` -> (repo, tag); `repo@sha256:...` -> (repo, the digest), as the API's pull takes it."""
    repository, _, tag = reference.partition("@") if "@" in reference else reference.rpartition(":")
    return repository, tag


def _device_requests(gpus: str | tuple[int, ...]) -> list[object] | None:
    from docker.types import DeviceRequest

    if gpus == "none":
        return None
    if gpus == "all":
        return [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    return [DeviceRequest(device_ids=[str(g) for g in gpus], capabilities=[["gpu"]])]


def _explain(exc: Exception, where: str | None) -> str:
    text = visible(str(exc))  # DOCKER_HOST and what the SDK says of it: each stays on its line
    where = docker_http.shown_host(where or "unix:///var/run/docker.sock")
    if "Permission denied" in text or isinstance(exc, PermissionError):
        return (
            f"permission denied on the Docker socket ({where}); add your user to the docker group "
            "(sudo usermod -aG docker $USER, then log in again)"
        )
    if "No such file" in text or "Connection refused" in text or "connection" in text.lower():
        return (
            f"cannot reach the Docker engine at {where}; start it (sudo systemctl start docker), "
            "or point DOCKER_HOST at a running engine or Podman's Docker-compatible socket"
        )
    return f"Docker engine at {where}: {text}"
