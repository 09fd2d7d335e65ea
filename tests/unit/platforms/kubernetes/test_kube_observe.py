"""Reading the cluster (one LIST per kind, whatever N) into the planner's input, and the plan the one
planner makes from it: no changes when the annotations match, a field-level reason when a setting
changed, the router compared as the cluster holds its files; damaged objects reported, never used."""

from __future__ import annotations

import copy
import json

import pytest

from aigo_apply.adapters.kube_client import KubeClient
from aigo_apply.config import kube_names as names
from aigo_apply.desired import labels as L
from aigo_apply.kube.specs import model_spec, router_spec
from aigo_apply.platforms.kubernetes.observe import deployment_state, read_cluster
from aigo_apply.platforms.kubernetes.planning import plan_for_cluster

from helpers.fake_kube_api import FakeKubeAPI, model_objects, router_objects
from helpers.planner_inputs import CONFIG, desired


@pytest.fixture
def fake():
    return FakeKubeAPI()


@pytest.fixture
def client(fake):
    return KubeClient.over_transport(fake, "lab")


def rendered(d, digests=None):
    """Objects in the renderer's shape for desired state `d`; a model's spec hash from `digests`."""
    digests = digests or {}
    out = []
    for alias, model in sorted(d.models.items()):
        out += model_objects(alias, model_spec(model), digests.get(alias, f"sha256:{alias}"))
    files = {"haproxy.cfg": "global\n", "models.json": json.dumps({"data": [{"id": a} for a in sorted(d.models)]})}
    return out + router_objects(router_spec(d.router), files, digests.get("router", "sha256:router"))


def deploy(client, objs):
    for obj in objs:
        client.apply(obj)


def kinds(plan):
    return {a.address: a.kind for a in plan.actions}


@pytest.mark.parametrize("count", [1, 50])
def test_reading_the_cluster_is_one_list_per_kind_whatever_the_number_of_models(fake, client, count):
    for n in range(count):
        deploy(client, model_objects(f"m{n}", env_secret="KEY", download=True))
    deploy(client, router_objects())
    fake.requests.clear()
    cluster = read_cluster(client, "lab")
    assert len(cluster.observed.engines) == count and cluster.observed.router is not None
    assert [(r.method, r.path.rsplit("/", 1)[1]) for r in fake.requests] == [
        ("GET", "secrets"),
        ("GET", "persistentvolumeclaims"),
        ("GET", "jobs"),
        ("GET", "configmaps"),
        ("GET", "services"),
        ("GET", "deployments"),
    ]
    selector = "app.kubernetes.io/managed-by=aigo-apply,app.kubernetes.io/instance=lab"
    assert {r.query["labelSelector"] for r in fake.requests} == {selector}
    assert len(cluster.objects) == count * 5 + 3


def test_a_deployment_reads_as_the_container_the_planner_knows(fake, client):
    objs = model_objects("Qwen3.5_small", {"engine": "vllm", "context_length": 4096}, "sha256:abc")
    deploy(client, objs)
    (engine,) = read_cluster(client, "lab").observed.engines
    assert engine.name == "aigo-lab-Qwen3.5_small" and engine.alias == "Qwen3.5_small"
    assert engine.state == "running" and engine.role == "engine"
    assert engine.spec == {"engine": "vllm", "context_length": 4096} and engine.spec_hash == "sha256:abc"
    assert engine.image == "vllm/vllm-openai:v0.31.0"


def test_only_this_projects_objects_are_read(fake, client):
    deploy(client, model_objects("a"))
    fake.put(model_objects("b", project="other")[-1])  # another project in the same namespace
    foreign = copy.deepcopy(model_objects("c")[-1])
    del foreign["metadata"]["labels"]["app.kubernetes.io/managed-by"]  # made by someone else
    fake.put(foreign)
    cluster = read_cluster(client, "lab")
    assert [c.alias for c in cluster.observed.engines] == ["a"]
    assert {o.alias for o in cluster.objects} == {"a"} and cluster.observed.damaged == ()


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda o: o["metadata"].update(name="evil"), "is named 'evil', not aigo-lab-a-"),
        (lambda o: o["metadata"]["labels"].update({"app.kubernetes.io/component": "db"}), "component is 'db'"),
        (lambda o: o["metadata"]["annotations"].pop(L.MODEL), f"{L.MODEL} is missing"),
        (lambda o: o["metadata"]["annotations"].update({L.LABELS_VERSION: "9"}), f"{L.LABELS_VERSION} is '9'"),
        (lambda o: o["metadata"]["annotations"].update({L.ENGINE: "tgi"}), f"{L.ENGINE} is 'tgi'"),
        (lambda o: o["metadata"]["annotations"].update({L.ROLE: "router"}), f"{L.ROLE} is 'router', not 'engine'"),
        (lambda o: o["metadata"]["annotations"].update({L.MODEL: "b c"}), "label app.kubernetes.io/name is 'a'"),
        (lambda o: o["metadata"]["annotations"].update({L.SPEC: "x" * 70000}), "longer than 65536"),
    ],
)
def test_a_deployment_the_tool_could_not_have_made_is_damaged_and_left_alone(fake, client, edit, said):
    deployment = model_objects("a")[-1]
    edit(deployment)
    fake.put(deployment)
    cluster = read_cluster(client, "lab")
    assert cluster.observed.engines == () and cluster.objects == ()
    (warning,) = cluster.observed.damaged
    assert said in warning and "leaves it alone" in warning and "kubectl delete -n lab deployment" in warning


def test_a_models_other_objects_are_checked_too(fake, client):
    service = model_objects("a")[0]
    service["metadata"]["annotations"][L.MODEL] = "-bad"
    service["metadata"]["labels"]["app.kubernetes.io/name"] = names.label_value("-bad")
    fake.put(service)
    cluster = read_cluster(client, "lab")
    assert cluster.objects == () and "not a model alias" in cluster.observed.damaged[0]


def test_deployment_state_follows_the_rollout(fake, client):
    deployment = model_objects("a")[-1]
    fake.script(deployment["metadata"]["name"], "crash")
    client.apply(deployment)
    stored = fake.get("Deployment", deployment["metadata"]["name"])
    assert deployment_state(stored) == ("exited", "0 of 1 updated replicas available")
    assert deployment_state({**stored, "spec": {**stored["spec"], "replicas": 0}}) == ("exited", "scaled to 0 replicas")
    deleting = copy.deepcopy(stored)
    deleting["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    assert deployment_state(deleting) == ("removing", "being deleted")


# -- the plan, from the one planner ------------------------------------------------------------------
def test_matching_annotations_plan_no_changes(tmp_path, fake, client):
    d = desired(tmp_path)
    deploy(client, rendered(d))
    plan = plan_for_cluster(d, read_cluster(client, "lab"), rendered(d))
    assert kinds(plan) == {"model.alpha": "noop", "model.beta": "noop", "router": "noop"}
    assert not plan.has_changes
    assert plan.actions[-1].reasons == ("routes match the running models",)


def test_one_changed_setting_plans_a_recreate_naming_the_field(tmp_path, fake, client):
    deploy(client, rendered(desired(tmp_path)))
    changed = desired(tmp_path, CONFIG.replace("tool_call_parser: hermes", "tool_call_parser: qwen3_coder"))
    plan = plan_for_cluster(changed, read_cluster(client, "lab"), rendered(changed, {"beta": "sha256:beta-2"}))
    assert kinds(plan) == {"model.alpha": "noop", "model.beta": "recreate", "router": "noop"}
    beta = next(a for a in plan.actions if a.address == "model.beta")
    assert beta.reasons == ("vllm.tool_call_parser changed",)
    assert [c.to_dict() for c in beta.changes] == [
        {"path": "vllm.tool_call_parser", "before": "hermes", "after": "qwen3_coder", "effect": "recreate"}
    ]


def test_same_settings_rendered_differently_is_a_recreate_with_that_reason(tmp_path, fake, client):
    d = desired(tmp_path)
    deploy(client, rendered(d))
    plan = plan_for_cluster(d, read_cluster(client, "lab"), rendered(d, {"alpha": "sha256:new-objects"}))
    alpha = next(a for a in plan.actions if a.address == "model.alpha")
    assert alpha.kind == "recreate" and "defines the container differently" in alpha.reasons[0]


def test_an_empty_cluster_creates_everything_and_pulls_nothing_here(tmp_path, fake, client):
    d = desired(tmp_path)
    plan = plan_for_cluster(d, read_cluster(client, "lab"), rendered(d))
    assert kinds(plan) == {"model.alpha": "create", "model.beta": "create", "router": "create"}


def test_a_model_added_and_one_removed(tmp_path, fake, client):
    deploy(client, rendered(desired(tmp_path)))
    text = CONFIG.replace("  alpha:", "  gamma:")
    d = desired(tmp_path, text)
    plan = plan_for_cluster(d, read_cluster(client, "lab"), rendered(d))
    assert kinds(plan) == {
        "model.gamma": "create",
        "model.beta": "noop",
        "model.alpha": "remove",
        "router": "reload_router",
    }
    router = next(a for a in plan.actions if a.is_router)
    assert router.reasons == ("route for model gamma to be added", "route for model alpha to be removed")
    assert '-{"data": [{"id": "alpha"}' in router.diff and '+{"data": [{"id": "beta"}, {"id": "gamma"}]}' in router.diff
    removed = next(a for a in plan.actions if a.address == "model.alpha")
    assert removed.reasons == (f"model 'alpha' is no longer in {d.file}",)


def test_a_model_that_does_not_serve_is_started_again(tmp_path, fake, client):
    d = desired(tmp_path)
    fake.script(names.model_name("lab", "alpha"), "crash")
    deploy(client, rendered(d))
    plan = plan_for_cluster(d, read_cluster(client, "lab"), rendered(d))
    alpha = next(a for a in plan.actions if a.address == "model.alpha")
    assert alpha.kind == "start" and alpha.reasons == ("its Deployment is not available",)


def test_damaged_objects_are_warnings_of_the_plan(tmp_path, fake, client):
    d = desired(tmp_path)
    deploy(client, rendered(d))
    evil = copy.deepcopy(model_objects("alpha", model_spec(d.models["alpha"]), "sha256:alpha")[-1])
    evil["metadata"]["name"] = "evil"
    fake.put(evil)
    plan = plan_for_cluster(d, read_cluster(client, "lab"), rendered(d))
    assert kinds(plan)["model.alpha"] == "noop"
    assert any("Deployment 'evil'" in w and "leaves it alone" in w for w in plan.warnings)
