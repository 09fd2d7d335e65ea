"""JSON as the type checker sees it: what a daemon, an API server, a label or a saved file hands over
before its shape is checked. Code that reads such data narrows it (isinstance, or the helpers below)
instead of trusting it as `Any`, so a wrong guess about a field's shape is a type error here, not a
traceback on a user's machine."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeGuard

JsonScalar = str | int | float | bool | None
JsonValue = JsonScalar | list["JsonValue"] | dict[str, "JsonValue"]
JsonObject = dict[str, JsonValue]
JsonMap = Mapping[str, JsonValue]  # read-only view of an object, for parameters


def obj(value: object) -> JsonObject:
    """`value` if it is a JSON object, else an empty one: for the optional parts of an answer
    (`"Labels": null`, a missing `"State"`) that a reader treats as absent."""
    return value if isinstance(value, dict) else {}


def arr(value: object) -> list[JsonValue]:
    """`value` if it is a JSON array, else an empty one (a missing or null list is no items)."""
    return value if isinstance(value, list) else []


def text(value: object, default: str = "") -> str:
    """`value` if it is a string, else `default` (a missing or null field)."""
    return value if isinstance(value, str) else default


def maybe_text(value: object) -> str | None:
    """`value` if it is a string, else None (a field that is absent, null or not text)."""
    return value if isinstance(value, str) else None


def number(value: object) -> int | None:
    """`value` if it is a whole number (never a bool), else None."""
    return value if type(value) is int else None


def is_json(value: object) -> TypeGuard[JsonValue]:
    """Whether `value` is JSON all the way down (text keys; None, bools, numbers, text, lists, objects)."""
    if value is None or isinstance(value, (str, int, float)):
        return True
    if isinstance(value, list):
        return all(is_json(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(key, str) and is_json(item) for key, item in value.items())
    return False


def json_object(value: Mapping[str, object]) -> JsonObject:
    """A record of this tool's (a TypedDict of JSON values) as a JsonObject, each value checked: a value
    that is not JSON is a TypeError here, not a wrong document further on."""
    out: object = dict(value)
    if is_json(out) and isinstance(out, dict):
        return out
    raise TypeError(f"not JSON: {value!r}")
