"""The whole Kubernetes path over the fake API server, with the real renderer (kube/manifests.py): plan,
apply, plan again (no changes), change a setting (one field-level recreate), drop a model (removed and
its objects pruned), destroy. This holds the renderer's objects and the reading/apply side together."""

from __future__ import annotations

import pytest

from aigo_apply.adapters.kube_client import KubeClient
from aigo_apply.kube.manifests import objects
from aigo_apply.kube.secrets import API_KEYS_KEY
from aigo_apply.kube.settings import KubeSettings
from aigo_apply.platforms.journal import Journal
from aigo_apply.platforms.kubernetes.apply import KubeApply, destroy
from aigo_apply.platforms.kubernetes.observe import read_cluster
from aigo_apply.platforms.kubernetes.planning import plan_for_cluster
from aigo_apply.platforms.kubernetes.rollout import RolloutWait
from aigo_apply.platforms.outcome import StepLog
from aigo_apply.router.haproxy import keys_file

from helpers.fake_kube_api import FakeKubeAPI, Reporter
from helpers.planner_inputs import desired

CONFIG = """
version: 1
project: lab
engines: {vllm: {image: local/engine, image_tag: "1"}}
router: {api_keys: {from_env: AIGO_KEYS}}
models:
  beta:
    source: {repo: org/beta, revision: v1}
    context_length: 8K
    gpus: [0]
    vllm: {tool_call_parser: hermes, max_num_seqs: 8}
    env: {MY_KEY: {from_env: MY_KEY}}
  gamma:
    source: {repo: org/gamma, revision: main}
    context_length: 4096
    gpus: [1]
"""
SETTINGS = KubeSettings(namespace="lab")
KEY = "sk-router-0123456789abcdef"  # the router key apply reads its /metrics with


@pytest.fixture
def fake():
    return FakeKubeAPI()


@pytest.fixture
def client(fake):
    return KubeClient.over_transport(fake, "lab")


def converge(tmp_path, client, text):
    """plan + apply for `text`; the plan and the report."""
    d = desired(tmp_path, text)
    rendered = objects(d, SETTINGS)
    cluster = read_cluster(client, "lab")
    plan = plan_for_cluster(d, cluster, rendered)
    run = KubeApply(
        client,
        StepLog(Journal(tmp_path), Reporter()),
        resolve=lambda slot: (
            keys_file([KEY]) if slot.key == API_KEYS_KEY else "value" if slot.ref is not None else None
        ),
        wait=RolloutWait(client, sleep=lambda s: None),
        router_key=KEY,
    )
    return plan, run.run(plan, rendered, cluster)


def kinds(plan):
    return {a.address: a.kind for a in plan.actions}


def again(tmp_path, client, text):
    d = desired(tmp_path, text)
    return plan_for_cluster(d, read_cluster(client, "lab"), objects(d, SETTINGS))


def test_the_rendered_deployment_converges_and_then_plans_no_changes(tmp_path, fake, client):
    plan, report = converge(tmp_path, client, CONFIG)
    assert kinds(plan) == {"model.beta": "create", "model.gamma": "create", "router": "create"}
    assert all(o.ok for o in report.outcomes), report.outcomes
    assert read_cluster(client, "lab").observed.damaged == ()
    assert set(kinds(again(tmp_path, client, CONFIG)).values()) == {"noop"}


def test_a_changed_setting_recreates_one_model_and_names_the_field(tmp_path, fake, client):
    converge(tmp_path, client, CONFIG)
    changed = CONFIG.replace("max_num_seqs: 8", "max_num_seqs: 16")
    plan, report = converge(tmp_path, client, changed)
    assert kinds(plan) == {"model.beta": "recreate", "model.gamma": "noop", "router": "noop"}
    beta = next(a for a in plan.actions if a.address == "model.beta")
    assert beta.reasons == ("vllm.max_num_seqs changed",)
    assert all(o.ok for o in report.outcomes) and [o.address for o in report.outcomes] == ["model.beta"]
    assert set(kinds(again(tmp_path, client, changed)).values()) == {"noop"}


def test_a_dropped_model_is_removed_with_all_its_objects(tmp_path, fake, client):
    converge(tmp_path, client, CONFIG)
    gamma_objects = {o.key for o in read_cluster(client, "lab").objects if o.alias == "gamma"}
    assert {kind for kind, _ in gamma_objects} == {"PersistentVolumeClaim", "Job", "Service", "Deployment"}
    without = CONFIG[: CONFIG.index("  gamma:")]
    plan, report = converge(tmp_path, client, without)
    assert kinds(plan) == {"model.beta": "noop", "model.gamma": "remove", "router": "reload_router"}
    assert all(o.ok for o in report.outcomes), report.outcomes
    left = {o.key for o in read_cluster(client, "lab").objects}
    assert not gamma_objects & left
    assert set(kinds(again(tmp_path, client, without)).values()) == {"noop"}


def test_destroy_leaves_nothing_of_the_project(tmp_path, fake, client):
    converge(tmp_path, client, CONFIG)
    report = destroy(client, read_cluster(client, "lab"), StepLog(Journal(tmp_path), Reporter()))
    assert all(o.ok for o in report.outcomes)
    assert read_cluster(client, "lab").objects == ()


def test_a_changed_adapter_is_a_change_of_its_model_downloaded_into_a_new_volume(tmp_path, fake, client):
    with_adapter = CONFIG.replace(
        "    env: {MY_KEY: {from_env: MY_KEY}}\n",
        "    env: {MY_KEY: {from_env: MY_KEY}}\n    adapters: {sql: {source: {repo: org/sql-lora, revision: a1}}}\n",
    )
    plan, report = converge(tmp_path, client, with_adapter)
    assert all(o.ok for o in report.outcomes), report.outcomes
    assert set(kinds(again(tmp_path, client, with_adapter)).values()) == {"noop"}
    volumes = lambda: {o.name for o in read_cluster(client, "lab").objects if o.kind == "PersistentVolumeClaim"}
    before = volumes()
    moved = with_adapter.replace("revision: a1", "revision: a2")
    plan, report = converge(tmp_path, client, moved)
    assert kinds(plan) == {"model.beta": "recreate", "model.gamma": "noop", "router": "noop"}
    beta = next(a for a in plan.actions if a.address == "model.beta")
    assert beta.reasons == ("adapter 'sql' changed: org/sql-lora@a1 -> org/sql-lora@a2",)
    assert all(o.ok for o in report.outcomes), report.outcomes
    assert len(volumes() - before) == 1 and len(before - volumes()) == 1  # a new volume for beta, the old pruned
    assert set(kinds(again(tmp_path, client, moved)).values()) == {"noop"}
