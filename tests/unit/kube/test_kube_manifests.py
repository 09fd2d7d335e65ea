"""The Kubernetes objects of a model and of the router, property by property: what the issue asks of
each (Recreate, no service links, GPU request = limit, a startup budget equal to ready_timeout,
/dev/shm in memory, the engine's exact command line, secrets only by reference, the token only in the
download Job), computed here from the config independently of the code that renders them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from aigo_apply.desired import labels as state
from aigo_apply.desired.build import build_desired, served_on_ports
from aigo_apply.errors import UnsafeSetting, UsageProblem
from aigo_apply.kube import manifests
from aigo_apply.kube.settings import settings_of
from aigo_apply.kube.specs import desired_for_kubernetes
from aigo_apply.observe.config_file import load_config

from helpers.configs import host_context, write_config

# The rules as the Kubernetes documentation states them (not the code's own patterns).
RFC1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

CONFIG = """
version: 1
project: lab
platform: kubernetes
router: {api_keys: {from_env: AIGO_API_KEYS}}
kubernetes:
  namespace: llm
  gpu_resource: example.com/gpu
  runtime_class_name: nvidia
  node_selector: {pool: gpu}
  tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]
  storage: {storage_class: fast, size_gib: 50}
models:
  chat:
    source: {repo: Qwen/Qwen3-8B, revision: v1.0}
    context_length: 8192
    gpus: all
    ready_timeout: 1234
    vllm:
      tensor_parallel_size: 2
      speculative: {method: eagle3, num_speculative_tokens: 3, draft: {repo: org/eagle3-head}}
    env:
      LOG_LEVEL: debug
      WANDB_API_KEY: {from_env: WANDB_API_KEY}
      OTHER_SECRET: {from_file: /srv/secrets/other}
  three:
    source: {repo: Qwen/Qwen3-4B}
    context_length: 4096
    gpus: [0, 1, 2]
    kubernetes: {storage_gib: 7, node_selector: {pool: big}}
  cpu:
    source: {repo: Qwen/Qwen3-0.6B}
    context_length: 2048
    gpus: none
"""


def build(tmp_path: Path, text: str = CONFIG, models_dir: str = "/store"):
    config = load_config(str(write_config(tmp_path, text)))
    return build_desired(config, host_context(Path(models_dir))), settings_of(config.data)


@pytest.fixture
def rendered(tmp_path):
    """The desired state as a cluster runs it (every engine on its port), its settings and objects."""
    desired, settings = build(tmp_path)
    return served_on_ports(desired), settings, manifests.objects(desired, settings)


def of(objs, kind, alias=None):
    found = [o for o in objs if o["kind"] == kind]
    if alias is not None:
        found = [o for o in found if o["metadata"]["annotations"].get("io.aigo-apply.model") == alias]
    return found


def pod(deployment):
    return deployment["spec"]["template"]["spec"]


def engine(deployment):
    (container,) = pod(deployment)["containers"]
    return container


def test_order_is_secrets_volumes_jobs_configmaps_services_deployments(rendered):
    kinds = [o["kind"] for o in rendered[2]]
    order = ["Secret", "PersistentVolumeClaim", "Job", "ConfigMap", "Service", "Deployment"]
    assert kinds == sorted(kinds, key=order.index)
    assert kinds.count("Deployment") == 4 and kinds.count("Service") == 4  # three models and the router
    assert all(o["metadata"]["namespace"] == "llm" for o in rendered[2])


def test_model_deployment_shape(rendered):
    desired, _, objs = rendered
    for alias, model in desired.models.items():
        (deployment,) = of(objs, "Deployment", alias)
        spec, p, c = deployment["spec"], pod(deployment), engine(deployment)
        rolling = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
        # a GPU's old pod goes first (a surge pod would wait for its GPU); without GPUs the pods roll
        assert spec["replicas"] == 1 and spec["strategy"] == (
            rolling if model.spec["gpus"] == "none" else {"type": "Recreate"}
        )
        assert p["enableServiceLinks"] is False and p["automountServiceAccountToken"] is False
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
        assert p["terminationGracePeriodSeconds"] > c["lifecycle"]["preStop"]["sleep"]["seconds"] > 0
        assert c["args"] == list(model.container.command)  # the engine's command line, exactly
        assert c["image"] == model.container.image
        shm = [m for m in c["volumeMounts"] if m["mountPath"] == "/dev/shm"]
        (volume,) = [v for v in p["volumes"] if v["name"] == shm[0]["name"]]
        assert volume == {"name": shm[0]["name"], "emptyDir": {"medium": "Memory"}}
        assert {"name": "HF_HUB_OFFLINE", "value": "1"} in c["env"]
        assert p["runtimeClassName"] == "nvidia"
        assert p["tolerations"] == [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_gpu_request_equals_limit_and_counts_what_the_model_uses(rendered):
    objs = rendered[2]
    expected = {"chat": "2", "three": "3"}  # gpus: all with tensor_parallel_size 2; a list of three
    for alias, count in expected.items():
        resources = engine(of(objs, "Deployment", alias)[0])["resources"]
        assert resources["limits"] == resources["requests"] == {"example.com/gpu": count}
    assert "resources" not in engine(of(objs, "Deployment", "cpu")[0])  # gpus: none asks for none


def test_startup_budget_is_the_ready_timeout(tmp_path):
    for timeout in (1, 7, 25, 1234, 1800, 86400):
        desired, settings = build(tmp_path, CONFIG.replace("ready_timeout: 1234", f"ready_timeout: {timeout}"))
        c = engine(of(manifests.objects(desired, settings), "Deployment", "chat")[0])
        probe = c["startupProbe"]
        assert probe["periodSeconds"] * probe["failureThreshold"] == timeout
        assert probe["httpGet"]["path"] == "/health" and c["readinessProbe"]["httpGet"]["path"] == "/health"
        assert probe["timeoutSeconds"] <= probe["periodSeconds"]


def test_secrets_are_references_without_values(rendered):
    objs = rendered[2]
    env = {e["name"]: e for e in engine(of(objs, "Deployment", "chat")[0])["env"]}
    (secret,) = of(objs, "Secret", "chat")
    assert "data" not in secret and "stringData" not in secret
    for name in ("WANDB_API_KEY", "OTHER_SECRET"):
        assert env[name]["valueFrom"]["secretKeyRef"] == {"name": secret["metadata"]["name"], "key": name}
    sources = json.loads(secret["metadata"]["annotations"]["aigo-apply.io/secret-sources"])
    assert sources == {
        "OTHER_SECRET": {"from_file": "/srv/secrets/other"},
        "WANDB_API_KEY": {"from_env": "WANDB_API_KEY"},
    }
    assert env["LOG_LEVEL"] == {"name": "LOG_LEVEL", "value": "debug"}


def test_the_hub_token_reaches_download_jobs_only(rendered):
    objs = rendered[2]
    (hub,) = [o for o in of(objs, "Secret") if o["metadata"]["labels"]["app.kubernetes.io/component"] == "download"]

    def readers(obj):
        text = json.dumps(obj["spec"]) if "spec" in obj else ""
        return hub["metadata"]["name"] in text

    assert {o["kind"] for o in objs if readers(o)} == {"Job"}
    assert len(of(objs, "Job")) == 3
    for job in of(objs, "Job"):
        (c,) = job["spec"]["template"]["spec"]["containers"]
        (token,) = [e for e in c["env"] if e["name"] == "HF_TOKEN"]
        assert token["valueFrom"]["secretKeyRef"]["optional"] is True  # public repos need none
        assert job["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def test_download_job_fetches_the_revision_into_the_volume_the_engine_mounts_read_only(rendered):
    objs = rendered[2]
    job, = of(objs, "Job", "chat")  # fmt: skip
    (claim,) = of(objs, "PersistentVolumeClaim", "chat")
    assert claim["spec"]["storageClassName"] == "fast" and claim["spec"]["resources"]["requests"]["storage"] == "50Gi"
    assert of(objs, "PersistentVolumeClaim", "three")[0]["spec"]["resources"]["requests"]["storage"] == "7Gi"
    (c,) = job["spec"]["template"]["spec"]["containers"]
    downloads = json.loads(next(e["value"] for e in c["env"] if e["name"] == "AIGO_DOWNLOADS"))
    assert [(d["folder"], d["repo"], d["revision"]) for d in downloads] == [
        ("model", "Qwen/Qwen3-8B", "v1.0"),
        ("draft", "org/eagle3-head", "main"),
    ]
    assert (
        job["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    )
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "gpu"}  # where the engine will run
    deployment = of(objs, "Deployment", "chat")[0]
    mounts = {m["mountPath"]: m for m in engine(deployment)["volumeMounts"]}
    assert mounts["/models/chat"]["readOnly"] and mounts["/models/chat"]["subPath"] == "model"
    assert mounts["/models/chat.draft"]["readOnly"] and mounts["/models/chat.draft"]["subPath"] == "draft"
    (volume,) = [v for v in pod(deployment)["volumes"] if v["name"] == mounts["/models/chat"]["name"]]
    assert volume["persistentVolumeClaim"] == {"claimName": claim["metadata"]["name"], "readOnly": True}


def test_docker_mount_targets_are_the_pod_mount_paths(rendered):
    desired, _, objs = rendered
    for alias, model in desired.models.items():
        paths = {m["mountPath"] for m in engine(of(objs, "Deployment", alias)[0])["volumeMounts"]}
        assert {m.target for m in model.container.mounts} <= paths


def test_a_changed_revision_makes_a_new_volume_and_job(tmp_path):
    one = manifests.objects(*build(tmp_path))
    two = manifests.objects(*build(tmp_path, CONFIG.replace("revision: v1.0", "revision: v1.1")))

    def names(objs, kind):
        return {o["metadata"]["name"] for o in of(objs, kind, "chat")}

    assert names(one, "PersistentVolumeClaim") != names(two, "PersistentVolumeClaim")
    assert names(one, "Job") != names(two, "Job")
    assert names(one, "Deployment") == names(two, "Deployment")  # the model itself keeps its name


def test_node_selector_merges_the_models_own_over_the_sections(rendered):
    objs = rendered[2]
    assert pod(of(objs, "Deployment", "chat")[0])["nodeSelector"] == {"pool": "gpu"}
    assert pod(of(objs, "Deployment", "three")[0])["nodeSelector"] == {"pool": "big"}


def test_labels_and_annotations_carry_the_state(rendered):
    desired, _, objs = rendered
    for obj in objs:
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "aigo-apply"
        assert labels["app.kubernetes.io/instance"] == "lab"
        assert labels["app.kubernetes.io/component"] in ("model", "router", "download")
        assert all(LABEL_VALUE.match(v) and len(v) <= 63 for v in labels.values())
    kube_desired = desired_for_kubernetes(desired)
    for alias in desired.models:
        annotations = of(objs, "Deployment", alias)[0]["metadata"]["annotations"]
        assert annotations[state.MODEL] == alias
        assert state.read_spec(annotations) == kube_desired.models[alias].spec  # what the planner compares
        assert annotations[state.SPEC_HASH].startswith("sha256:")
        assert "model_dir" not in json.dumps(state.read_spec(annotations))  # no host folder of this machine
    router = [o for o in of(objs, "Deployment") if o["metadata"]["labels"]["app.kubernetes.io/component"] == "router"]
    assert state.read_spec(router[0]["metadata"]["annotations"]) == kube_desired.router.spec
    # weighted ahead of the engine pods for the node's CPUs (they request GPUs only): kube/router_objects.py
    assert router[0]["spec"]["template"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "100m"}}
    assert not {"config_dir", "user", "bind"} & set(kube_desired.router.spec)


def test_specs_and_objects_do_not_depend_on_the_machine_that_renders(tmp_path):
    """Two people applying the same file (other homes, other model stores) render the same objects."""
    first = manifests.objects(*build(tmp_path, models_dir="/store"))
    second = manifests.objects(*build(tmp_path, models_dir="/home/someone/else"))
    assert first == second


def test_spec_hash_follows_every_change_a_cluster_would_see(tmp_path):
    def hash_of(text):
        objs = manifests.objects(*build(tmp_path, text))
        return of(objs, "Deployment", "chat")[0]["metadata"]["annotations"][state.SPEC_HASH]

    base = hash_of(CONFIG)
    assert hash_of(CONFIG) == base
    assert hash_of(CONFIG.replace("node_selector: {pool: gpu}", "node_selector: {pool: other}")) != base
    assert hash_of(CONFIG.replace("ready_timeout: 1234", "ready_timeout: 99")) != base
    assert hash_of(CONFIG.replace("context_length: 8192", "context_length: 8000")) != base


def test_router_addresses_each_model_by_its_service_dns_name(rendered):
    desired, _, objs = rendered
    (config,) = of(objs, "ConfigMap")
    cfg = config["data"]["haproxy.cfg"]
    services = {o["metadata"]["annotations"].get(state.MODEL): o for o in of(objs, "Service")}
    for alias in desired.models:
        service = services[alias]
        port = service["spec"]["ports"][0]["port"]
        assert f"server engine {service['metadata']['name']}.llm.svc.cluster.local:{port} check" in cfg
        assert service["spec"]["selector"] == of(objs, "Deployment", alias)[0]["spec"]["selector"]["matchLabels"]
    assert "127.0.0.1:" not in cfg and "bind 0.0.0.0:" in cfg


def test_router_rolls_without_a_gap_when_routes_change(tmp_path):
    def router(text):
        objs = manifests.objects(*build(tmp_path, text))
        return [
            o for o in of(objs, "Deployment") if o["metadata"]["labels"]["app.kubernetes.io/component"] == "router"
        ][0]

    before = router(CONFIG)
    assert before["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
    }
    assert engine(before)["readinessProbe"]["httpGet"]["path"] == "/health"
    after = router(CONFIG.replace("  cpu:\n", "  cpu2:\n"))  # one route renamed
    hash_key = "aigo-apply.io/config-hash"
    assert (
        after["spec"]["template"]["metadata"]["annotations"][hash_key]
        != before["spec"]["template"]["metadata"]["annotations"][hash_key]
    )
    mounted = pod(before)["volumes"][0]["projected"]["sources"]
    assert [s["secret"]["items"] for s in mounted if "secret" in s] == [[{"key": "api-keys", "path": "api-keys"}]]


def test_configmap_files_are_the_routers_files(rendered):
    (config,) = of(rendered[2], "ConfigMap")
    items = pod([o for o in of(rendered[2], "Deployment") if "router" in o["metadata"]["name"]][0])["volumes"][0]
    (source,) = [s["configMap"] for s in items["projected"]["sources"] if "configMap" in s]
    paths = {i["path"] for i in source["items"]}
    assert {"haproxy.cfg", "models.map", "models.lua", "errors/400.json"} <= paths
    assert {i["key"] for i in source["items"]} == set(config["data"])
    assert all(re.fullmatch(r"[-._a-zA-Z0-9]+", key) for key in config["data"])


HOSTILE_ALIASES = ["A" * 64, "a.b", "a_b", "a-b", "x-", "X.", "9z", "Foo.Bar_baz-", "a..b", "Z" * 63 + "_"]


def test_names_are_dns_labels_and_distinct_for_hostile_but_valid_aliases(tmp_path):
    models = "\n".join(
        f"  {json.dumps(alias)}: {{source: {{repo: org/m{n}}}, context_length: 64, gpus: none}}"
        for n, alias in enumerate(HOSTILE_ALIASES)
    )
    project = "p_" + "q" * 29 + "_"  # 32 characters, ending in '_'
    text = f"version: 1\nproject: {project}\nplatform: kubernetes\nmodels:\n{models}\n"
    desired, settings = build(tmp_path, text)
    objs = manifests.objects(desired, settings)
    names = [(o["kind"], o["metadata"]["name"]) for o in objs]
    assert len(names) == len(set(names))
    for kind, name in names:
        assert RFC1035_LABEL.match(name) and len(name) <= 63, (kind, name)
    assert settings.namespace == "p-" + "q" * 29 and RFC1035_LABEL.match(settings.namespace)
    deployments = {
        o["metadata"]["annotations"][state.MODEL]: o
        for o in of(objs, "Deployment")
        if state.MODEL in o["metadata"]["annotations"]
    }
    assert set(deployments) == set(HOSTILE_ALIASES)
    label_names = {d["metadata"]["labels"]["app.kubernetes.io/name"] for d in deployments.values()}
    assert len(label_names) == len(HOSTILE_ALIASES)
    for obj in objs:
        for value in obj["metadata"]["labels"].values():
            assert LABEL_VALUE.match(value) and len(value) <= 63, value


def test_one_model_and_unknown_aliases(rendered):
    desired, settings, objs = rendered
    one = manifests.objects_for_model(desired, settings, "three")
    assert [o for o in one if o["kind"] != "Secret"] == [
        o for o in objs if o["metadata"]["annotations"].get(state.MODEL) == "three" and o["kind"] != "Secret"
    ]
    assert any(
        o["kind"] == "Secret" and o["metadata"]["labels"]["app.kubernetes.io/component"] == "download" for o in one
    )
    with pytest.raises(UsageProblem, match="no model 'nope'|no model nope"):
        manifests.objects_for_model(desired, settings, "nope")
    router = manifests.selected(desired, settings, "router")
    assert {o["metadata"]["labels"]["app.kubernetes.io/component"] for o in router} == {"router"}


def test_objects_share_no_dict_so_the_apply_path_may_edit_one(rendered):
    objs = rendered[2]
    deployment = of(objs, "Deployment", "chat")[0]
    deployment["metadata"]["labels"]["x"] = "y"
    assert all("x" not in o["metadata"]["labels"] for o in objs if o is not deployment)
    assert "x" not in deployment["spec"]["selector"]["matchLabels"]


def test_a_model_larger_than_a_node_is_refused_where_it_is_used(tmp_path):
    desired, settings = build(tmp_path)
    from dataclasses import replace

    with pytest.raises(UnsafeSetting, match="LeaderWorkerSet"):
        manifests.objects(desired, replace(settings, gpus_per_node=2))


def test_a_replace_on_a_cluster_says_which_rollout_and_why(tmp_path):
    from aigo_apply.plan.replace_strategy import Strategy
    from aigo_apply.plan.types import Action
    from aigo_apply.platforms.kubernetes.planning import _rollout

    desired, _ = build(tmp_path)
    for alias, model in desired.models.items():
        action = Action(
            f"model.{alias}", "recreate", ("x changed",), model=alias, strategy=Strategy("parallel", "x"), slot="b"
        )
        placed = _rollout(action, desired)
        assert placed.slot == "a"  # no sockets to alternate on a cluster
        if model.spec["gpus"] == "none":
            assert placed.strategy.name == "parallel" and "rolling update" in placed.strategy.why
        else:
            assert placed.strategy.name == "recreate" and "cannot see the free GPUs" in placed.strategy.why
