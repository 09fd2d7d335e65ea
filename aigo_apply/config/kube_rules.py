"""Rules for the `kubernetes:` section that JSON Schema cannot say, and the Kubernetes limits of a
model: label keys (prefix and name lengths), tolerations that the API server would refuse, a
`source.path` (a model's, a draft's or a LoRA adapter's) that a cluster's nodes cannot see unless
the model is pinned to the node holding it,
and a model needing more GPUs than one node has (multi-node serving is LeaderWorkerSet's job).

The syntax rules hold whenever the section is written; the placement rules when the file says
`platform: kubernetes`, and whenever `render --as kubernetes` renders the file (`check_placement`).
Like the other rules, each one skips what failed the schema, so one run reports every problem.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from aigo_apply.config import kube_names
from aigo_apply.config.adapter_rules import adapters_of
from aigo_apply.config.engine_choice import engine_of
from aigo_apply.config.finder import Finder
from aigo_apply.config.swap_groups import is_on_demand
from aigo_apply.config.yaml_source import Marks, Path_, Source
from aigo_apply.errors import Problem, UnsafeSetting
from aigo_apply.json_types import JsonMap

HOSTNAME_LABEL = "kubernetes.io/hostname"
DEFAULT_GPUS_PER_NODE = 8
_PREFIX = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*")
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?")
LEADER_WORKER_SET = (
    "serving one model across several nodes (multi-node tensor or pipeline parallelism) is LeaderWorkerSet's "
    "job and out of scope for aigo-apply"
)


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, dict) else {}


def label_key_problem(key: object) -> str | None:
    """Why `key` is not a Kubernetes label key (`[prefix/]name`), or None."""
    if not isinstance(key, str):
        return "is not text"
    prefix, _, name = key.rpartition("/")
    if "/" in key and not (0 < len(prefix) <= 253 and _PREFIX.fullmatch(prefix)):
        return "has a prefix that is not a DNS name of at most 253 characters (such as kubernetes.io)"
    if not _NAME.fullmatch(name):
        return (
            "has a name that is not 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
        )
    return None


def check(data: JsonMap, models: JsonMap, f: Finder) -> None:
    """The section's own rules, and the placement rules when the file deploys to Kubernetes."""
    section = _mapping(data.get("kubernetes"))
    _node_selector(section.get("node_selector"), ("kubernetes", "node_selector"), f)
    for alias, model in models.items():
        own = _mapping(_mapping(model).get("kubernetes"))
        _node_selector(own.get("node_selector"), ("models", alias, "kubernetes", "node_selector"), f)
    _tolerations(section.get("tolerations"), f)
    _object_names(data, models, f)
    if data.get("platform") == "kubernetes":
        check_placement(data, models, f)


def _object_names(data: JsonMap, models: JsonMap, f: Finder) -> None:
    """No two models share a Kubernetes object name or name label (config/kube_names.py), nor take the
    router's or the Hub Secret's name: one model's Service would select the other's pods, or one apply
    overwrite the other's objects. Checked on every platform: any file can be rendered for a cluster."""
    project = data.get("project")
    if not isinstance(project, str):
        return
    owner = {
        ("name", kube_names.router_name(project)): "the router",
        ("name", kube_names.hub_secret_name(project)): "the Hub token Secret",
    }
    for alias in models:
        try:
            taken = {
                (("label" if what.startswith("label") else "name"), name): what
                for what, name in kube_names.model_names(project, str(alias)).items()
            }
        except UnsafeSetting:
            continue  # an alias that is no safe name at all: refused by the alias rule
        for key, what in taken.items():
            if key in owner:
                f.at_key(
                    ("models", alias),
                    f"model '{alias}' would give its Kubernetes {what} the name {key[1]}, which {owner[key]} has "
                    "too; rename one of them",
                )
        for key in taken:
            owner.setdefault(key, f"model '{alias}'")


def placement_problems(file: str, data: Mapping[str, object], marks: Marks) -> list[Problem]:
    """The placement rules for a validated file whatever its platform (`render --as kubernetes`)."""
    finder = Finder(Source(file, {}, marks, []))  # a finder places problems by `marks` alone: the rules read `data`
    check_placement(data, _mapping(data.get("models")), finder)
    return finder.problems


def check_placement(data: Mapping[str, object], models: Mapping[str, object], f: Finder) -> None:
    """What a cluster cannot run as written: local paths without a node, models larger than a node."""
    section = _mapping(data.get("kubernetes"))
    per_node = section.get("gpus_per_node", DEFAULT_GPUS_PER_NODE)
    per_node = per_node if isinstance(per_node, int) and not isinstance(per_node, bool) else DEFAULT_GPUS_PER_NODE
    node_local = _mapping(section.get("storage")).get("node_local") is True
    for alias, model in models.items():
        if not isinstance(model, dict) or model.get("enabled") is False:
            continue
        _multi_node(data, alias, model, per_node, f)
        if is_on_demand(model):
            f.at_key(
                ("models", alias, "swap_group" if "swap_group" in model else "on_demand"),
                "on-demand models run on Docker only for now: their engines open vLLM's development endpoints, "
                "which every pod could reach through the model's Service on a cluster; remove on_demand/swap_group "
                "for Kubernetes",
            )
        for where, path in local_paths(model, engine_of(model, data.get("defaults"))):
            _local_path(section, alias, model, ("models", alias, *where), path, node_local, f)


def local_paths(model: Mapping[str, object], engine: str) -> list[tuple[Path_, str]]:
    """(place in the model, path) of each local folder or file the model reads on `engine`: its
    source, a vLLM draft model and vLLM LoRA adapters (the blocks of other engines are ignored, as
    everywhere)."""
    out: list[tuple[Path_, str]] = []
    path = _mapping(model.get("source")).get("path")
    if isinstance(path, str):
        out.append((("source", "path"), path))
    draft = _mapping(_mapping(_mapping(model.get(engine)).get("speculative")).get("draft"))
    if engine == "vllm" and isinstance(draft_path := draft.get("path"), str):
        out.append(((engine, "speculative", "draft", "path"), draft_path))
    adapters = adapters_of(model) if engine == "vllm" else {}
    for name, adapter in adapters.items():
        adapter_path = _mapping(_mapping(adapter).get("source")).get("path")
        if isinstance(adapter_path, str):
            out.append((("adapters", name, "source", "path"), adapter_path))
    return out


def pinned_node(section: Mapping[str, object], model: Mapping[str, object]) -> str | None:
    """The node a model is pinned to (its own node_selector first, then the section's), if any."""
    own = _mapping(_mapping(model.get("kubernetes")).get("node_selector"))
    node = own.get(HOSTNAME_LABEL, _mapping(section.get("node_selector")).get(HOSTNAME_LABEL))
    return node if isinstance(node, str) and node else None


def _local_path(
    section: Mapping[str, object],
    alias: str,
    model: Mapping[str, object],
    where: Path_,
    path: str,
    node_local: bool,
    f: Finder,
) -> None:
    if not node_local:
        f.at_value(
            where,
            "a local path is a folder of the machine running aigo-apply, which a cluster's nodes do not see; "
            "on Kubernetes use source.repo (downloaded into a volume), or set kubernetes.storage.node_local: true "
            f"and pin the model to the node holding the folder (node_selector {HOSTNAME_LABEL}: NODE)",
        )
    elif not path.startswith("/"):
        f.at_value(
            where,
            "a node-local path must be absolute: a path relative to this file or to ~ means nothing on a node; "
            "write the folder's absolute path on the node",
        )
    elif pinned_node(section, model) is None:
        f.at_value(
            where,
            f"a node-local folder exists on one node only, and model '{alias}' is not pinned to one: add "
            f"node_selector: {{{HOSTNAME_LABEL}: NODE}} under models.{alias}.kubernetes (or under kubernetes:) "
            "naming the node that holds it",
        )


def gpus_needed(gpus: object, tensor_parallel_size: object) -> int:
    """GPUs a model's pod requests: as many as `gpus` lists, none for `none`, and for `all` its
    tensor parallel size (1 when unset): a pod gets the GPUs it asks for, never a whole node's."""
    if gpus == "none":
        return 0
    if isinstance(gpus, list):
        return len(gpus)
    tp = tensor_parallel_size
    return tp if isinstance(tp, int) and not isinstance(tp, bool) and tp > 0 else 1


def _multi_node(data: Mapping[str, object], alias: str, model: Mapping[str, object], per_node: int, f: Finder) -> None:
    engine = engine_of(model, data.get("defaults"))
    settings = _mapping(model.get(engine))
    tp = settings.get("tensor_parallel_size")
    needed = gpus_needed(model.get("gpus", "all"), tp)
    if needed <= per_node:
        return
    where: Path_ = (
        ("models", alias, engine, "tensor_parallel_size")
        if "tensor_parallel_size" in settings
        else (
            "models",
            alias,
            "gpus",
        )
    )
    f.at_value(
        where,
        f"the model needs {needed} GPUs, more than one node has (kubernetes.gpus_per_node: {per_node}); "
        f"{LEADER_WORKER_SET}: lower it to at most {per_node} GPUs, or raise kubernetes.gpus_per_node if the "
        "nodes have more",
    )


def _node_selector(selector: object, where: Path_, f: Finder) -> None:
    for key in _mapping(selector):
        why = label_key_problem(key)
        if why:
            shown = key if len(key) <= 80 else key[:77] + "..."
            f.at_key((*where, key), f"{shown!r} is not a Kubernetes label key: it {why}")


def _tolerations(tolerations: object, f: Finder) -> None:
    for n, item in enumerate(tolerations if isinstance(tolerations, list) else []):
        if not isinstance(item, dict):
            continue
        where: Path_ = ("kubernetes", "tolerations", n)
        key = item.get("key")
        if isinstance(key, str) and len(key.rpartition("/")[0]) > 253:  # the rest is the schema's pattern
            f.at_value((*where, "key"), "is not a taint key: its prefix is longer than 253 characters")
        operator = item.get("operator", "Equal")
        if operator == "Exists" and "value" in item:
            f.at_value(
                (*where, "value"),
                "operator Exists matches any value of the key: remove value, or use operator: Equal",
            )
        if operator == "Equal" and not key:
            f.at_value(
                where,
                "operator Equal needs a key (and a value): name the taint's key, or use operator: Exists "
                "without a key to tolerate every taint",
            )
