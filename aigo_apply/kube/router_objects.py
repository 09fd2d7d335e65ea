"""The router on a cluster: the very HAProxy files the Docker router serves (router/haproxy.py), with
each engine addressed by its Service's DNS name, in a ConfigMap; a Deployment and a Service.

A route change must drop no request. The files come as one ConfigMap whose content hash is an
annotation of the pod template, so changed files roll a new router pod; the rolling update keeps
maxUnavailable 0, so the new pod is ready before the old one is told to go; the old one first
pauses (the Service stops sending it connections), then soft-stops (SIGUSR1: it finishes what it
serves, until the pod's grace period ends), as a reload does on Docker.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

from aigo_apply.config import kube_names as names
from aigo_apply.desired.engines.router import LIVE
from aigo_apply.desired.types import DesiredState, SecretRef, canonical_json
from aigo_apply.json_types import JsonObject, JsonValue
from aigo_apply.kube.engine_pod import PORT_NAME
from aigo_apply.kube.secrets import API_KEYS_KEY, secret_object
from aigo_apply.kube.settings import KubeSettings
from aigo_apply.router.haproxy import render_files
from aigo_apply.router.render_key import served_files

POD_PORT = 8000  # the router listens here in its pod; the Service publishes router.port
CONFIG_HASH = "aigo-apply.io/config-hash"
SOFT_STOP = "sleep 5; kill -USR1 1; sleep 65"  # pause, then HAProxy's soft stop; the grace period ends it
GRACE_SECONDS = 75
# A CPU request is the router's weight on its node (the kubelet sets the cgroup's CPU weight from it), as
# ROUTER_CPU_SHARES is on Docker: engine pods request GPUs only and run at the lowest weight, so when they
# keep the node's CPUs busy the router is still scheduled first. It also reserves that much for the router.
CPU_REQUEST = "100m"


def addresses(desired: DesiredState, settings: KubeSettings) -> dict[str, str]:
    """alias -> the model Service's DNS name and port, the router's backend addresses."""
    return {
        route.alias: f"{names.model_name(desired.project, route.alias)}.{settings.namespace}.svc."
        f"{settings.cluster_domain}:{route.port}"
        for route in desired.router.routes
    }


def config_files(desired: DesiredState, settings: KubeSettings) -> dict[str, str]:
    """The router's files by relative name. HAProxy listens on every address of its pod (who may
    reach it is the Service's business). The render key is left out: it hashes this tool's code,
    and the ConfigMap is compared as it is."""
    router = replace(desired.router.settings, bind="0.0.0.0", port=POD_PORT)
    return served_files(render_files(router, list(desired.router.routes), LIVE, addresses(desired, settings)))


def config_key(path: str) -> str:
    """A file's key in the ConfigMap (keys hold no '/'; the volume puts each file at its path)."""
    return path.replace("/", "_")


def objects(desired: DesiredState, settings: KubeSettings) -> list[JsonObject]:
    """The router's Secret (with api_keys), ConfigMap, Service and Deployment, without annotations."""
    project, spec = desired.project, desired.router.spec
    name = names.router_name(project)
    marks = names.labels(project, "router", "router")
    labels: JsonObject = {**marks}
    meta: JsonObject = {"name": name, "namespace": settings.namespace, "labels": labels}
    files = config_files(desired, settings)
    out: list[JsonObject] = []
    sources: list[JsonValue] = [
        {"configMap": {"name": name, "items": [{"key": config_key(p), "path": p} for p in sorted(files)]}}
    ]
    if api_keys := spec.get("api_keys"):
        ref = SecretRef(*next(iter(api_keys.items())))
        out.append(secret_object(name, settings.namespace, marks, {API_KEYS_KEY: ref}))
        sources.append({"secret": {"name": name, "items": [{"key": API_KEYS_KEY, "path": API_KEYS_KEY}]}})
    data: JsonObject = {config_key(p): text for p, text in sorted(files.items())}
    out.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": dict(meta), "data": data})
    out.append(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": dict(meta),
            "spec": {
                "type": "ClusterIP",
                "selector": labels,
                "ports": [{"name": PORT_NAME, "port": spec["port"], "targetPort": PORT_NAME, "protocol": "TCP"}],
            },
        }
    )
    digest = "sha256:" + hashlib.sha256(canonical_json(data).encode()).hexdigest()
    container: JsonObject = {
        "name": "router",
        "image": spec["image"],
        "command": list(desired.router.container.entrypoint or ("haproxy",)),
        "args": list(desired.router.container.command),
        "ports": [{"name": PORT_NAME, "containerPort": POD_PORT, "protocol": "TCP"}],
        "readinessProbe": {
            "httpGet": {"path": "/health", "port": PORT_NAME},
            "periodSeconds": 2,
            "timeoutSeconds": 2,
            "failureThreshold": 2,
        },
        "lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", SOFT_STOP]}}},
        "resources": {"requests": {"cpu": CPU_REQUEST}},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "config", "mountPath": LIVE, "readOnly": True}],
    }
    pod: JsonObject = {
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": GRACE_SECONDS,
    }
    if settings.tolerations:  # GPU-only clusters taint their nodes; the router goes wherever it fits
        pod["tolerations"] = [t.to_dict() for t in settings.tolerations]
    pod["containers"] = [container]
    pod["volumes"] = [{"name": "config", "projected": {"defaultMode": 0o444, "sources": sources}}]
    out.append(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": dict(meta),
            "spec": {
                "replicas": 1,
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
                "revisionHistoryLimit": 3,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels, "annotations": {CONFIG_HASH: digest}}, "spec": pod},
            },
        }
    )
    return out
