"""What runs now, as plain records parsed from the Docker API's JSON (pure: tested on recorded
responses). One list call returns every container with its labels, state and published ports,
so reading the machine costs the same for 1 model or 200. The answers are input: odd types never
raise, and a container with this project's labels counts as ours only when its labels are ones
the tool could have written AND its name is the one the tool derives from them
(observe/label_checks.py); otherwise it is damaged: one of the others, a warning, never acted on.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from aigo_apply.desired import labels as L
from aigo_apply.desired.types import canonical_json
from aigo_apply.json_types import JsonMap, JsonObject, JsonValue, arr, text
from aigo_apply.observe.label_checks import damaged_message, engine_names, label_problem, read_spec, router_name

_EXIT = re.compile(r"^Exited \((-?\d+)\)")


@dataclass(frozen=True)
class ObservedContainer:
    id: str
    name: str
    state: str  # created | running | paused | restarting | exited | dead | removing
    status: str
    exit_code: int | None
    image: str
    image_id: str
    labels: dict[str, str] = field(compare=False)
    # (host ip, host port, container port), running only; a router's own port too (_router_port)
    ports: tuple[tuple[str, int, int], ...] = ()
    created: float | None = field(default=None, compare=False)  # Unix time Docker created it
    volumes: tuple[str, ...] = field(default=(), compare=False)  # the named volumes it mounts

    @property
    def alias(self) -> str | None:
        return self.labels.get(L.MODEL)

    @property
    def role(self) -> str | None:
        return self.labels.get(L.ROLE)

    @property
    def spec(self) -> JsonObject | None:
        return read_spec(self.labels.get(L.SPEC))

    @property
    def spec_hash(self) -> str | None:
        return self.labels.get(L.SPEC_HASH)

    @property
    def slot(self) -> str:
        """Which of its model's two sockets the engine serves on (label_checks admits only "b")."""
        return "b" if self.labels.get(L.SLOT) == "b" else "a"

    @property
    def host_ports(self) -> set[int]:
        return {p[1] for p in self.ports}


@dataclass(frozen=True)
class ObservedState:
    """This project's containers, and the others (only looked at for name and port conflicts)."""

    project: str
    ours: tuple[ObservedContainer, ...]
    others: tuple[ObservedContainer, ...]
    images: dict[str, str] = field(default_factory=dict)  # local "repo:tag" -> image id
    image_ids: frozenset[str] = frozenset()  # every local image id, untagged ones too
    router_files: dict[str, str] = field(default_factory=dict)  # the router's live config folder
    # downloaded model folders: path -> what its completion marker says ({} for none); only the
    # folders the file names are looked at
    model_files: dict[str, dict[str, object]] = field(default_factory=dict)
    # containers with this project's labels that the tool could not have made: one warning each
    damaged: tuple[str, ...] = ()

    @property
    def engines(self) -> tuple[ObservedContainer, ...]:
        return tuple(c for c in self.ours if c.role != L.ROLE_ROUTER)

    @property
    def router(self) -> ObservedContainer | None:
        """The project's router under its own name (a router replace's new one, while both run, is
        `spare_routers`)."""
        name = router_name(self.project)
        return next((c for c in self.ours if c.role == L.ROLE_ROUTER and c.name == name), None)

    @property
    def spare_routers(self) -> tuple[ObservedContainer, ...]:
        """Router containers under the replace's temporary name: left by an interrupted replace."""
        name = router_name(self.project)
        return tuple(c for c in self.ours if c.role == L.ROLE_ROUTER and c.name != name)

    def fingerprint(self) -> str:
        """Changes whenever anything a plan was based on changes: our containers, the other
        containers' names and ports, and the local images."""
        basis = {
            "ours": sorted([c.id, c.name, c.state, c.spec_hash or "", c.image_id] for c in self.ours),
            "others": sorted([c.name, sorted(c.host_ports)] for c in self.others),
            "images": self.images,
            "router_files": self.router_files,
        }  # model_files are left out: a download step checks its folder again before fetching
        return "sha256:" + hashlib.sha256(canonical_json(basis).encode()).hexdigest()


def parse_container(raw: JsonMap) -> ObservedContainer:
    """One entry of GET /containers/json?all=1 (a value of an unexpected type reads as absent)."""
    cid = _text(raw.get("Id"))
    names = raw.get("Names")
    first = names[0] if isinstance(names, list) and names else None
    name = first.lstrip("/") if isinstance(first, str) else cid[:12]
    status = _text(raw.get("Status"))
    match = _EXIT.match(status)
    raw_labels = raw.get("Labels")
    labels = (
        {k: v for k, v in raw_labels.items() if isinstance(k, str) and isinstance(v, str)}
        if isinstance(raw_labels, dict)
        else {}
    )
    state = _text(raw.get("State")) or "unknown"
    return ObservedContainer(
        id=cid,
        name=name,
        state=state,
        status=status,
        exit_code=int(match.group(1)) if match else None,
        image=_text(raw.get("Image")),
        image_id=_text(raw.get("ImageID")),
        labels=labels,
        ports=_ports(raw.get("Ports")) + _router_port(state, raw.get("HostConfig"), labels),
        created=float(created) if isinstance(created := raw.get("Created"), int) and created >= 0 else None,
        volumes=_volumes(raw.get("Mounts")),
    )


def _volumes(mounts: JsonValue | None) -> tuple[str, ...]:
    """The names of the named volumes among a container's Mounts (anything else reads as none)."""
    if not isinstance(mounts, list):
        return ()
    names = {m.get("Name") for m in mounts if isinstance(m, dict) and m.get("Type") == "volume"}
    return tuple(sorted(n for n in names if isinstance(n, str)))


def _text(value: JsonValue | None) -> str:
    return text(value)


def _ports(raw: JsonValue | None) -> tuple[tuple[str, int, int], ...]:
    """(host ip, host port, container port) of each published port that reads as one."""
    found: list[tuple[str, int, int]] = []
    for p in arr(raw):
        public = p.get("PublicPort") if isinstance(p, dict) else None
        if isinstance(p, dict) and type(public) is int and 0 < public <= 65535:
            private = p.get("PrivatePort")
            found.append((_text(p.get("IP")), public, private if type(private) is int else 0))
    return tuple(sorted(found))


def _router_port(state: str, host: JsonValue | None, labels: dict[str, str]) -> tuple[tuple[str, int, int], ...]:
    """The port a running aigo-apply router (of any project) listens on. A router is on the host
    network, where Docker publishes nothing and HAProxy binds router.bind:router.port itself with
    SO_REUSEPORT: a second router on the same port binds it too, and the kernel then shares the
    connections between the two projects' routers. Its spec label says which port it holds, so
    the planner's port check sees it like any published port."""
    if router_project(labels) is None or state not in ("running", "restarting") or not isinstance(host, dict):
        return ()
    spec = read_spec(labels.get(L.SPEC))
    port, bind = (spec.get("port"), spec.get("bind")) if spec else (None, None)
    if host.get("NetworkMode") != "host" or type(port) is not int or not 0 < port <= 65535:
        return ()
    return ((bind if isinstance(bind, str) else "", port, port),)


def router_project(labels: dict[str, str]) -> str | None:
    """The project of a router that aigo-apply made (any project's), or None for any other container."""
    if labels.get(L.ROLE) != L.ROLE_ROUTER or labels.get(L.MANAGED_BY) != L.MANAGER:
        return None
    return labels.get(L.PROJECT)


def problem_of(container: ObservedContainer, project: str) -> str | None:
    """Why a container with this project's labels is damaged, or None (also None when not ours)."""
    if not L.is_ours(container.labels, project):
        return None
    return label_problem(container.name, container.labels, project)


def parse_images(raw: Iterable[JsonMap]) -> dict[str, str]:
    """GET /images/json -> {"repo:tag": image id} for every tag present locally."""
    found = {}
    for image in raw:
        for tag in arr(image.get("RepoTags")):
            if isinstance(tag, str) and tag and tag != "<none>:<none>":
                found[tag] = text(image.get("Id"))
    return found


def parse_state(
    project: str,
    containers: Iterable[JsonValue],
    images: Sequence[JsonMap],
    router_files: dict[str, str] | None = None,
    model_files: dict[str, dict[str, object]] | None = None,
) -> ObservedState:
    ours: list[ObservedContainer] = []
    others: list[ObservedContainer] = []
    damaged: list[str] = []
    for raw in containers:
        container = parse_container(raw if isinstance(raw, dict) else {})
        problem = problem_of(container, project)
        if problem:
            damaged.append(damaged_message(container.name, project, problem))
        (ours if L.is_ours(container.labels, project) and not problem else others).append(container)
    key = lambda c: c.name
    return ObservedState(
        project,
        tuple(sorted(ours, key=key)),
        tuple(sorted(others, key=key)),
        parse_images(images),
        frozenset(text(i.get("Id")) for i in images if i.get("Id")),
        dict(router_files or {}),
        dict(model_files or {}),
        tuple(sorted(damaged)),
    )


def running_engines(project: str, containers: Iterable[JsonValue]) -> dict[str, str]:
    """alias -> container id of this project's engine containers that are running now, each under
    its own name (a kept copy of a replace, or a container named otherwise, is not the model's)."""
    out = {}
    for raw in containers:
        c = parse_container(raw if isinstance(raw, dict) else {})
        if c.state != "running" or c.role != L.ROLE_ENGINE or not L.is_ours(c.labels, project):
            continue
        if c.alias and problem_of(c, project) is None and c.name == engine_names(project, c.alias)[0]:
            out[c.alias] = c.id
    return out
