"""The Deployment and Service of one model: the Docker container's image, entrypoint, command line
(the one command-line builder, desired/engines/, used as the container's args exactly), environment
and mounts, in a pod shaped the way the charts that run vLLM on Kubernetes learned to shape it:

- one replica with strategy Recreate: a rolling update needs a spare GPU for the surge pod, and on a
  cluster without one it deadlocks (the new pod Pending on the GPU the old one holds);
- GPUs requested as the extended resource with request = limit (extended resources cannot overcommit);
- /dev/shm as an in-memory emptyDir: the cluster's `--ipc=host` (NCCL and PyTorch workers share memory);
- a startupProbe on /health whose budget (period x failures) is the model's ready_timeout, then a
  readinessProbe; no livenessProbe: a busy engine answering /health late must not be killed mid-stream;
- enableServiceLinks false: else a Service named like `vllm` injects VLLM_PORT, which vLLM reads as
  its own setting; no service account token, no privilege escalation;
- a preStop pause and a grace period, so requests in flight finish when the pod goes.
"""

from __future__ import annotations

import math

from aigo_apply.config import kube_names as names
from aigo_apply.config.env_names import SLEEP_MODE_ENV
from aigo_apply.config.kube_rules import LEADER_WORKER_SET, gpus_needed
from aigo_apply.desired.types import DesiredModel, SecretRef
from aigo_apply.errors import UnsafeSetting
from aigo_apply.json_types import JsonObject, JsonValue
from aigo_apply.kube.settings import KubeSettings
from aigo_apply.kube.storage import PodStorage

HEALTH = "/health"
PORT_NAME = "http"
PRE_STOP_SECONDS = 15  # the Service stops sending new requests while the engine still serves
GRACE_SECONDS = 45  # the pause above, then up to 30 s for the engine to finish and exit on SIGTERM
READINESS = {"periodSeconds": 5, "timeoutSeconds": 5, "failureThreshold": 3}


def gpu_count(model: DesiredModel, settings: KubeSettings) -> int:
    """GPUs the pod requests (kube_rules.gpus_needed), refused when no node has that many."""
    spec = model.spec
    count = gpus_needed(spec["gpus"], spec.get(spec["engine"], {}).get("tensor_parallel_size"))
    if count > settings.gpus_per_node:
        raise UnsafeSetting(
            f"model '{model.alias}' needs {count} GPUs, more than one node has "
            f"(kubernetes.gpus_per_node: {settings.gpus_per_node}); {LEADER_WORKER_SET}"
        )
    return count


def startup_probe(ready_timeout: float) -> JsonObject:
    """A probe whose budget, periodSeconds x failureThreshold, is exactly `ready_timeout` seconds
    (the period is the largest of 10, 5, 2, 1 that divides it)."""
    seconds = max(1, int(round(ready_timeout)))
    period = math.gcd(seconds, 10)
    return {
        "httpGet": {"path": HEALTH, "port": PORT_NAME},
        "periodSeconds": period,
        "timeoutSeconds": min(5, period),
        "failureThreshold": seconds // period,
    }


def _env(model: DesiredModel, secret: str) -> list[JsonValue]:
    out: list[JsonValue] = []
    for name, value in sorted(model.container.env):
        if name in SLEEP_MODE_ENV:  # vLLM's development endpoints: reachable by every pod through the Service
            raise UnsafeSetting(
                f"model '{model.alias}': {name} opens vLLM's development endpoints; on-demand models run on "
                "Docker only (nothing was rendered)"
            )
        if isinstance(value, SecretRef):
            out.append({"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": name}}})
        else:
            out.append({"name": name, "value": value})
    return out


def secret_env(model: DesiredModel) -> dict[str, SecretRef]:
    """The model's environment variables passed by reference: the keys of its Secret."""
    return {name: value for name, value in model.container.env if isinstance(value, SecretRef)}


def placement(alias: str | None, settings: KubeSettings) -> JsonObject:
    """Node selector and tolerations of a pod (the model's own node selector on top of the section's)."""
    out: JsonObject = {}
    selector = settings.node_selector_for(alias) if alias is not None else dict(settings.node_selector)
    if selector:
        out["nodeSelector"] = {**selector}
    if settings.tolerations:
        out["tolerations"] = [t.to_dict() for t in settings.tolerations]
    return out


def rollout_strategy(model: DesiredModel) -> JsonObject:
    """A GPU model's old pod goes before its new one starts (a surge pod would wait for a GPU the old
    one holds: the ledger cannot see a cluster's free GPUs); a model without GPUs rolls, the new pod
    taking traffic once ready, the old one leaving only then."""
    if model.spec["gpus"] == "none":
        return {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
    return {"type": "Recreate"}


def deployment(
    project: str, model: DesiredModel, settings: KubeSettings, storage: PodStorage, labels: dict[str, str]
) -> JsonObject:
    container = model.container
    if container.container_port is None:
        raise UnsafeSetting(f"model '{model.alias}': its engine listens on no port")
    engine: JsonObject = {"name": "engine", "image": container.image}
    if container.entrypoint is not None:
        engine["command"] = list(container.entrypoint)
    engine["args"] = list(container.command)
    engine["ports"] = [{"name": PORT_NAME, "containerPort": container.container_port, "protocol": "TCP"}]
    engine["env"] = _env(model, names.env_secret_name(project, model.alias))
    gpus = gpu_count(model, settings)
    if gpus:
        engine["resources"] = {
            "limits": {settings.gpu_resource: str(gpus)},
            "requests": {settings.gpu_resource: str(gpus)},
        }
    engine["volumeMounts"] = [*storage.mounts, {"name": "shm", "mountPath": "/dev/shm"}]
    engine["startupProbe"] = startup_probe(model.ready_timeout)
    engine["readinessProbe"] = {"httpGet": {"path": HEALTH, "port": PORT_NAME}, **READINESS}
    engine["lifecycle"] = {"preStop": {"sleep": {"seconds": PRE_STOP_SECONDS}}}
    engine["securityContext"] = {"allowPrivilegeEscalation": False}
    pod: JsonObject = {
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": GRACE_SECONDS,
    }
    if settings.runtime_class_name:
        pod["runtimeClassName"] = settings.runtime_class_name
    pod.update(placement(model.alias, settings))
    pod["containers"] = [engine]
    pod["volumes"] = [*storage.volumes, {"name": "shm", "emptyDir": {"medium": "Memory"}}]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": names.model_name(project, model.alias),
            "namespace": settings.namespace,
            "labels": {**labels},
        },
        "spec": {
            "replicas": 1,
            "strategy": rollout_strategy(model),
            "revisionHistoryLimit": 3,
            "selector": {"matchLabels": {**labels}},
            "template": {"metadata": {"labels": {**labels}}, "spec": pod},
        },
    }


def service(project: str, model: DesiredModel, settings: KubeSettings, labels: dict[str, str]) -> JsonObject:
    """A ClusterIP Service on the model's port (the router's backend address), to the engine's port."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": names.model_name(project, model.alias),
            "namespace": settings.namespace,
            "labels": {**labels},
        },
        "spec": {
            "type": "ClusterIP",
            "selector": {**labels},
            "ports": [{"name": PORT_NAME, "port": model.spec["port"], "targetPort": PORT_NAME, "protocol": "TCP"}],
        },
    }
