"""The `platform:` and `kubernetes:` sections at validation: every refusal names the file, the line and
column, the path in the document and what to do; hostile values (newlines, shell characters, huge
numbers, unknown keys) stop there; Docker files are unchanged by the new sections."""

from __future__ import annotations

import pytest

from aigo_apply.errors import ConfigInvalid
from aigo_apply.kube.settings import settings_of
from aigo_apply.observe.config_file import load_config

from helpers.cli import run_cli
from helpers.configs import write_config

HEAD = "version: 1\nproject: lab\n"
MODEL = "  m:\n    source: {repo: org/model}\n    context_length: 4096\n"


def problems(tmp_path, text: str) -> list[str]:
    path = write_config(tmp_path, text)
    with pytest.raises(ConfigInvalid) as info:
        load_config(str(path))
    return [p.format().replace(str(path), "F") for p in info.value.problems]


def valid(tmp_path, text: str):
    return load_config(str(write_config(tmp_path, text)))


def test_docker_stays_the_default_and_nothing_changes(tmp_path):
    config = valid(tmp_path, HEAD + "models:\n" + MODEL)
    settings = settings_of(config.data)
    assert settings.platform == "docker"
    assert settings.namespace == "lab" and settings.gpu_resource == "nvidia.com/gpu"
    assert settings.storage.size_gib == 100 and not settings.storage.node_local


def test_every_setting_is_read(tmp_path):
    config = valid(
        tmp_path,
        HEAD
        + "platform: kubernetes\nkubernetes:\n  context: admin@gpu-cluster\n  namespace: llm\n"
        + "  gpu_resource: amd.com/gpu\n  gpus_per_node: 4\n  runtime_class_name: nvidia\n"
        + "  node_selector: {kubernetes.io/hostname: n1, example.com/pool: a_b.c-1}\n"
        + "  tolerations: [{key: gpu, operator: Equal, value: 'yes', effect: NoExecute}, {operator: Exists}]\n"
        + "  storage: {storage_class: local-path, size_gib: 65536, node_local: true}\n"
        + "  cluster_domain: corp.internal\n  download_image: registry.local:5000/tools/hf:1.0\n"
        + "models:\n"
        + MODEL
        + "    kubernetes: {storage_gib: 5, node_selector: {kubernetes.io/hostname: n2}}\n",
    )
    s = settings_of(config.data)
    assert (s.platform, s.context, s.namespace, s.gpu_resource, s.gpus_per_node) == (
        "kubernetes",
        "admin@gpu-cluster",
        "llm",
        "amd.com/gpu",
        4,
    )
    assert s.node_selector_for("m") == {"example.com/pool": "a_b.c-1", "kubernetes.io/hostname": "n2"}
    assert s.storage_gib_for("m") == 5 and s.storage_gib_for("other") == 65536
    assert [t.to_dict() for t in s.tolerations] == [
        {"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoExecute"},
        {"operator": "Exists"},
    ]
    assert s.cluster_domain == "corp.internal" and s.download_image == "registry.local:5000/tools/hf:1.0"


@pytest.mark.parametrize(
    "section, expected",
    [
        ("platform: k8s\n", "F:3:11: platform: 'k8s' is not one of docker, kubernetes"),
        ("kubernetes: {namespace: Bad_NS}\n", "F:3:25: kubernetes.namespace: must be a Kubernetes namespace name"),
        ('kubernetes: {namespace: "a\\nb"}\n', "F:3:25: kubernetes.namespace: must be a Kubernetes namespace name"),
        ("kubernetes: {namespace: " + "a" * 64 + "}\n", "kubernetes.namespace: must be a Kubernetes namespace name"),
        ("kubernetes: {gpu_resource: gpu}\n", "F:3:28: kubernetes.gpu_resource: must be a domain-qualified resource"),
        (
            'kubernetes: {runtime_class_name: "$(rm -rf /)"}\n',
            "kubernetes.runtime_class_name: must be a RuntimeClass name",
        ),
        ('kubernetes: {context: "a b; reboot"}\n', "kubernetes.context: must be a kubeconfig context name"),
        ("kubernetes: {gpus_per_node: 100000}\n", "F:3:29: kubernetes.gpus_per_node: must be at most 64, not 100000"),
        ("kubernetes: {storage: {size_gib: 99999999999}}\n", "kubernetes.storage.size_gib: must be at most 65536"),
        ("kubernetes: {storage: {size_gib: 0}}\n", "kubernetes.storage.size_gib: must be at least 1, not 0"),
        (
            "kubernetes: {storage: {node_local: 'true'}}\n",
            "F:3:36: kubernetes.storage.node_local: must be true or false",
        ),
        (
            "kubernetes: {storage: {storage_class: Fast_SSD}}\n",
            "kubernetes.storage.storage_class: must be a StorageClass",
        ),
        (
            "kubernetes: {namespce: llm}\n",
            "F:3:14: kubernetes.namespce: unknown key 'namespce' (did you mean 'namespace'?)",
        ),
        (
            "kubernetes: {node_selector: {pool: 'a b'}}\n",
            "kubernetes.node_selector.pool: must be a Kubernetes label value",
        ),
        ("kubernetes: {node_selector: {pool: true}}\n", 'quote it ("true") to mean the text'),
        ('kubernetes: {download_image: "img; curl evil"}\n', "kubernetes.download_image: must be an image reference"),
        ("kubernetes: {cluster_domain: -bad-}\n", "kubernetes.cluster_domain: must be a DNS domain"),
        (
            "kubernetes: {tolerations: [{effect: NoWhere}]}\n",
            "kubernetes.tolerations[0].effect: 'NoWhere' is not one of",
        ),
    ],
)
def test_hostile_and_wrong_values_are_refused_at_their_line(tmp_path, section, expected):
    found = problems(tmp_path, HEAD + section + "models:\n" + MODEL)
    assert any(expected in line for line in found), found


@pytest.mark.parametrize(
    "selector, why",
    [
        ("'bad key'", "has a name that is not 1-63 letters"),
        ("'-x'", "has a name that is not 1-63 letters"),
        ("'Example.com/x'", "has a prefix that is not a DNS name"),
        ("'" + "a" * 64 + "'", "has a name that is not 1-63 letters"),
        ("'" + ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 62]) + "/x'", "DNS name of at most 253 characters"),
        ("'a/b/c'", "has a prefix that is not a DNS name"),
    ],
)
def test_node_selector_keys_must_be_label_keys(tmp_path, selector, why):
    found = problems(tmp_path, HEAD + f"kubernetes:\n  node_selector:\n    {selector}: v\nmodels:\n" + MODEL)
    assert len(found) == 1 and found[0].startswith("F:5:5: kubernetes.node_selector.") and why in found[0], found


def test_a_models_own_node_selector_is_checked_too(tmp_path):
    found = problems(tmp_path, HEAD + "models:\n" + MODEL + "    kubernetes: {node_selector: {'x y': z}}\n")
    assert found == [
        "F:7:34: models.m.kubernetes.node_selector.\"x y\": 'x y' is not a Kubernetes label key: it has a name that "
        "is not 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
    ]


def test_tolerations_the_api_server_would_refuse(tmp_path):
    found = problems(
        tmp_path,
        HEAD
        + "kubernetes:\n  tolerations:\n    - {key: a, operator: Exists, value: b}\n    - {value: c}\n"
        + "    - {key: 'bad key'}\nmodels:\n"
        + MODEL,
    )
    assert found == [
        "F:5:41: kubernetes.tolerations[0].value: operator Exists matches any value of the key: remove value, "
        "or use operator: Equal",
        "F:6:7: kubernetes.tolerations[1]: operator Equal needs a key (and a value): name the taint's key, or use "
        "operator: Exists without a key to tolerate every taint",
        "F:7:13: kubernetes.tolerations[2].key: must be a Kubernetes label key such as kubernetes.io/hostname or "
        "gpu-type (got 'bad key')",
    ]


KUBE = HEAD + "platform: kubernetes\n"


def test_a_local_folder_needs_node_local_storage(tmp_path):
    found = problems(tmp_path, KUBE + "models:\n  m:\n    source: {path: /srv/m}\n    context_length: 64\n")
    assert found == [
        "F:6:20: models.m.source.path: a local path is a folder of the machine running aigo-apply, which a cluster's "
        "nodes do not see; on Kubernetes use source.repo (downloaded into a volume), or set "
        "kubernetes.storage.node_local: true and pin the model to the node holding the folder (node_selector "
        "kubernetes.io/hostname: NODE)"
    ]


def test_a_node_local_folder_needs_a_pinned_node_and_an_absolute_path(tmp_path):
    text = KUBE + "kubernetes: {storage: {node_local: true}}\nmodels:\n"
    unpinned = problems(tmp_path, text + "  m:\n    source: {path: /srv/m}\n    context_length: 64\n")
    assert len(unpinned) == 1 and unpinned[0].startswith("F:7:20: models.m.source.path: a node-local folder exists")
    assert "node_selector: {kubernetes.io/hostname: NODE} under models.m.kubernetes" in unpinned[0]
    relative = problems(
        tmp_path,
        text + "  m:\n    source: {path: models/m}\n    context_length: 64\n"
        "    kubernetes: {node_selector: {kubernetes.io/hostname: n1}}\n",
    )
    assert relative == [
        "F:7:20: models.m.source.path: a node-local path must be absolute: a path relative to this file or to ~ "
        "means nothing on a node; write the folder's absolute path on the node"
    ]
    pinned_above = text.replace(
        "{node_local: true}}", "{node_local: true}, node_selector: {kubernetes.io/hostname: n1}}"
    )
    valid(tmp_path, pinned_above + "  m:\n    source: {path: /srv/m}\n    context_length: 64\n")


def test_a_local_draft_model_is_a_local_folder_too(tmp_path):
    found = problems(
        tmp_path,
        KUBE + "models:\n" + MODEL + "    vllm:\n      speculative: {method: eagle3, draft: {path: /srv/draft}}\n",
    )
    assert len(found) == 1 and found[0].startswith("F:9:51: models.m.vllm.speculative.draft.path: a local path")


@pytest.mark.parametrize(
    "model, where",
    [
        ("    vllm: {tensor_parallel_size: 16}\n", "F:9:34: models.m.vllm.tensor_parallel_size"),
        ("    gpus: [0, 1, 2, 3, 4, 5, 6, 7, 8]\n", "F:9:11: models.m.gpus"),
        (
            "    engine: sglang\n    sglang: {tensor_parallel_size: 9}\n",
            "F:10:36: models.m.sglang.tensor_parallel_size",
        ),
    ],
)
def test_a_model_needing_more_gpus_than_a_node_is_refused(tmp_path, model, where):
    text = KUBE + "engines: {sglang: {image_tag: v1}}\nmodels:\n" + MODEL + model
    (found,) = problems(tmp_path, text)
    assert found.startswith(where + ": the model needs ")
    assert "more than one node has (kubernetes.gpus_per_node: 8)" in found
    assert "multi-node tensor or pipeline parallelism) is LeaderWorkerSet's job and out of scope" in found
    docker = text.replace("platform: kubernetes\n", "")
    assert not any("LeaderWorkerSet" in p for p in _problems_or_none(tmp_path, docker))  # a Docker host may have 16


def _problems_or_none(tmp_path, text):
    try:
        valid(tmp_path, text)
    except ConfigInvalid as exc:
        return [p.format() for p in exc.problems]
    return []


def test_gpus_per_node_raises_the_limit(tmp_path):
    valid(
        tmp_path, KUBE + "kubernetes: {gpus_per_node: 16}\nmodels:\n" + MODEL + "    vllm: {tensor_parallel_size: 16}\n"
    )


def test_memory_fractions_are_per_pod_on_a_cluster(tmp_path):
    """Two models with `gpus: all` each get GPUs of their own on a cluster; on Docker they share."""
    models = "models:\n" + MODEL + "  n:\n    source: {repo: org/n}\n    context_length: 64\n"
    docker = problems(tmp_path, HEAD + models)
    assert len(docker) == 1 and "over-committed" in docker[0]
    valid(tmp_path, KUBE + models)


def test_placement_rules_wait_for_the_kubernetes_platform(tmp_path):
    """A Docker file may carry a kubernetes section; only render --as kubernetes (and platform:
    kubernetes) hold its models to what a cluster can run."""
    text = HEAD + "kubernetes: {namespace: llm}\nmodels:\n  m:\n    source: {path: /srv/m}\n    context_length: 64\n"
    path = write_config(tmp_path, text)
    assert run_cli("validate", "-f", str(path)).returncode == 0
    rendered = run_cli("render", "--as", "kubernetes", "-f", str(path))
    assert rendered.returncode == 1 and rendered.stdout == ""
    assert (
        f"{path}:6:20: models.m.source.path: a local path is a folder of the machine running aigo-apply"
        in rendered.stderr
    )
