"""`aigo-apply logs` on a cluster: the output of the project's pods (each model's engine container,
the router's), found by the project's label selector and each pod's name and component labels, read
or followed by platforms/log_follow.py (a rollout's new pod is followed from its first line).

The values of the file's secret references that this host can resolve, and its Hugging Face
tokens, are remembered for redaction before a line is printed (the pods get them from Secrets, which
are not read back)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import datetime

from aigo_apply.adapters.kube_client import KubeClient
from aigo_apply.config.kube_names import COMPONENT, NAME, label_value
from aigo_apply.desired.types import DesiredState, SecretRef
from aigo_apply.errors import AigoError, UsageProblem
from aigo_apply.json_types import JsonMap, obj, text
from aigo_apply.platforms import log_follow
from aigo_apply.platforms.kubernetes.observe import selector
from aigo_apply.platforms.log_follow import ROUTER, Source
from aigo_apply.platforms.platform import LogStream
from aigo_apply.platforms.requests import LogsRequest
from aigo_apply.platforms.secrets import host_hub_tokens, resolve

CONTAINERS = {"model": "engine", "router": "router"}  # a pod's component -> the container shown


def sources(client: KubeClient, project: str, desired: DesiredState) -> list[Source]:
    """Every pod of the project: an engine's under its model's alias (its name label), the router's."""
    aliases = {label_value(a): a for a in desired.models}
    found: list[Source] = []
    for pod in client.list("Pod", labels=selector(project)):
        meta, status = obj(pod.get("metadata")), obj(pod.get("status"))
        marks = obj(meta.get("labels"))
        component = marks.get(COMPONENT)
        name = ROUTER if component == "router" else aliases.get(text(marks.get(NAME))) if component == "model" else None
        pod_name = meta.get("name")
        if name is None or not isinstance(pod_name, str):
            continue
        found.append(Source(name, pod_name, _created(meta), status.get("phase") == "Running"))
    return found


def _created(meta: JsonMap) -> float:
    try:
        return datetime.fromisoformat(str(meta.get("creationTimestamp")).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def remember_secrets(desired: DesiredState) -> None:
    """The file's secret references this host can resolve (resolving remembers them) and its tokens."""
    host_hub_tokens()
    for alias, model in desired.models.items():
        for name, value in model.container.env:
            if isinstance(value, SecretRef):
                try:
                    resolve(value, f"models.{alias}.env.{name}")
                except AigoError:
                    continue  # not resolvable here: apply could not have sent it from here either


def log_stream(client: KubeClient, project: str, desired: DesiredState, request: LogsRequest) -> LogStream:
    """The asked names checked before anything is read, the secrets remembered, then the lines."""
    if request.failed:
        raise UsageProblem(
            "logs --failed reads the logs apply keeps of failed starts on Docker; on a cluster, a pod that "
            "failed to start keeps its log: use `kubectl logs --previous`"
        )
    wanted = log_follow.check_names(request.names, sorted(desired.models), project)
    remember_secrets(desired)
    since = None if request.since_s is None else time.time() - request.since_s

    def open_lines(source: Source, follow: bool, tail: int | None, since: float | None) -> Iterator[str]:
        container = CONTAINERS["router" if source.name == ROUTER else "model"]
        seconds = None if since is None else max(1, int(time.time() - since) + 1)
        return client.log_lines(source.key, container, follow, tail, seconds)

    def listed() -> list[Source]:
        return log_follow.ordered(sources(client, project, desired), wanted)

    if request.follow:
        lines = log_follow.follow(listed, open_lines, request.tail, since, threading.Event())
    else:
        lines = log_follow.read(listed(), open_lines, request.tail, since)
    return LogStream(several=len(wanted) != 1, lines=lines)
