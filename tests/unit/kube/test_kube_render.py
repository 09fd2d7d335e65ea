"""`aigo-apply render --as kubernetes [-f FILE] [ALIAS]`, through the real command line: multi-document
YAML of every object (or one model's, or the router's), and never a secret's value, even with every
secret of the file really set in the environment and in files."""

from __future__ import annotations

import json

import yaml

from helpers.cli import run_cli
from helpers.configs import write_config

VALUES = {
    "WANDB_API_KEY": "wandb-Value-7f3a9c",
    "AIGO_API_KEYS": "router-Key-41d2e8,second-Key-99aa00",
    "HF_TOKEN": "hf_" + "Q" * 34,
}
FILE_VALUE = "from-File-Secret-5b6c7d"


def config(tmp_path) -> str:
    secret = tmp_path / "secret.txt"
    secret.write_text(FILE_VALUE + "\n")
    secret.chmod(0o600)
    return str(
        write_config(
            tmp_path,
            f"""
            version: 1
            project: lab
            platform: kubernetes
            router: {{api_keys: {{from_env: AIGO_API_KEYS}}}}
            models:
              chat:
                source: {{repo: Qwen/Qwen3-8B}}
                context_length: 8192
                env:
                  WANDB_API_KEY: {{from_env: WANDB_API_KEY}}
                  FILE_SECRET: {{from_file: {secret}}}
              other:
                source: {{repo: Qwen/Qwen3-4B}}
                context_length: 4096
            """,
        )
    )


def documents(text: str) -> list[dict]:
    docs = [d for d in yaml.safe_load_all(text) if d is not None]
    for doc in docs:  # what `kubectl apply -f -` needs of each document
        assert {"apiVersion", "kind", "metadata"} <= set(doc) and doc["metadata"]["name"]
    return docs


def test_no_secret_value_ever_appears(tmp_path):
    result = run_cli("render", "--as", "kubernetes", "-f", config(tmp_path), env=VALUES)
    assert result.returncode == 0, result.stderr
    out = result.stdout + result.stderr
    for value in [*VALUES.values(), FILE_VALUE, *VALUES["AIGO_API_KEYS"].split(",")]:
        assert value not in out
    docs = documents(result.stdout)
    secrets = [d for d in docs if d["kind"] == "Secret"]
    assert len(secrets) == 3  # the model's, the router's keys, the Hugging Face token's
    assert all("data" not in s and "stringData" not in s for s in secrets)
    sources = {
        key: ref
        for s in secrets
        for key, ref in json.loads(s["metadata"]["annotations"]["aigo-apply.io/secret-sources"]).items()
    }
    assert sources["WANDB_API_KEY"] == {"from_env": "WANDB_API_KEY"}
    assert sources["FILE_SECRET"] == {"from_file": str(tmp_path / "secret.txt")}
    assert sources["api-keys"] == {"from_env": "AIGO_API_KEYS"}
    assert result.stdout.count("# No values here") == 3


def test_every_object_or_one_models_or_the_routers(tmp_path):
    file = config(tmp_path)
    every = documents(run_cli("render", "--as", "kubernetes", "-f", file).stdout)
    chat = documents(run_cli("render", "--as", "kubernetes", "-f", file, "chat").stdout)
    router = documents(run_cli("render", "-f", file, "router", "--as", "kubernetes").stdout)
    assert len(every) == len(chat) + len(router) + len(
        [d for d in every if d["metadata"]["annotations"].get("io.aigo-apply.model") == "other"]
    )
    assert {d["metadata"]["annotations"].get("io.aigo-apply.model") for d in chat} == {"chat", None}
    assert {d["metadata"]["labels"]["app.kubernetes.io/component"] for d in router} == {"router"}
    assert all(d in every for d in chat + router)


def test_unknown_alias_is_a_usage_error_shown_safely(tmp_path):
    result = run_cli("render", "--as", "kubernetes", "-f", config(tmp_path), "no\nsuch")
    assert result.returncode == 64 and result.stdout == ""
    assert "no model 'no\\nsuch'" in result.stderr and "models: chat, other" in result.stderr


def test_docker_run_still_needs_an_alias(tmp_path):
    result = run_cli("render", "-f", config(tmp_path))
    assert result.returncode == 64 and "name a model ALIAS, or router" in result.stderr
    assert run_cli("render", "-f", config(tmp_path), "chat").stdout.startswith("docker run -d")


def test_a_docker_file_renders_with_the_kubernetes_defaults(tmp_path):
    path = write_config(
        tmp_path, "version: 1\nproject: my_lab\nmodels:\n  m: {source: {repo: a/b}, context_length: 64}\n"
    )
    result = run_cli("render", "--as", "kubernetes", "-f", str(path))
    assert result.returncode == 0, result.stderr
    docs = documents(result.stdout)
    assert {d["metadata"]["namespace"] for d in docs} == {"my-lab"}
    (deployment,) = [
        d for d in docs if d["kind"] == "Deployment" and "m" == d["metadata"]["annotations"].get("io.aigo-apply.model")
    ]
    resources = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert resources == {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}


def test_a_docker_file_with_adapters_renders_them_for_a_cluster(tmp_path):
    path = write_config(
        tmp_path,
        "version: 1\nproject: lab\nmodels:\n  m:\n    source: {repo: a/b}\n    context_length: 64\n"
        "    adapters: {sql: {source: {repo: a/sql}}}\n",
    )
    result = run_cli("render", "--as", "kubernetes", "-f", str(path))
    assert result.returncode == 0, result.stderr
    (deployment,) = [
        d for d in documents(result.stdout) if d["kind"] == "Deployment" and d["metadata"]["name"].count("-m-")
    ]
    (engine,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "sql=/adapters/sql" in engine["args"]
    assert {"name": "weights", "mountPath": "/adapters/sql", "subPath": "adapters/sql", "readOnly": True} in engine[
        "volumeMounts"
    ]
    assert run_cli("render", "-f", str(path), "m").stdout.startswith("docker run -d")  # and Docker serves them


def test_a_secret_with_values_is_never_printed_and_values_go_only_where_asked(tmp_path):
    import base64

    import pytest

    from aigo_apply.errors import UnsafeSetting
    from aigo_apply.kube.render_yaml import to_yaml
    from aigo_apply.kube.secrets import slots, with_values

    docs = documents(run_cli("render", "--as", "kubernetes", "-f", config(tmp_path), "chat").stdout)
    (secret,) = [d for d in docs if d["kind"] == "Secret" and "env" in d["metadata"]["name"]]
    assert sorted(s.key for s in slots(secret)) == ["FILE_SECRET", "WANDB_API_KEY"]
    with pytest.raises(UnsafeSetting, match="expected"):
        with_values(secret, {"WANDB_API_KEY": "x"})  # one key missing
    with pytest.raises(UnsafeSetting, match="expected"):
        with_values(secret, {"WANDB_API_KEY": "x", "FILE_SECRET": "y", "EXTRA": "z"})
    filled = with_values(secret, {"WANDB_API_KEY": "wandb-Value", "FILE_SECRET": "file-Value"})
    assert base64.b64decode(filled["data"]["WANDB_API_KEY"]) == b"wandb-Value" and "data" not in secret
    with pytest.raises(UnsafeSetting, match="holds values"):
        to_yaml([filled])


def test_texts_a_yaml_1_2_reader_takes_for_numbers_stay_texts_for_kubectl(tmp_path):
    """kubectl reads manifests with go-yaml (YAML 1.2's numbers: `1e3`, `0o17`, `-.5e3`, `08` as a
    float): an alias, env values and node selector values shaped like numbers are quoted, so every
    plain scalar of the output reads the same in YAML 1.1 and 1.2 and an annotation stays a string."""
    from helpers.yaml_readers import read_alike

    path = write_config(
        tmp_path,
        """
        version: 1
        project: lab
        platform: kubernetes
        kubernetes: {node_selector: {disk: "1e3", zone: "0o17", rack: "08"}}
        models:
          1e3:
            source: {repo: a/b}
            context_length: 64
            env: {A: "1e3", B: "0o17", C: "-.5e3", D: "2e308", E: "1e-3", F: "y"}
        """,
    )
    result = run_cli("render", "--as", "kubernetes", "-f", str(path))
    assert result.returncode == 0, result.stderr
    assert read_alike(result.stdout) == []
    docs = documents(result.stdout)
    (deployment,) = [
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["annotations"].get("io.aigo-apply.model")
    ]
    assert deployment["metadata"]["annotations"]["io.aigo-apply.model"] == "1e3"
    pod = deployment["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert {k: env[k] for k in "ABCDEF"} == {"A": "1e3", "B": "0o17", "C": "-.5e3", "D": "2e308", "E": "1e-3", "F": "y"}
