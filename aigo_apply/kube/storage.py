"""Where a model's weights live on a cluster, and how the engine pod sees them at the very paths the
Docker container uses (`/models/ALIAS`, `/models/ALIAS.draft`, `/adapters/ADAPTER`, read-only).

A model from Hugging Face gets its own PersistentVolumeClaim, filled by a Job that downloads the repo
(and a draft model's repo, and each LoRA adapter's repo) with huggingface_hub, pinned to the commit
the revision names when it runs; the Hugging Face token reaches that Job only, from a Secret, never an
engine. The volume's name carries a hash of what it holds, so other weights (or another adapter)
download into a new volume while the old one still serves. A `source.path` model (or adapter) reads a
hostPath folder (or file) on the node it is pinned to.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TypedDict

from aigo_apply.config import kube_names as names
from aigo_apply.config.host_paths import path_text_problem
from aigo_apply.config.kube_rules import HOSTNAME_LABEL
from aigo_apply.config.vllm_flags import DraftSettings
from aigo_apply.desired.adapters import ADAPTER_MOUNT
from aigo_apply.desired.engines.common import CACHE_DIR, MODEL_MOUNT
from aigo_apply.desired.model_store import ADAPTER_FILES, ENGINE_FILES, ENGINE_SUFFIXES, gguf_parts
from aigo_apply.desired.spec import SourceSpec
from aigo_apply.desired.types import DesiredModel, canonical_json
from aigo_apply.errors import UnsafeSetting
from aigo_apply.json_types import JsonMap, JsonObject, JsonValue
from aigo_apply.kube.secrets import HUB_TOKEN_KEY
from aigo_apply.kube.settings import KubeSettings

STORE_MOUNT = "/data"  # where the download Job mounts the volume
MARKER = ".aigo-kube-download.json"  # written last by the Job: repo, revision and the commit it got
# The download, as a fixed program: what it fetches comes from AIGO_DOWNLOADS (JSON data), never code.
DOWNLOAD_SCRIPT = """\
import json, os
from huggingface_hub import HfApi, snapshot_download
api = HfApi()
for item in json.loads(os.environ["AIGO_DOWNLOADS"]):
    dest = os.path.join("/data", item["folder"])
    commit = api.repo_info(item["repo"], revision=item["revision"]).sha
    snapshot_download(item["repo"], revision=commit, local_dir=dest, allow_patterns=item["patterns"])
    with open(os.path.join(dest, ".aigo-kube-download.json"), "w") as marker:
        json.dump({"repo": item["repo"], "revision": item["revision"], "commit": commit}, marker)
    print("downloaded", item["repo"], "at", commit, flush=True)
"""


@dataclass(frozen=True)
class PodStorage:
    """The volumes of an engine pod and their mounts in the engine container."""

    volumes: tuple[JsonObject, ...]
    mounts: tuple[JsonObject, ...]


class RepoPin(TypedDict):
    """A Hugging Face repo to download: at which revision, which files (glob patterns)."""

    repo: str
    revision: str
    patterns: list[str]


class Download(RepoPin):
    """One item of the download Job's AIGO_DOWNLOADS: a repo pin and the volume's folder it fills."""

    folder: str


def downloads(model: DesiredModel) -> list[Download]:
    """What the model's volume holds: the weights' repo in `model/`, a draft model's repo in `draft/`,
    each LoRA adapter's repo in `adapters/ADAPTER/` (by alias: two adapters never share a folder)."""
    out: list[Download] = []
    source = model.spec["source"]
    if "repo" in source:
        out.append({"folder": "model", **_repo(source, _model_patterns(source.get("file")))})
    draft = model.spec.get("vllm", {}).get("speculative", {}).get("draft", {})
    if "repo" in draft:
        out.append({"folder": "draft", **_repo(draft, _model_patterns(None))})
    for name, adapter in sorted((model.spec.get("adapters") or {}).items()):
        if "repo" in adapter["source"]:
            out.append({"folder": adapter_folder(name), **_repo(adapter["source"], ADAPTER_PATTERNS)})
    return out


def adapter_folder(name: str) -> str:
    """The volume's sub-path holding LoRA adapter `name` (an alias: a safe name, no '/' or '..')."""
    return f"adapters/{name}"


# What model_store.select_adapter_files keeps, as the model's patterns follow select_files: the
# adapter's config, its .safetensors weights, the tokenizer and chat template files it may carry.
ADAPTER_PATTERNS = ["*.safetensors", *sorted(ADAPTER_FILES), "*.jinja", "*.tiktoken"]


def _model_patterns(file: str | None) -> list[str]:
    if file is not None:
        return gguf_parts(file)
    # what model_store.select_files keeps: safetensors weights, config, tokenizer, templates
    return ["*.safetensors", *sorted(ENGINE_FILES), *(f"*{suffix}" for suffix in ENGINE_SUFFIXES)]


def _repo(source: SourceSpec | DraftSettings, patterns: list[str]) -> RepoPin:
    return {"repo": source["repo"], "revision": source.get("revision", "main"), "patterns": list(patterns)}


def storage_key(model: DesiredModel, settings: KubeSettings) -> str:
    """Everything the volume's content and shape depend on: a change makes a new volume."""
    return canonical_json(
        {
            "downloads": downloads(model),
            "class": settings.storage.storage_class,
            "gib": settings.storage_gib_for(model.alias),
        }
    )


def volume_claim(project: str, model: DesiredModel, settings: KubeSettings) -> JsonObject:
    spec: JsonObject = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": f"{settings.storage_gib_for(model.alias)}Gi"}},
    }
    if settings.storage.storage_class:
        spec["storageClassName"] = settings.storage.storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _meta(project, model, settings, "model"),
        "spec": spec,
    }


def download_job(project: str, model: DesiredModel, settings: KubeSettings, pod_extras: JsonMap) -> JsonObject:
    """The Job that fills the volume; `pod_extras` places it like the model (same nodes, tolerations),
    so a node-bound volume is made where the engine will run."""
    meta = _meta(project, model, settings, "download")
    env: list[JsonValue] = [
        {"name": "AIGO_DOWNLOADS", "value": json.dumps(downloads(model), separators=(",", ":"))},
        {"name": "HF_HOME", "value": f"{STORE_MOUNT}/.hf-home"},
        {"name": "HF_HUB_DISABLE_TELEMETRY", "value": "1"},
        {
            "name": "HF_TOKEN",
            "valueFrom": {
                "secretKeyRef": {"name": names.hub_secret_name(project), "key": HUB_TOKEN_KEY, "optional": True}
            },
        },
    ]
    container: JsonObject = {
        "name": "download",
        "image": settings.download_image,
        "command": ["python3", "-c", DOWNLOAD_SCRIPT],
        "env": env,
        "volumeMounts": [{"name": "store", "mountPath": STORE_MOUNT}],
        "securityContext": {"allowPrivilegeEscalation": False},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "backoffLimit": 4,
            "template": {
                "metadata": {"labels": meta["labels"]},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    **pod_extras,
                    "containers": [container],
                    "volumes": [{"name": "store", "persistentVolumeClaim": {"claimName": meta["name"]}}],
                },
            },
        },
    }


def _meta(project: str, model: DesiredModel, settings: KubeSettings, component: str) -> JsonObject:
    name = names.storage_name(project, model.alias, storage_key(model, settings))
    return {
        "name": name,
        "namespace": settings.namespace,
        "labels": {**names.labels(project, names.label_value(model.alias), component)},
    }


def pod_storage(project: str, model: DesiredModel, settings: KubeSettings) -> PodStorage:
    """The engine's mounts, from the Docker container's own: the downloaded folders as sub-paths of
    the model's volume, local folders and files as hostPath, the compile cache as an emptyDir."""
    spec, folder = model.spec, f"{MODEL_MOUNT}/{model.alias}"
    downloaded: dict[str, str] = {}  # mount target -> the volume's sub-path (the spec's host folders are not needed)
    if "repo" in spec["source"]:
        downloaded[folder] = "model"
    if "repo" in spec.get("vllm", {}).get("speculative", {}).get("draft", {}):
        downloaded[f"{folder}.draft"] = "draft"
    for name, adapter in (spec.get("adapters") or {}).items():
        if "repo" in adapter["source"]:
            downloaded[f"{ADAPTER_MOUNT}/{name}"] = adapter_folder(name)
    volumes: list[JsonObject] = []
    mounts: list[JsonObject] = []
    if downloaded:
        claim = names.storage_name(project, model.alias, storage_key(model, settings))
        volumes.append({"name": "weights", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}})
    for n, mount in enumerate(model.container.mounts):
        if mount.target == CACHE_DIR:
            volumes.append({"name": "cache", "emptyDir": {}})
            mounts.append({"name": "cache", "mountPath": CACHE_DIR})
        elif mount.target in downloaded:
            mounts.append(
                {"name": "weights", "mountPath": mount.target, "subPath": downloaded[mount.target], "readOnly": True}
            )
        else:
            _check_node_local(model.alias, mount.source, settings)
            kind = "File" if mount.source.endswith(".gguf") else "Directory"
            volumes.append({"name": f"local-{n}", "hostPath": {"path": mount.source, "type": kind}})
            mounts.append({"name": f"local-{n}", "mountPath": mount.target, "readOnly": True})
    return PodStorage(tuple(volumes), tuple(mounts))


def _check_node_local(alias: str, path: str, settings: KubeSettings) -> None:
    """The last check before a host folder becomes a hostPath volume (validation said it first)."""
    text = path_text_problem(path)
    why = None
    if not settings.storage.node_local:
        why = "kubernetes.storage.node_local is not true"
    elif text or not path.startswith("/") or ".." in path.split("/"):
        why = f"the path {text or 'is not absolute'}"
    elif HOSTNAME_LABEL not in settings.node_selector_for(alias):
        why = f"the model is not pinned to a node with node_selector {HOSTNAME_LABEL}"
    if why:
        raise UnsafeSetting(f"model '{alias}': refusing {path!r} as a node-local folder: {why}")
