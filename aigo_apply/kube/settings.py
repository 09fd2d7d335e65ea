"""The parsed `platform:` and `kubernetes:` sections: every Kubernetes choice of a validated file, with
its defaults filled, as one immutable value the object builders take (they read nothing else).

Docker stays the default platform; a file without a `kubernetes:` section still renders for a cluster
with these defaults (`render --as kubernetes`), so a user can look before moving.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from aigo_apply.config.document import Document
from aigo_apply.config.kube_rules import DEFAULT_GPUS_PER_NODE
from aigo_apply.config.platforms import DEFAULT_PLATFORM, platform_of
from aigo_apply.desired.images import image_reference
from aigo_apply.json_types import JsonObject
from aigo_apply.json_types import obj as _dict

DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_SIZE_GIB = 100
DEFAULT_CLUSTER_DOMAIN = "cluster.local"

Pairs = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Toleration:
    key: str | None
    operator: str
    value: str | None
    effect: str | None

    def to_dict(self) -> JsonObject:
        out = {"key": self.key, "operator": self.operator, "value": self.value, "effect": self.effect}
        return {k: v for k, v in out.items() if v is not None}


@dataclass(frozen=True)
class Storage:
    storage_class: str | None = None  # None: the cluster's default StorageClass
    size_gib: int = DEFAULT_SIZE_GIB
    node_local: bool = False  # source.path models read a hostPath folder on the node they are pinned to


@dataclass(frozen=True)
class ModelPlacement:
    """A model's own `kubernetes:` block."""

    node_selector: Pairs = ()
    storage_gib: int | None = None


@dataclass(frozen=True)
class KubeSettings:
    platform: str = DEFAULT_PLATFORM
    context: str | None = None
    namespace: str = "default"
    gpu_resource: str = DEFAULT_GPU_RESOURCE
    gpus_per_node: int = DEFAULT_GPUS_PER_NODE
    runtime_class_name: str | None = None
    node_selector: Pairs = ()
    tolerations: tuple[Toleration, ...] = ()
    storage: Storage = Storage()
    cluster_domain: str = DEFAULT_CLUSTER_DOMAIN
    download_image: str = ""
    models: dict[str, ModelPlacement] = field(default_factory=dict)

    def node_selector_for(self, alias: str) -> dict[str, str]:
        """The section's node selector with the model's own on top (its value wins for a shared key)."""
        own = self.models.get(alias, ModelPlacement()).node_selector
        return dict(sorted({**dict(self.node_selector), **dict(own)}.items()))

    def storage_gib_for(self, alias: str) -> int:
        own = self.models.get(alias, ModelPlacement()).storage_gib
        return own if own is not None else self.storage.size_gib


def default_namespace(project: str) -> str:
    """The project as a namespace name: '_' (allowed in projects, not in namespaces) becomes '-'."""
    return re.sub(r"[^a-z0-9-]", "-", project.lower()).strip("-") or "default"


def settings_of(data: Document) -> KubeSettings:
    """The settings of a validated file (`Config.data`), defaults filled."""
    section = data.get("kubernetes") or {}
    storage = section.get("storage") or {}
    models = {
        alias: ModelPlacement(_pairs(block.get("node_selector")), block.get("storage_gib"))
        for alias, model in sorted((data.get("models") or {}).items())
        if isinstance(model, dict) and isinstance(block := model.get("kubernetes"), dict)
    }
    return KubeSettings(
        platform=platform_of(data),
        context=section.get("context"),
        namespace=section.get("namespace") or default_namespace(data["project"]),
        gpu_resource=section.get("gpu_resource", DEFAULT_GPU_RESOURCE),
        gpus_per_node=section.get("gpus_per_node", DEFAULT_GPUS_PER_NODE),
        runtime_class_name=section.get("runtime_class_name"),
        node_selector=_pairs(section.get("node_selector")),
        tolerations=tuple(
            Toleration(t.get("key"), t.get("operator", "Equal"), t.get("value"), t.get("effect"))
            for t in section.get("tolerations") or []
        ),
        storage=Storage(
            storage.get("storage_class"), storage.get("size_gib", DEFAULT_SIZE_GIB), bool(storage.get("node_local"))
        ),
        cluster_domain=section.get("cluster_domain", DEFAULT_CLUSTER_DOMAIN),
        download_image=section.get("download_image") or image_reference(data, "vllm") or "",
        models=models,
    )


def _pairs(mapping: object) -> Pairs:
    return tuple(sorted((str(k), str(v)) for k, v in _dict(mapping).items()))
