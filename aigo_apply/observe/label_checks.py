"""Labels read back from Docker are input, checked like the config: anyone who can run a container
can put this project's labels on it. A container whose identity labels the tool could not have
written (one missing or too long, an unknown version or role, a bad alias or engine) is damaged, and
so is one whose NAME is not the one the tool derives from those labels (an engine is only ever
`aigo-{project}-{alias}`, or that name + `-aigo-previous` while a replace keeps it; the router only
`aigo-{project}-router`): labels alone are not trusted, since anyone can copy them onto a container
named `evil`. A damaged container is not taken as this project's, and the plan names the container
and why. A spec label that does not read as a canonical spec reads as none (the container is then
replaced, as one made by hand), and never raises. Pure."""

from __future__ import annotations

import json
import re

from aigo_apply.config.engine_choice import ENGINE_NAMES
from aigo_apply.config.names import BACKUP_SUFFIX, NEXT_SUFFIX, ROUTER_WORD, container_name, reserved_problem
from aigo_apply.desired import labels as L
from aigo_apply.json_types import JsonObject, JsonValue

MAX_LABEL_CHARS = 65536  # a canonical spec is a few KiB; Docker itself allows far more
MAX_SPEC_DEPTH = 12
REQUIRED = (L.ROLE, L.LABELS_VERSION)
_ALIAS = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,254}")


def shown(value: str, most: int = 60) -> str:
    """A label value as a message may show it: escaped, and cut when long."""
    return ascii(value[:most]) + ("..." if len(value) > most else "")


def display_name(name: str) -> str:
    """A container name as a message shows it: as is when Docker could have made it, else escaped."""
    return name if _NAME.fullmatch(name) else shown(name)


def router_name(project: str) -> str:
    """The one name aigo-apply gives a project's router container."""
    return container_name(project, ROUTER_WORD)


def engine_names(project: str, alias: str) -> tuple[str, str]:
    """The names an engine container of `alias` can have: its own, and the kept copy of a replace."""
    name = container_name(project, alias)
    return name, name + BACKUP_SUFFIX


def next_name(project: str, alias: str) -> str:
    """The name of the new engine a parallel replace starts beside the serving one (renamed to its
    own name once the old one is gone)."""
    return container_name(project, alias) + NEXT_SUFFIX


def names_of(project: str, alias: str | None) -> tuple[str, ...]:
    """Every name aigo-apply gives a container of `alias` (the router's when None): the only names a
    plan may remove and a label may be trusted under."""
    if alias is None:
        return router_name(project), router_name(project) + NEXT_SUFFIX
    return (*engine_names(project, alias), next_name(project, alias))


def label_problem(name: str, labels: dict[str, str], project: str) -> str | None:
    """Why a container carrying this project's labels cannot be one the tool made, or None."""
    for key in REQUIRED:
        if key not in labels:
            return f"label {key} is missing"
    for key, value in sorted(labels.items()):
        if key.startswith(L.PREFIX) and len(value) > MAX_LABEL_CHARS:
            return f"label {key} is longer than {MAX_LABEL_CHARS} characters"
    version, role = labels[L.LABELS_VERSION], labels[L.ROLE]
    if version != L.CURRENT_LABELS_VERSION:
        return f"label {L.LABELS_VERSION} is {shown(version)}, not '{L.CURRENT_LABELS_VERSION}'"
    if role not in (L.ROLE_ENGINE, L.ROLE_ROUTER):
        return f"label {L.ROLE} is {shown(role)}, neither '{L.ROLE_ENGINE}' nor '{L.ROLE_ROUTER}'"
    if role == L.ROLE_ROUTER:
        return _router_problem(name, labels, project)
    return _engine_problem(labels) or _engine_name_problem(name, labels[L.MODEL], project)


def _router_problem(name: str, labels: dict[str, str], project: str) -> str | None:
    if name not in names_of(project, None):
        return f"it is labelled the router but is named {shown(name)}, not {router_name(project)}"
    if L.MODEL in labels:
        return f"it is labelled the router but also names a model in label {L.MODEL}"
    return None


def _engine_name_problem(name: str, alias: str, project: str) -> str | None:
    """An engine is trusted only under a name the tool derives from its labels."""
    if reserved_problem(project, alias):
        return f"label {L.MODEL} is {shown(alias)}, an alias that ends like a name aigo-apply keeps for itself"
    own, kept = engine_names(project, alias)
    if name not in names_of(project, alias):
        return (
            f"it is labelled model '{alias}' but is named {display_name(name)}, not {own} (the only name "
            f"aigo-apply gives that model, besides {kept} and {next_name(project, alias)} during a replace)"
        )
    return None


def _engine_problem(labels: dict[str, str]) -> str | None:
    alias, engine = labels.get(L.MODEL), labels.get(L.ENGINE)
    if alias is None:
        return f"label {L.MODEL} is missing"
    if not _ALIAS.fullmatch(alias):
        return f"label {L.MODEL} is {shown(alias)}, not a model alias"
    if engine not in ENGINE_NAMES:
        return f"label {L.ENGINE} is {shown(engine or '')}, not one of {', '.join(ENGINE_NAMES)}"
    if labels.get(L.SLOT, "b") != "b":
        return f"label {L.SLOT} is {shown(labels[L.SLOT])}, not 'b'"
    return None


def read_spec(text: str | None) -> JsonObject | None:
    """The canonical spec a label holds: a JSON object of bounded size and depth, else None."""
    if not isinstance(text, str) or len(text) > MAX_LABEL_CHARS:
        return None
    try:
        spec: JsonValue = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(spec, dict) or _depth(spec) > MAX_SPEC_DEPTH:
        return None
    return spec


def _depth(value: JsonValue) -> int:
    """How deep a JSON value nests, without recursion: one level of mappings and lists at a time
    (each spec of a plan is read with this, so its values are not visited one by one)."""
    deepest, layer = 0, [value]
    while layer:
        deepest += 1
        layer = [
            child
            for item in layer
            for child in (item.values() if isinstance(item, dict) else item if isinstance(item, list) else ())
            if isinstance(child, (dict, list))
        ]
    return deepest


def damaged_message(name: str, project: str, problem: str) -> str:
    """The plan's warning for a damaged container: which one, which label, what the tool does."""
    who = display_name(name)
    return (
        f"container {who} carries project '{project}' labels, but {problem}: aigo-apply did not make it "
        f"this way and leaves it alone (remove it with `docker rm -f {who}` if it is not needed)"
    )
