"""Host ports, checked at plan time: the router's address and each engine's published port against
the sockets that listen on this host (observe/listeners.py: any program, not only a container). A
port something else holds is a blocking readiness check (`host.port`) naming the port, the address
and, where the host says, the process, before anything is created: otherwise the router could not
bind it and Docker would restart it forever, while the other program answered in its place.

Not a clash: a port this project's own containers hold (the running router on the host network,
an engine's port that Docker publishes through docker-proxy). A port another container publishes,
or another project's router holds, is the planner's `conflict.port` already (plan/planner.py); it
is not said twice. Pure: the sockets come in as data."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from aigo_apply.desired import labels as L
from aigo_apply.desired.types import DesiredState
from aigo_apply.observe.containers import ObservedState
from aigo_apply.observe.listeners import Listener, overlaps
from aigo_apply.plan.host_checks import Check

CHECK_ID = "host.port"


@dataclass(frozen=True)
class Wanted:
    """An address:port the file asks this host to listen on, and the setting that chose the port."""

    setting: str  # router.port | models.ALIAS.port
    bind: str
    port: int


def wanted(desired: DesiredState) -> list[Wanted]:
    """The router's bind and port, and each model's published port (on 127.0.0.1: engine.py)."""
    out = [Wanted("router.port", str(desired.router.spec.get("bind", "")), desired.router.port)]
    for alias, model in sorted(desired.models.items()):
        container = model.container
        if container.host_port is not None and container.network_mode != "host":
            out.append(Wanted(f"models.{alias}.port", container.host_ip, container.host_port))
    return out


def clashes(
    wants: Iterable[Wanted], observed: ObservedState, listeners: Iterable[Listener]
) -> list[tuple[Wanted, Listener]]:
    """Each listening socket that takes a wanted port from its address and that no container Docker
    lists holds (ours, which is no clash, or another's, which conflict.port names)."""
    held = _held_by_containers(observed)
    sockets = [s for s in listeners if not any(p == s.port and overlaps(ip, s.address) for ip, p in held)]
    return [(w, s) for w in wants for s in sockets if s.port == w.port and overlaps(s.address, w.bind)]


def port_checks(found: Iterable[tuple[Wanted, Listener]]) -> list[Check]:
    """One blocking check per setting whose port is taken, naming every socket that takes it."""
    by_setting: dict[Wanted, list[Listener]] = {}
    for want, socket in found:
        by_setting.setdefault(want, []).append(socket)
    checks = []
    for want, sockets in by_setting.items():
        said = "; ".join(f"{s.shown} is already in use by {_who(s)}" for s in sorted(sockets, key=_order))
        checks.append(
            Check(
                CHECK_ID,
                "blocking",
                f"{want.setting} {want.port}: {said}",
                f"stop it, or choose another {want.setting}"
                + (
                    ""
                    if all(s.pid for s in sockets)
                    else f" (`sudo ss -ltnp 'sport = :{want.port}'` names the program)"
                ),
            )
        )
    return checks


def _held_by_containers(observed: ObservedState) -> set[tuple[str, int]]:
    """(address, port) of every socket a container Docker lists can hold on this host: the ports
    Docker publishes for running containers (docker-proxy listens on them), every other container's
    router's port (the planner blocks those), and this project's routers' own only while running (a
    router that restarts because it cannot bind holds nothing; the program in its place does)."""
    held = {(ip, port) for c in observed.others for ip, port, _ in c.ports}
    for c in observed.ours:
        if c.role != L.ROLE_ROUTER or c.state == "running":
            held |= {(ip, port) for ip, port, _ in c.ports}
    return held


def _who(socket: Listener) -> str:
    if socket.pid is None:
        return "a program this user cannot see (another user's: only root can tell which)"
    name = socket.process or "a process"
    if socket.process == "docker-proxy":
        return f"docker-proxy (pid {socket.pid}), for a container this Docker engine does not list"
    return f"{name} (pid {socket.pid})"


def _order(socket: Listener) -> tuple[int, str]:
    return (":" in socket.address, socket.address)
