"""Every Kubernetes object of a deployment, from the desired state and the `kubernetes:` settings: the
one entry point `render --as kubernetes` and the apply path share. Pure: plain dicts (apiVersion,
kind, metadata, spec), no cluster, no environment, no secret values; the same inputs always give the
same objects, in the order they can be applied (Secrets, volumes, Jobs, ConfigMaps, Services,
Deployments).

Labels (app.kubernetes.io/*) select the project's objects; annotations carry what the Docker labels
carry (desired/labels.py: the canonical spec as JSON, the spec hash, the alias), so the shared
planner diffs a model field by field on either platform. The spec hash is of every object of the
model (or of the router) as rendered here, so any change to what a cluster would run shows.
"""

from __future__ import annotations

import hashlib
import json

from aigo_apply.config import kube_names as names
from aigo_apply.desired import labels as state
from aigo_apply.desired.build import served_on_ports
from aigo_apply.desired.types import DesiredModel, DesiredState, canonical_json
from aigo_apply.errors import UsageProblem
from aigo_apply.json_types import JsonObject
from aigo_apply.json_types import obj as _dict
from aigo_apply.kube import engine_pod, router_objects, specs, storage
from aigo_apply.kube.secrets import HUB_TOKEN_KEY, secret_object
from aigo_apply.kube.settings import KubeSettings

KIND_ORDER = ("Secret", "PersistentVolumeClaim", "Job", "ConfigMap", "Service", "Deployment")


def objects(desired: DesiredState, settings: KubeSettings) -> list[JsonObject]:
    """Every object of the deployment: each model's, the router's, the Hugging Face token's Secret."""
    desired = served_on_ports(desired)
    out = [obj for alias in sorted(desired.models) for obj in _model_objects(desired, settings, alias)]
    out += router(desired, settings)
    if any(storage.downloads(m) for m in desired.models.values()):
        out.append(hub_secret(desired.project, settings))
    return ordered(out, desired.project)


def selected(desired: DesiredState, settings: KubeSettings, alias: str | None) -> list[JsonObject]:
    """What `render --as kubernetes [ALIAS]` prints: every object, the router's, or one model's."""
    if alias is None:
        return objects(desired, settings)
    if alias == "router":
        return router(desired, settings)
    return objects_for_model(desired, settings, alias)


def objects_for_model(desired: DesiredState, settings: KubeSettings, alias: str) -> list[JsonObject]:
    """One model's objects (with the Hugging Face token's Secret when its Job downloads)."""
    desired = served_on_ports(desired)
    if alias not in desired.models:
        shown = alias if alias.isprintable() and len(alias) <= 64 else repr(alias[:64])
        raise UsageProblem(f"no model {shown} in {desired.file}; models: {', '.join(sorted(desired.models)) or 'none'}")
    out = _model_objects(desired, settings, alias)
    if storage.downloads(desired.models[alias]):
        out.append(hub_secret(desired.project, settings))
    return ordered(out, desired.project)


def router(desired: DesiredState, settings: KubeSettings) -> list[JsonObject]:
    """The router's objects; its Deployment records the router's spec and the hash of them all."""
    desired = served_on_ports(desired)
    out = router_objects.objects(desired, settings)
    spec = specs.router_spec(desired.router)
    digest = _hash(out)
    for obj in out:
        extra = state.for_router(desired.project, spec, digest) if obj["kind"] == "Deployment" else {}
        _annotate(obj, {state.ROLE: state.ROLE_ROUTER, **extra})
    return ordered(out, desired.project)


def hub_secret(project: str, settings: KubeSettings) -> JsonObject:
    """The Hugging Face token, for download Jobs only (a public repo needs none: the Jobs read it
    as optional)."""
    labels = names.labels(project, "hub-token", "download")
    return secret_object(names.hub_secret_name(project), settings.namespace, labels, {HUB_TOKEN_KEY: None})


def ordered(objs: list[JsonObject], project: str) -> list[JsonObject]:
    """In apply order, as fresh plain data: no two objects share a dict (a caller may edit one).
    Every object names the tool and its project in annotations too: the instance label is a
    selector, and only these say an object is this project's to change or prune."""
    fresh: list[JsonObject] = json.loads(json.dumps(objs))
    for obj in fresh:
        _annotate(obj, {state.MANAGED_BY: state.MANAGER, state.PROJECT: project})
    return sorted(fresh, key=lambda o: (KIND_ORDER.index(o["kind"]), str(_dict(o["metadata"])["name"])))


def _model_objects(desired: DesiredState, settings: KubeSettings, alias: str) -> list[JsonObject]:
    project, model = desired.project, desired.models[alias]
    labels = names.labels(project, names.label_value(alias), "model")
    out: list[JsonObject] = []
    secrets = engine_pod.secret_env(model)
    if secrets:
        out.append(secret_object(names.env_secret_name(project, alias), settings.namespace, labels, dict(secrets)))
    if storage.downloads(model):
        out.append(storage.volume_claim(project, model, settings))
        out.append(storage.download_job(project, model, settings, engine_pod.placement(alias, settings)))
    pod_storage = storage.pod_storage(project, model, settings)
    out.append(engine_pod.service(project, model, settings, labels))
    out.append(engine_pod.deployment(project, model, settings, pod_storage, labels))
    digest = _hash(out)
    for obj in out:
        extra = _engine_annotations(project, model, digest) if obj["kind"] == "Deployment" else {}
        _annotate(obj, {state.ROLE: state.ROLE_ENGINE, state.MODEL: alias, **extra})
    return out


def _engine_annotations(project: str, model: DesiredModel, digest: str) -> dict[str, str]:
    return state.for_engine(project, model.alias, model.spec["engine"], specs.model_spec(model), digest)


def _hash(objs: list[JsonObject]) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(objs).encode()).hexdigest()


def _annotate(resource: JsonObject, annotations: dict[str, str]) -> None:
    meta = resource["metadata"] = dict(_dict(resource["metadata"]))
    meta["annotations"] = {**_dict(meta.get("annotations", {})), **annotations}
