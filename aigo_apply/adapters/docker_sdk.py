"""The docker SDK's low-level client (docker.APIClient) as adapters/docker_engine.py and
adapters/docker_volumes.py call it: the SDK ships no type information, so this Protocol says which
methods the adapter uses and what each hands back, as the Engine API documents it. An answer whose
shape the adapter checks (a container's inspection, /info, a list) is JsonValue, read through
observe/docker_answers.py; the few fields read as they come (a new container's or exec's `Id`, an exit
code) have their documented types here."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Literal, Protocol, TypedDict, overload

from aigo_apply.json_types import JsonObject, JsonValue


class Created(TypedDict):
    """POST /containers/create and POST /containers/{id}/exec: the new object's id."""

    Id: str


class ExecState(TypedDict, total=False):
    """GET /exec/{id}/json: the exit code (null while the command runs)."""

    ExitCode: int | None


class WaitAnswer(TypedDict, total=False):
    """POST /containers/{id}/wait: the container's exit code."""

    StatusCode: int


class Stream(Protocol):
    """A decoded event stream (GET /events): its entries, until `close()` (from any thread) ends it."""

    def __iter__(self) -> Iterator[JsonValue]: ...
    def close(self) -> None: ...


class DockerAPI(Protocol):
    """docker.APIClient, for the methods this tool calls."""

    hooks: dict[str, list[Callable[..., object]]]  # requests' hooks: `response` counts the calls

    # reads
    def containers(self, all: bool = False) -> JsonValue: ...
    def images(self) -> JsonValue: ...
    def info(self) -> JsonValue: ...
    def inspect_container(self, container: str) -> JsonValue: ...
    def inspect_image(self, image: str) -> JsonValue: ...
    def top(self, container: str) -> JsonValue: ...
    def events(self, filters: Mapping[str, object] | None = None, decode: bool = False) -> Stream: ...
    @overload
    def logs(
        self,
        container: str,
        stdout: bool = True,
        stderr: bool = True,
        stream: Literal[False] = False,
        tail: int | str = "all",
    ) -> bytes: ...
    @overload
    def logs(
        self,
        container: str,
        *,
        stream: Literal[True],
        follow: bool,
        tail: int | str,
        since: float | None,
    ) -> Iterator[bytes]: ...

    # images
    def tag(self, image: str, repository: str, tag: str | None = None, force: bool = False) -> bool: ...
    def pull(self, repository: str, tag: str, stream: Literal[True], decode: Literal[True]) -> Iterator[JsonObject]: ...

    # containers
    def create_host_config(self, **options: object) -> JsonObject: ...
    def create_container(
        self,
        image: str,
        command: list[str],
        name: str | None = None,
        environment: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
        ports: list[int | None] | None = None,
        entrypoint: list[str] | None = None,
        user: str = "",
        host_config: JsonObject | None = None,
    ) -> Created: ...
    def start(self, container: str) -> None: ...
    def unpause(self, container: str) -> None: ...
    def stop(self, container: str, timeout: int | None = None) -> None: ...
    def remove_container(self, container: str, force: bool = False) -> None: ...
    def rename(self, container: str, name: str) -> None: ...
    def kill(self, container: str, signal: str | None = None) -> None: ...
    def wait(self, container: str, timeout: int | None = None) -> WaitAnswer: ...
    def exec_create(self, container: str, cmd: list[str], stdout: bool = True, stderr: bool = True) -> Created: ...
    def exec_start(self, exec_id: str) -> bytes: ...
    def exec_inspect(self, exec_id: str) -> ExecState: ...

    # volumes
    def create_volume(self, name: str, labels: dict[str, str] | None = None) -> JsonValue: ...
    def inspect_volume(self, name: str) -> JsonValue: ...
    def volumes(self) -> JsonValue: ...
    def remove_volume(self, name: str, force: bool = False) -> None: ...
