"""The commands a user types, on a cluster: `plan`, `apply`, `status` and `destroy` with a file that says
`platform: kubernetes` (or `--platform kubernetes`), through the real CLI in-process, the real lightkube
client and the fake API server (tests/helpers/fake_kube_api.py). Docker is never reached."""

from __future__ import annotations

import copy
import json

import pytest

from aigo_apply.adapters.kube_client import KubeClient

from helpers.configs import write_config
from helpers.fake_kube_api import FakeKubeAPI

KUBE = """version: 1
project: lab
platform: kubernetes
engines: {vllm: {image: local/engine, image_tag: "1"}}
kubernetes: {namespace: lab}
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
SECRET = "s3cr3t-value-never-shown-0123456789"


@pytest.fixture
def fake(monkeypatch, tmp_path):
    import aigo_apply.adapters.docker_engine
    import aigo_apply.platforms.kubernetes.platform

    api = FakeKubeAPI()
    monkeypatch.setattr(
        aigo_apply.platforms.kubernetes.platform, "connect", lambda s: KubeClient.over_transport(api, s.namespace)
    )

    def refuse(*_a, **_k):
        raise AssertionError("Docker was reached")

    monkeypatch.setattr(aigo_apply.adapters.docker_engine, "DockerRuntime", refuse)
    monkeypatch.setenv("MY_KEY", SECRET)
    monkeypatch.setenv("HF_TOKEN", "")
    monkeypatch.setenv("AIGO_STATE_DIR", str(tmp_path / "state"))
    return api


def cli(capsys, *args):
    from aigo_apply.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err, err
    return exit_info.value.code, out, err


def test_plan_apply_noop_change_status_destroy(tmp_path, fake, capsys):
    path = str(write_config(tmp_path, KUBE))
    code, out, _ = cli(capsys, "plan", "-f", path, "--detailed-exitcode")
    assert code == 2 and "model.beta will be created" in out and "model.gamma will be created" in out
    assert "(because no Deployment aigo-lab-beta-" in out and "no container" not in out

    code, out, err = cli(capsys, "apply", "-f", path, "-y")
    assert code == 0, out + err
    deployments = fake.names("Deployment")
    assert len(deployments) == 3 and all(n.startswith("aigo-lab-") for n in deployments)  # two models, the router
    patches = fake.calls("PATCH")
    assert patches and all(r.query.get("fieldManager") == "aigo-apply" for r in patches)
    assert all("force" not in r.query for r in patches)

    code, out, _ = cli(capsys, "plan", "-f", path, "--detailed-exitcode")
    assert code == 0 and out.startswith("No changes."), out

    changed = str(write_config(tmp_path, KUBE.replace("max_num_seqs: 8", "max_num_seqs: 16")))
    code, out, _ = cli(capsys, "plan", "-f", changed, "--detailed-exitcode")
    assert code == 2 and "vllm.max_num_seqs" in out and "model.beta will be replaced" in out, out
    assert "model.gamma will be" not in out

    code, out, _ = cli(capsys, "status", "-f", path, "-o", "json")
    report = json.loads(out)
    assert report["platform"] == "kubernetes" and report["namespace"] == "lab"
    assert {m["alias"]: m["state"] for m in report["models"]} == {"beta": "running", "gamma": "running"}

    code, out, err = cli(capsys, "destroy", "-f", path, "-y")
    assert code == 0, out + err
    assert fake.names("Deployment") == [] and fake.names("Service") == []


def test_secret_values_go_only_to_the_api_server(tmp_path, fake, capsys):
    path = str(write_config(tmp_path, KUBE))
    code, out, err = cli(capsys, "apply", "-f", path, "-y", "-o", "json")
    assert code == 0, err
    assert SECRET not in out + err
    sent = [r for r in fake.calls("PATCH") if SECRET in json.dumps(r.body) or _b64(SECRET) in json.dumps(r.body)]
    assert sent and all("/secrets/" in r.path for r in sent)
    journal = (tmp_path / "state").rglob("journal.jsonl")
    assert all(SECRET not in p.read_text() for p in journal)


def _b64(text: str) -> str:
    import base64

    return base64.b64encode(text.encode()).decode()


def test_a_docker_file_goes_to_the_cluster_with_platform_kubernetes(tmp_path, fake, capsys):
    path = str(write_config(tmp_path, KUBE.replace("platform: kubernetes\n", "")))
    code, out, _ = cli(capsys, "plan", "-f", path, "--platform", "kubernetes", "--detailed-exitcode")
    assert code == 2 and "model.beta will be created" in out


def test_a_cluster_file_refuses_docker_only_commands_plainly(tmp_path, fake, capsys):
    path = str(write_config(tmp_path, KUBE))
    code, _, err = cli(capsys, "models", "list", "-f", path)
    assert code == 1
    assert "deploys to Kubernetes (platform: kubernetes), and this command works on Docker only" in err


def test_a_field_owned_by_another_manager_is_a_conflict_until_forced(tmp_path, fake, capsys):
    path = str(write_config(tmp_path, KUBE))
    assert cli(capsys, "apply", "-f", path, "-y")[0] == 0
    name = next(n for n in fake.names("Deployment") if "beta" in n)
    live = fake.get("Deployment", name)
    fake.seed({**live, "spec": {**live["spec"], "replicas": 1}}, manager="kubectl-client-side-apply")
    changed = str(write_config(tmp_path, KUBE.replace("max_num_seqs: 8", "max_num_seqs: 16")))

    code, out, err = cli(capsys, "apply", "-f", changed, "-y")
    assert code == 1
    assert "kubectl-client-side-apply" in out + err and "--force-conflicts" in out + err

    code, out, err = cli(capsys, "apply", "-f", changed, "-y", "--force-conflicts")
    assert code == 0, out + err
    assert any(r.query.get("force") == "true" for r in fake.calls("PATCH"))
    assert cli(capsys, "plan", "-f", changed, "--detailed-exitcode")[0] == 0


def test_a_saved_plan_is_refused_on_a_cluster(tmp_path, fake, capsys):
    path = str(write_config(tmp_path, KUBE))
    code, _, err = cli(capsys, "plan", "-f", path, "--out", str(tmp_path / "p.json"))
    assert code == 64 and "Docker only" in err
    assert not (tmp_path / "p.json").exists()


def test_a_new_revision_prunes_the_old_volume_and_reports_it(tmp_path, fake, capsys):
    path = str(write_config(tmp_path, KUBE))
    assert cli(capsys, "apply", "-f", path, "-y")[0] == 0
    before = set(fake.names("PersistentVolumeClaim"))
    moved = str(write_config(tmp_path, KUBE.replace("revision: v1", "revision: v2")))
    code, out, err = cli(capsys, "apply", "-f", moved, "-y")
    assert code == 0, out + err
    after = set(fake.names("PersistentVolumeClaim"))
    assert len(before - after) == 1 and len(after - before) == 1  # beta's v1 volume went, v2's came
    assert "pruned" in out
    assert cli(capsys, "plan", "-f", moved, "--detailed-exitcode")[0] == 0


ON_DEMAND_DOCKER = """version: 1
project: lab
engines: {vllm: {image: local/engine, image_tag: "1"}}
models:
  a: {source: {repo: org/a, revision: v1}, context_length: 4096, gpus: [0], on_demand: true}
  b: {source: {repo: org/b, revision: v1}, context_length: 4096, gpus: [0], on_demand: true}
"""


@pytest.mark.parametrize("command", [["render", "--as", "kubernetes"], ["plan", "--platform", "kubernetes"]])
def test_on_demand_models_never_reach_a_cluster(tmp_path, fake, capsys, command):
    """Their engines run with vLLM's development endpoints open: refused on a cluster, however it is asked."""
    path = str(write_config(tmp_path, ON_DEMAND_DOCKER))
    code, out, err = cli(capsys, *command, "-f", path)
    assert code == 1 and "on-demand models run on Docker only" in err
    assert "VLLM_SERVER_DEV_MODE" not in out and not fake.requests


def test_projects_whose_names_look_alike_never_share_an_instance_label():
    """`lab-` is no label value; its instance label must never be another project's (`lab-` + a hash
    was one): a hashed value holds a '.', which no project name can."""
    import re

    from aigo_apply.config.kube_names import instance
    from aigo_apply.config.schema import schema

    pattern = schema()["properties"]["project"]["pattern"]
    for project in ("lab-", "lab_", "a-b-", "x_-"):
        value = instance(project)
        assert "." in value and not re.search(pattern, value)
    assert instance("lab") == "lab" and instance("lab-b4e231") == "lab-b4e231"


def test_an_object_with_our_labels_but_another_projects_annotations_is_left_alone(tmp_path, fake, capsys):
    path = str(write_config(tmp_path, KUBE))
    assert cli(capsys, "apply", "-f", path, "-y")[0] == 0
    name = next(n for n in fake.names("Service") if "beta" in n)
    stranger = copy.deepcopy(fake.get("Service", name))
    stranger["metadata"] = {**stranger["metadata"], "name": "someone-elses"}
    stranger["metadata"]["annotations"] = {**stranger["metadata"]["annotations"], "io.aigo-apply.project": "other"}
    fake.seed(stranger, manager="someone")
    code, out, err = cli(capsys, "destroy", "-f", path, "-y")
    assert code == 0, out + err
    assert fake.names("Service") == ["someone-elses"]  # ours went; the other project's (same labels) stayed


@pytest.mark.parametrize(
    "path",
    ["/var/lib/rancher/k3s/server/tls", "/var/lib/etcd", "/var/lib/minikube/certs", "/opt/cni/bin", "/var/lib/k0s"],
)
def test_a_node_local_folder_is_never_a_nodes_own_state(tmp_path, path):
    """A node-local hostPath runs on a cluster node as root: its etcd, k3s certificates and CNI plugins are refused."""
    from aigo_apply.errors import ConfigInvalid
    from aigo_apply.observe.config_file import load_config

    text = (
        "version: 1\nproject: lab\nplatform: kubernetes\n"
        "kubernetes: {storage: {node_local: true}, node_selector: {kubernetes.io/hostname: node1}}\n"
        f"models:\n  m: {{source: {{path: {path}}}, context_length: 1024, gpus: none}}\n"
    )
    with pytest.raises(ConfigInvalid) as info:
        load_config(str(write_config(tmp_path, text)))
    assert "system folder" in " ".join(p.format() for p in info.value.problems)


TOKEN = "hf_" + "x" * 34


@pytest.mark.parametrize(
    ("engines", "gets_token"),
    [
        ("", True),  # the default vllm/vllm-openai image
        ('engines: {vllm: {image: local/engine, image_tag: "1"}}\n', False),
        ('kubernetes: {namespace: lab, download_image: "attacker.example/collect:latest"}\n', False),
        ('kubernetes: {namespace: lab, download_image: "vllm/vllm-openai@sha256:' + "a" * 64 + '"}\n', True),
    ],
)
def test_the_hub_token_goes_only_to_a_trusted_download_image(tmp_path, fake, capsys, monkeypatch, engines, gets_token):
    """The token is the applying user's; the download image is the file's choice."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    text = KUBE.replace('engines: {vllm: {image: local/engine, image_tag: "1"}}\n', "")
    if engines.startswith("kubernetes"):
        text = text.replace("kubernetes: {namespace: lab}\n", engines)
    else:
        text = text.replace("kubernetes: {namespace: lab}\n", engines + "kubernetes: {namespace: lab}\n")
    code, out, err = cli(capsys, "apply", "-f", str(write_config(tmp_path, text)), "-y")
    assert code == 0, out + err
    sent = any(TOKEN in json.dumps(r.body) or _b64(TOKEN) in json.dumps(r.body) for r in fake.calls("PATCH"))
    assert sent is gets_token
    assert TOKEN not in out + err and (gets_token or "the Hugging Face token is not given" in err)


def test_a_cluster_apply_takes_the_projects_one_lock(tmp_path, fake, capsys):
    """The lock of platforms/project_lock.py, as on Docker: a second run of the project from this machine
    is refused while one holds it, and nothing reaches the cluster."""
    from aigo_apply.platforms.project_lock import ProjectLock
    from aigo_apply.platforms.state_dir import state_dir

    path = str(write_config(tmp_path, KUBE))
    with ProjectLock(state_dir("lab", tmp_path / "state"), "lab", "apply"):
        code, _, err = cli(capsys, "apply", "-f", path, "-y")
    assert code == 1 and "project 'lab' is locked by another aigo-apply run" in err, err
    assert fake.names("Deployment") == []


def test_logs_on_a_cluster_read_each_models_pod_and_the_routers_redacted(tmp_path, fake, capsys):
    path = str(write_config(tmp_path, KUBE))
    code, out, err = cli(capsys, "apply", "-f", path, "-y")
    assert code == 0, out + err
    pods = {p: o for (kind, _, p), o in fake.objects.items() if kind == "Pod"}
    component = {p: o["metadata"]["labels"]["app.kubernetes.io/component"] for p, o in pods.items()}
    for pod, role in component.items():
        name = pods[pod]["metadata"]["labels"]["app.kubernetes.io/name"]
        fake.logs[("lab", pod)] = [f"{role} {name} line {i}" for i in range(3)] + (
            [f"key is {SECRET}"] if name == "beta" else []
        )
    code, out, err = cli(capsys, "logs", "-f", path)
    assert code == 0, err
    lines = out.splitlines()
    assert "beta | key is ***" in lines and SECRET not in out + err
    assert {line.split(" | ")[0] for line in lines} == {"beta", "gamma", "router"}
    assert [line for line in lines if line.startswith("gamma | ")] == [
        f"gamma | model gamma line {i}" for i in range(3)
    ]
    code, out, _ = cli(capsys, "logs", "gamma", "--tail", "1", "-f", path)
    assert code == 0 and out == "model gamma line 2\n"
    log_reads = [r for r in fake.requests if r.path.endswith("/log")]
    assert (
        log_reads and log_reads[-1].query.get("tailLines") == "1" and log_reads[-1].query.get("container") == "engine"
    )
    code, out, err = cli(capsys, "logs", "nope", "-f", path)
    assert code == 64 and "no model 'nope'" in err and out == ""


def test_an_adapter_serves_on_a_cluster_and_its_new_revision_replaces_its_model(tmp_path, fake, capsys):
    adapter = "    adapters: {sql: {source: {repo: org/sql-lora, revision: a1}}}\n"
    text = KUBE.replace("    env: {MY_KEY: {from_env: MY_KEY}}\n", "    env: {MY_KEY: {from_env: MY_KEY}}\n" + adapter)
    path = str(write_config(tmp_path, text))
    code, out, err = cli(capsys, "apply", "-f", path, "-y")
    assert code == 0, out + err
    assert "note: max_lora_rank 16: the rank of adapter sql is not known" in out  # nothing reads the volume
    code, out, _ = cli(capsys, "plan", "-f", path, "--detailed-exitcode")
    assert code == 0 and out.startswith("No changes."), out
    moved = str(write_config(tmp_path, text.replace("revision: a1", "revision: a2")))
    code, out, _ = cli(capsys, "plan", "-f", moved, "--detailed-exitcode")
    assert code == 2 and "model.beta will be replaced" in out and "model.gamma will be" not in out, out
    assert "(because adapter 'sql' changed: org/sql-lora@a1 -> org/sql-lora@a2)" in out


def test_on_a_cluster_a_repo_adapter_is_sized_by_its_adapter_config_on_the_hub(tmp_path, fake, capsys, monkeypatch):
    """Nothing of the adapter is on this machine (the cluster's Job fetches it): the plan asks the Hub
    for its adapter_config.json, so the engine's --max-lora-rank is the adapter's rank there too."""
    from helpers.hub import Hub

    adapter = "    adapters: {sql: {source: {repo: org/sql-lora, revision: main}}}\n"
    text = KUBE.replace("    env: {MY_KEY: {from_env: MY_KEY}}\n", "    env: {MY_KEY: {from_env: MY_KEY}}\n" + adapter)
    path = str(write_config(tmp_path, text))
    with Hub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        config = {"r": 64, "target_modules": ["q_proj"], "base_model_name_or_path": "org/beta"}
        hub.add("org/sql-lora", {"adapter_config.json": json.dumps(config).encode(), "adapter_model.safetensors": b"a"})
        code, out, err = cli(capsys, "apply", "-f", path, "-y")
        assert code == 0, out + err
        assert "is not known" not in out
        assert not [p for p, _ in hub.file_gets() if not p.endswith("/adapter_config.json")]  # no model asked
    args = fake.get("Deployment", next(n for (k, _, n) in fake.objects if k == "Deployment" and "beta" in n))
    command = args["spec"]["template"]["spec"]["containers"][0]["args"]
    assert command[command.index("--max-lora-rank") + 1] == "64"
