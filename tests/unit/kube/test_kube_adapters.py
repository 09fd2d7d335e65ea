"""LoRA adapters on a cluster, as on Docker: a repo adapter is downloaded by the model's download Job,
at its revision, into its own sub-path of the model's volume (only an adapter's files), a node-local
adapter folder is a hostPath like a local model's, both are mounted read-only at /adapters/ALIAS, and
the engine's command line is the Docker container's (--enable-lora --lora-modules ...). A changed
adapter revision makes a new volume and Job, so the cluster downloads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aigo_apply.config.kube_rules import placement_problems
from aigo_apply.desired import labels as state
from aigo_apply.desired.build import build_desired, served_on_ports
from aigo_apply.errors import ConfigInvalid
from aigo_apply.kube import manifests
from aigo_apply.kube.settings import settings_of
from aigo_apply.observe.config_file import load_config

from helpers.configs import host_context, write_config

CONFIG = """
version: 1
project: lab
platform: kubernetes
kubernetes:
  storage: {node_local: true}
models:
  base:
    source: {repo: org/base, revision: r1}
    context_length: 4096
    kubernetes: {node_selector: {kubernetes.io/hostname: node-1}}
    vllm: {max_lora_rank: 64}
    adapters:
      sql: {source: {repo: org/sql-lora, revision: a1}}
      notes: {source: {path: /srv/adapters/notes}}
"""


def build(tmp_path: Path, text: str = CONFIG, models_dir: str = "/store"):
    config = load_config(str(write_config(tmp_path, text)))
    return build_desired(config, host_context(Path(models_dir))), settings_of(config.data)


def objects(tmp_path: Path, text: str = CONFIG, models_dir: str = "/store"):
    return manifests.objects(*build(tmp_path, text, models_dir))


def one(objs, kind):
    (found,) = [o for o in objs if o["kind"] == kind and o["metadata"]["annotations"].get(state.MODEL) == "base"]
    return found


def job_downloads(job):
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return json.loads(next(e["value"] for e in container["env"] if e["name"] == "AIGO_DOWNLOADS"))


def test_the_job_downloads_a_repo_adapter_at_its_revision_into_its_own_sub_path(tmp_path):
    downloads = job_downloads(one(objects(tmp_path), "Job"))
    assert [(d["folder"], d["repo"], d["revision"]) for d in downloads] == [
        ("model", "org/base", "r1"),
        ("adapters/sql", "org/sql-lora", "a1"),  # the local adapter is not downloaded
    ]
    patterns = downloads[1]["patterns"]
    assert "adapter_config.json" in patterns and "*.safetensors" in patterns and "tokenizer.json" in patterns
    # only an adapter's files (model_store.select_adapter_files): no base model config or code
    assert not {"config.json", "generation_config.json", "*.py"} & set(patterns)


def test_the_pod_mounts_both_adapters_read_only_and_names_them_on_the_command_line(tmp_path):
    desired, settings = build(tmp_path)
    objs = manifests.objects(desired, settings)
    claim, deployment = one(objs, "PersistentVolumeClaim"), one(objs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (engine,) = pod["containers"]
    mounts = {m["mountPath"]: m for m in engine["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    sql, notes = mounts["/adapters/sql"], mounts["/adapters/notes"]
    assert sql == {"name": "weights", "mountPath": "/adapters/sql", "subPath": "adapters/sql", "readOnly": True}
    assert volumes["weights"]["persistentVolumeClaim"] == {"claimName": claim["metadata"]["name"], "readOnly": True}
    assert notes["readOnly"] is True and "subPath" not in notes
    assert volumes[notes["name"]] == {
        "name": notes["name"],
        "hostPath": {"path": "/srv/adapters/notes", "type": "Directory"},
    }
    args = engine["args"]
    at = args.index("--lora-modules")
    assert args[at - 1] == "--enable-lora"
    assert args[at + 1 : at + 3] == ["notes=/adapters/notes", "sql=/adapters/sql"]
    assert args[args.index("--max-loras") + 1] == "2" and args[args.index("--max-lora-rank") + 1] == "64"
    # the Docker container's command line (a cluster's engine listens on its port)
    assert args == list(served_on_ports(desired).models["base"].container.command)


def test_a_changed_adapter_revision_makes_a_new_volume_and_job(tmp_path):
    one_ = objects(tmp_path)
    two = objects(tmp_path, CONFIG.replace("revision: a1", "revision: a2"))
    for kind in ("PersistentVolumeClaim", "Job"):
        assert one(one_, kind)["metadata"]["name"] != one(two, kind)["metadata"]["name"]
    assert job_downloads(one(two, "Job"))[1]["revision"] == "a2"
    assert one(one_, "Deployment")["metadata"]["name"] == one(two, "Deployment")["metadata"]["name"]
    hash_of = lambda objs: one(objs, "Deployment")["metadata"]["annotations"][state.SPEC_HASH]
    assert hash_of(one_) != hash_of(two)


def test_a_local_adapter_changes_the_pod_but_not_the_download(tmp_path):
    one_ = objects(tmp_path)
    two = objects(tmp_path, CONFIG.replace("/srv/adapters/notes", "/srv/adapters/notes2"))
    assert one(one_, "Job")["metadata"]["name"] == one(two, "Job")["metadata"]["name"]
    assert one(one_, "Deployment") != one(two, "Deployment")


def test_the_recorded_spec_names_no_host_folder_of_a_repo_adapter(tmp_path):
    objs = objects(tmp_path)
    spec = state.read_spec(one(objs, "Deployment")["metadata"]["annotations"])
    assert spec["adapters"] == {
        "notes": {"adapter_dir": "/srv/adapters/notes", "source": {"path": "/srv/adapters/notes"}},
        "sql": {"source": {"repo": "org/sql-lora", "revision": "a1"}},
    }
    assert objs == objects(tmp_path, models_dir="/home/someone/else")  # another machine renders the same


def test_a_local_model_with_a_repo_adapter_gets_a_volume_for_the_adapter_only(tmp_path):
    text = CONFIG.replace("source: {repo: org/base, revision: r1}", "source: {path: /srv/models/base}")
    objs = objects(tmp_path, text)
    assert [d["folder"] for d in job_downloads(one(objs, "Job"))] == ["adapters/sql"]
    (engine,) = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"]
    mounts = {m["mountPath"]: m for m in engine["volumeMounts"]}
    assert "subPath" not in mounts["/models/base"] and mounts["/adapters/sql"]["subPath"] == "adapters/sql"


@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        ("storage: {node_local: true}", "storage: {}", "which a cluster's nodes do not see"),
        ("/srv/adapters/notes", "./notes", "a node-local path must be absolute"),
        ("kubernetes: {node_selector: {kubernetes.io/hostname: node-1}}", "kubernetes: {}", "is not pinned to one"),
    ],
)
def test_a_local_adapter_follows_the_node_local_rules_of_a_local_model(tmp_path, old, new, says):
    path = write_config(tmp_path, CONFIG.replace(old, new))
    with pytest.raises(ConfigInvalid) as info:
        load_config(str(path))
    found = [p.format() for p in info.value.problems]
    assert len(found) == 1 and "models.base.adapters.notes.source.path" in found[0] and says in found[0], found


def test_a_docker_file_with_a_local_adapter_is_held_to_the_same_rules_when_rendered(tmp_path):
    text = CONFIG.replace("platform: kubernetes\n", "").replace("/srv/adapters/notes", "./notes")
    (tmp_path / "notes").mkdir()
    config = load_config(str(write_config(tmp_path, text)))
    found = [p.format() for p in placement_problems(config.file, config.data, config.marks)]
    assert len(found) == 1 and "models.base.adapters.notes.source.path" in found[0], found


def test_the_objects_are_valid_in_strict_mode(tmp_path):
    import kubernetes_validate

    for obj in objects(tmp_path):
        kubernetes_validate.validate(obj, "1.31", strict=True)
