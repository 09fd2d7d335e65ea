"""Every example rendered for Kubernetes: each object valid in STRICT mode (no unknown field anywhere)
against the real OpenAPI schemas of Kubernetes 1.31 to 1.37 (pip `kubernetes-validate`), and equal to
its golden manifest in tests/golden/kubernetes/. Set AIGO_UPDATE_GOLDEN=1 to rewrite the goldens
after an intended change, and review the diff.

Examples with local model folders are refused as written (a cluster's nodes do not see this
machine's folders); they are rendered as a user would adapt them: node_local storage, the model
pinned to a node, the folder's absolute path on that node."""

from __future__ import annotations

import os
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from aigo_apply import __version__
from aigo_apply.config.kube_rules import placement_problems
from aigo_apply.desired.build import build_desired
from aigo_apply.kube.manifests import objects
from aigo_apply.kube.render_yaml import to_yaml
from aigo_apply.kube.settings import settings_of
from aigo_apply.observe.config_file import load_config

from helpers.configs import host_context
from helpers.paths import EXAMPLES, GOLDEN

VERSIONS = [f"1.{minor}" for minor in range(31, 38)]
GOLDEN_KUBE = GOLDEN / "kubernetes"
EXAMPLE_NAMES = sorted(p.name for p in EXAMPLES.glob("*.yaml"))


def cluster_ready(example: str, tmp_path: Path) -> Path:
    """The example itself, or (when it reads local folders) its copy adapted for a cluster."""
    path = EXAMPLES / example
    config = load_config(str(path))
    if not placement_problems(config.file, config.data, config.marks):
        return path
    data = yaml.safe_load(path.read_text())
    for model in data["models"].values():
        source = model["source"]
        if "path" in source and not source["path"].startswith("/"):
            source["path"] = f"/srv/aigo-examples/{Path(source['path']).name}"
    data["kubernetes"] = {"storage": {"node_local": True}, "node_selector": {"kubernetes.io/hostname": "node-1"}}
    adapted = tmp_path / example
    adapted.write_text(yaml.safe_dump(data, sort_keys=False))
    return adapted


def rendered(example: str, tmp_path: Path) -> list[dict]:
    config = load_config(str(cluster_ready(example, tmp_path)))
    assert not placement_problems(config.file, config.data, config.marks)
    return objects(build_desired(config, host_context(Path("/store"))), settings_of(config.data))


def test_every_example_is_covered_and_some_need_adapting(tmp_path):
    assert "kubernetes.yaml" in EXAMPLE_NAMES and len(EXAMPLE_NAMES) >= 7
    adapted = [e for e in EXAMPLE_NAMES if cluster_ready(e, tmp_path) != EXAMPLES / e]
    assert adapted == ["demo.yaml", "real-cpu.yaml"]  # the two with local folders


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_every_object_is_valid_in_strict_mode_on_every_supported_kubernetes(example, tmp_path):
    objs = rendered(example, tmp_path)
    kinds = {o["kind"] for o in objs}
    assert {"Deployment", "Service", "ConfigMap"} <= kinds
    failures = []
    for version in VERSIONS:
        for obj in objs:
            try:
                checked = kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                failures.append(f"{version} {obj['kind']}/{obj['metadata']['name']}: {str(exc)[:400]}")
                continue
            assert checked == version  # validated against that very version's schemas, not an older one
    assert not failures, "\n".join(failures)


def test_strict_validation_does_catch_an_unknown_field(tmp_path):
    """The check above can fail: one misspelt pod field is refused by every version."""
    deployment = next(o for o in rendered("single-gpu.yaml", tmp_path) if o["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["enableServiceLink"] = False
    for version in VERSIONS:
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(deployment, version, strict=True)


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_manifests_match_golden(example, tmp_path):
    text = to_yaml(rendered(example, tmp_path))
    text = text.replace(f"io.aigo-apply.created-by: {__version__}\n", "io.aigo-apply.created-by: <version>\n")
    golden = GOLDEN_KUBE / (Path(example).stem + ".yaml")
    if os.environ.get("AIGO_UPDATE_GOLDEN"):
        GOLDEN_KUBE.mkdir(exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text()
    assert list(yaml.safe_load_all(golden.read_text()))  # and it reads back as YAML documents
