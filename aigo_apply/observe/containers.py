"""What runs now, as plain records parsed from the Docker API's JSON (pure: tested on recorded
responses). One list call returns every container with its labels, state and published ports,
so reading the machine costs the same for 1 model or 200.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from aigo_apply.desired import labels as L
from aigo_apply.desired.types import canonical_json

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
    ports: tuple[tuple[str, int, int], ...] = ()  # (host ip, host port, container port), running only

    @property
    def alias(self) -> str | None:
        return self.labels.get(L.MODEL)

    @property
    def role(self) -> str | None:
        return self.labels.get(L.ROLE)

    @property
    def spec(self) -> dict[str, Any] | None:
        return L.read_spec(self.labels)

    @property
    def spec_hash(self) -> str | None:
        return self.labels.get(L.SPEC_HASH)

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
    model_files: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def engines(self) -> tuple[ObservedContainer, ...]:
        return tuple(c for c in self.ours if c.role != L.ROLE_ROUTER)

    @property
    def router(self) -> ObservedContainer | None:
        return next((c for c in self.ours if c.role == L.ROLE_ROUTER), None)

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


def parse_container(raw: dict[str, Any]) -> ObservedContainer:
    """One entry of GET /containers/json?all=1."""
    names = raw.get("Names") or []
    name = names[0].lstrip("/") if names else raw.get("Id", "")[:12]
    status = raw.get("Status") or ""
    match = _EXIT.match(status)
    ports = tuple(
        sorted(
            (p.get("IP", ""), int(p["PublicPort"]), int(p.get("PrivatePort", 0)))
            for p in raw.get("Ports") or []
            if p.get("PublicPort")
        )
    )
    return ObservedContainer(
        id=raw.get("Id", ""),
        name=name,
        state=raw.get("State") or "unknown",
        status=status,
        exit_code=int(match.group(1)) if match else None,
        image=raw.get("Image", ""),
        image_id=raw.get("ImageID", ""),
        labels=dict(raw.get("Labels") or {}),
        ports=ports,
    )


def parse_images(raw: list[dict[str, Any]]) -> dict[str, str]:
    """GET /images/json -> {"repo:tag": image id} for every tag present locally."""
    found = {}
    for image in raw:
        for tag in image.get("RepoTags") or []:
            if tag and tag != "<none>:<none>":
                found[tag] = image.get("Id", "")
    return found


def parse_state(
    project: str,
    containers: list[dict[str, Any]],
    images: list[dict[str, Any]],
    router_files: dict[str, str] | None = None,
    model_files: dict[str, dict[str, Any]] | None = None,
) -> ObservedState:
    ours: list[ObservedContainer] = []
    others: list[ObservedContainer] = []
    for raw in containers:
        container = parse_container(raw)
        (ours if L.is_ours(container.labels, project) else others).append(container)
    key = lambda c: c.name
    return ObservedState(
        project,
        tuple(sorted(ours, key=key)),
        tuple(sorted(others, key=key)),
        parse_images(images),
        frozenset(i.get("Id", "") for i in images if i.get("Id")),
        dict(router_files or {}),
        dict(model_files or {}),
    )


def running_engines(project: str, containers: list[dict[str, Any]]) -> dict[str, str]:
    """alias -> container id of this project's engine containers that are running now."""
    out = {}
    for raw in containers:
        c = parse_container(raw)
        if c.state == "running" and c.alias and c.role != L.ROLE_ROUTER and L.is_ours(c.labels, project):
            out[c.alias] = c.id
    return out
