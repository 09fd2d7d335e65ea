"""The Docker engine's answers, read into the shapes the rest of the tool relies on (pure).

An answer comes from whatever listens on DOCKER_HOST: Docker, Podman, a proxy, or something that only
looks like one. So every field the tool reads is read for its type: a field of an unexpected type
reads as absent (a `Runtimes` that is a string lists no runtime, a tag that is not text is no tag;
fields nobody reads are left as they are, so a well-formed answer reads as itself), and an answer
whose whole shape is wrong (a container list that is not a list, an /info that is not an object) is a
DockerUnavailable naming the request, never a traceback. adapters/docker_engine.py passes each answer
through here once, where it comes in; tests/unit/observe/test_outside_answers.py holds these with arbitrary
JSON."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypedDict

from aigo_apply.errors import DockerUnavailable
from aigo_apply.json_types import JsonObject, JsonValue, maybe_text

Reader = Callable[[JsonValue], JsonValue]  # a field's value -> its typed value, or None: the field reads as absent


class ContainerConfig(TypedDict, total=False):
    """What a container was created with (`container_config`): its environment, NAME -> value, and
    its command line after the entry point; {} when the container is gone."""

    env: dict[str, str]
    cmd: list[str]


def _strings(value: JsonValue) -> list[str] | None:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else None


def _texts(value: JsonValue) -> list[JsonValue] | None:
    strings = _strings(value)
    return None if strings is None else list(strings)


def _integer(value: JsonValue) -> int | None:
    return value if type(value) is int else None


def _flag(value: JsonValue) -> bool | None:
    return value if isinstance(value, bool) else None


def _text_map(value: JsonValue) -> JsonObject | None:
    if not isinstance(value, dict):
        return None
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def _objects(fields: Mapping[str, Reader]) -> Reader:
    """A list of objects, each read by `fields` (entries that are not objects are left out)."""

    def read(value: JsonValue) -> list[JsonValue] | None:
        return [_typed(v, fields) for v in value if isinstance(v, dict)] if isinstance(value, list) else None

    return read


def _typed(raw: JsonObject, fields: Mapping[str, Reader]) -> JsonObject:
    """`raw` with each field of `fields` it has read by its reader: dropped when of another type.
    Fields nobody reads are kept as they are, so a well-formed answer reads as itself."""
    out = dict(raw)
    for key, read in fields.items():
        if key in out and (value := read(out[key])) is not None:
            out[key] = value
        else:
            out.pop(key, None)
    return out


def _seconds(value: JsonValue) -> int | None:
    """A Unix time in seconds: an int that a float holds (a JSON integer of 400 digits overflowed
    float() where a container's age is worked out)."""
    return value if type(value) is int and 0 <= value < 2**53 else None


def _created(value: JsonValue) -> str | int | None:
    return value if isinstance(value, (str, int)) and not isinstance(value, bool) else None


def _runtimes(value: JsonValue) -> JsonObject | None:
    if not isinstance(value, dict):
        return None
    return {k: r if isinstance(r, dict) else {} for k, r in value.items() if isinstance(k, str)}


def _health(value: JsonValue) -> JsonObject | None:
    return _typed(value, {"Status": maybe_text}) if isinstance(value, dict) else None


def _actor(value: JsonValue) -> JsonObject | None:
    return _typed(value, {"Attributes": _text_map}) if isinstance(value, dict) else None


_PORT = {"IP": maybe_text, "Type": maybe_text, "PublicPort": _integer, "PrivatePort": _integer}
CONTAINER = {
    **dict.fromkeys(("Id", "State", "Status", "Image", "ImageID"), maybe_text),
    "Names": _texts,
    "Labels": _text_map,
    "Ports": _objects(_PORT),
    "Created": _seconds,
}
IMAGE = {
    "Id": maybe_text,
    "RepoTags": _texts,
    "RepoDigests": _texts,
    "Created": _created,
    "Size": _integer,
}
INFO = {
    **dict.fromkeys(("ServerVersion", "Name", "OperatingSystem"), maybe_text),
    "Components": _objects({"Name": maybe_text, "Version": maybe_text}),
    "Runtimes": _runtimes,
    "DiscoveredDevices": _objects({"Source": maybe_text, "ID": maybe_text}),
}
STATE = {
    **dict.fromkeys(("Running", "Paused", "Restarting", "OOMKilled", "Dead"), _flag),
    **dict.fromkeys(("Status", "Error", "StartedAt", "FinishedAt"), maybe_text),
    "ExitCode": _integer,
    "Health": _health,
}
EVENT = {
    "status": maybe_text,
    "id": maybe_text,
    "Actor": _actor,
}


def _kind(value: object) -> str:
    names = {dict: "an object", list: "a list", str: "text", bool: "a boolean", int: "a number", float: "a number"}
    return names.get(type(value), "null")


def _refuse(request: str, value: object, expected: str) -> DockerUnavailable:
    return DockerUnavailable(
        f"the Docker engine answered {request} with {_kind(value)}, not {expected}; check that DOCKER_HOST "
        "names a Docker (or Podman) engine"
    )


def container_list(raw: object) -> list[JsonObject]:
    """GET /containers/json: a list of containers (entries that are not objects are left out)."""
    if not isinstance(raw, list):
        raise _refuse("GET /containers/json", raw, "a list of containers")
    return [_typed(c, CONTAINER) for c in raw if isinstance(c, dict)]


def image_list(raw: object) -> list[JsonObject]:
    """GET /images/json: each image's id, tags and digests (the tags and digests that are text)."""
    if not isinstance(raw, list):
        raise _refuse("GET /images/json", raw, "a list of images")
    return [_typed(i, IMAGE) for i in raw if isinstance(i, dict)]


def image_inspection(raw: object) -> JsonObject:
    """GET /images/{ref}/json: the image's id, digests, creation time and size."""
    if not isinstance(raw, dict):
        raise _refuse("GET /images/{name}/json", raw, "an image object")
    return _typed(raw, IMAGE)


def info(raw: object) -> JsonObject:
    """GET /info: the fields the host checks read (adapters/host.docker_facts_from_info), each of its own type."""
    if not isinstance(raw, dict):
        raise _refuse("GET /info", raw, "an object")
    return _typed(raw, INFO)


def container_state(raw: object) -> JsonObject:
    """The `State` object of GET /containers/{id}/json ({} when there is none)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise _refuse("GET /containers/{id}/json", raw, "a State object")
    return _typed(raw, STATE)


def event(raw: object) -> JsonObject:
    """One entry of GET /events, its status, id and actor attributes read for their type ({} for none)."""
    return _typed(raw, EVENT) if isinstance(raw, dict) else {}


def container_config(raw: object) -> ContainerConfig:
    """From GET /containers/{id}/json: the environment (`env`, NAME -> value) and the command line
    after the entry point (`cmd`), each read for its type (missing or odd: empty)."""
    config = raw.get("Config") if isinstance(raw, dict) else None
    config = config if isinstance(config, dict) else {}
    pairs = _strings(config.get("Env")) or []
    return {
        "env": {name: value for name, _, value in (p.partition("=") for p in pairs)},
        "cmd": _strings(config.get("Cmd")) or [],
    }
