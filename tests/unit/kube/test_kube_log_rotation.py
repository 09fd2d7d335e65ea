"""Log rotation is Docker's: on a cluster the kubelet rotates container logs, so `logs:` renders
nothing into a cluster's objects, a change of it plans no change there, and the plan says where the
file sets it and that it has no effect (a file that does not set it gets no such note)."""

from __future__ import annotations

import json

import pytest

from aigo_apply.adapters.kube_client import KubeClient
from aigo_apply.kube.manifests import objects
from aigo_apply.kube.settings import settings_of
from aigo_apply.kube.specs import model_spec, router_spec
from aigo_apply.observe.config_file import load_config
from aigo_apply.platforms.kubernetes.observe import read_cluster
from aigo_apply.platforms.kubernetes.planning import plan_for_cluster

from helpers.configs import write_config
from helpers.fake_kube_api import FakeKubeAPI, model_objects, router_objects
from helpers.planner_inputs import CONFIG, desired

EVERYWHERE = CONFIG.replace("models:\n", "defaults: {logs: {max_size: 10m}}\nrouter: {logs: {max_files: 2}}\nmodels:\n")
EVERYWHERE = EVERYWHERE.replace("    vllm: {tool_call_parser", "    logs: {max_files: 9}\n    vllm: {tool_call_parser")
ONE_MODEL = CONFIG.replace("    vllm: {tool_call_parser", "    logs: {max_size: 1g}\n    vllm: {tool_call_parser")
NO_EFFECT = (
    ": no effect on Kubernetes: the kubelet rotates each container's logs by its own settings "
    "(containerLogMaxSize, containerLogMaxFiles; 10Mi x 5 unless the cluster sets others), so nothing is "
    "changed for them; they apply when the file runs on Docker"
)


def rendered(d):
    """Objects in the renderer's shape for desired state `d` (as tests/unit/platforms/kubernetes/test_kube_observe.py)."""
    out = []
    for alias, model in sorted(d.models.items()):
        out += model_objects(alias, model_spec(model), f"sha256:{alias}")
    files = {"haproxy.cfg": "global\n", "models.json": json.dumps({"data": [{"id": a} for a in sorted(d.models)]})}
    return out + router_objects(router_spec(d.router), files, "sha256:router")


@pytest.fixture
def client():
    return KubeClient.over_transport(FakeKubeAPI(), "lab")


@pytest.mark.parametrize("text", [EVERYWHERE, ONE_MODEL])
def test_the_cluster_s_objects_are_the_same_whatever_logs_says(tmp_path, text):
    text, plain_text = (t.replace("{path: /m/alpha}", "{repo: org/alpha}") for t in (text, CONFIG))  # on a cluster
    settings = settings_of(load_config(str(write_config(tmp_path, text))).data)
    plain = objects(desired(tmp_path, plain_text), settings)
    rotated = desired(tmp_path, text)
    assert all("logs" in m.spec for m in rotated.models.values())  # Docker's spec has it...
    assert objects(rotated, settings) == plain  # ...a cluster's objects do not
    assert all("logs" not in model_spec(m) for m in rotated.models.values())
    assert "logs" not in router_spec(rotated.router)


@pytest.mark.parametrize(
    "text, places",
    [
        (EVERYWHERE, "defaults.logs, router.logs, models.beta.logs"),
        (ONE_MODEL, "models.beta.logs"),
    ],
)
def test_a_change_of_logs_plans_nothing_on_a_cluster_and_the_plan_says_so(tmp_path, client, text, places):
    for obj in rendered(desired(tmp_path, CONFIG)):
        client.apply(obj)
    d = desired(tmp_path, text)
    plan = plan_for_cluster(d, read_cluster(client, "lab"), rendered(d))
    assert {a.kind for a in plan.actions} == {"noop"} and not plan.has_changes
    assert [w for w in plan.warnings if "logs" in w] == [places + NO_EFFECT]
    plain = desired(tmp_path, CONFIG)  # a file that does not set it gets no such note
    assert not [
        w for w in plan_for_cluster(plain, read_cluster(client, "lab"), rendered(plain)).warnings if "logs" in w
    ]
