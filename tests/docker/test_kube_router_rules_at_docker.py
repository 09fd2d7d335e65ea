"""The router a cluster gets, run by the real HAProxy: the Deployment's own command over the files of
its ConfigMap and key Secret, laid out as the pod's projected volume lays them out (no cluster: the
engines' Service names do not resolve here, which HAProxy starts with). With router.api_keys, its
/metrics answers apply's route wait when the key comes as X-Aigo-Router-Key (the header the API
server's service proxy passes on), and that header opens nothing else: the inference API and
/v1/models still need Authorization."""

from __future__ import annotations

import base64
import time
import uuid
from pathlib import Path

import httpx
import pytest

from aigo_apply.kube.manifests import router as router_objects
from aigo_apply.kube.router_objects import POD_PORT
from aigo_apply.kube.settings import KubeSettings
from aigo_apply.router.haproxy import keys_file

from helpers.configs import free_port
from helpers.planner_inputs import desired

KEY = "sk-cluster-router-0123456789"
CONFIG = """version: 1
project: kr
platform: kubernetes
engines: {vllm: {image: local/engine, image_tag: "1"}}
router: {image: aigo-haproxy, image_tag: bookworm, api_keys: {from_env: KR_KEYS}}
kubernetes: {namespace: kr}
models:
  chat: {source: {repo: org/chat}, context_length: 4096, gpus: none}
"""


def lay_out(rendered: list[dict], folder: Path) -> dict:
    """The router's files where the pod's projected volume puts them; returns its container."""
    deployment = next(o for o in rendered if o["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    data = {o["kind"]: o for o in rendered if o["kind"] in ("ConfigMap", "Secret")}
    for source in pod["volumes"][0]["projected"]["sources"]:
        kind, ref = ("ConfigMap", source["configMap"]) if "configMap" in source else ("Secret", source["secret"])
        for item in ref["items"]:
            target = folder / item["path"]
            target.parent.mkdir(parents=True, exist_ok=True)
            obj = data[kind]
            if kind == "ConfigMap":
                target.write_text(obj["data"][item["key"]])
            elif "stringData" in obj:
                target.write_text(obj["stringData"][item["key"]])
            else:
                target.write_bytes(base64.b64decode(obj["data"][item["key"]]))
            target.chmod(0o444)
    return pod["containers"][0]


@pytest.fixture
def router(tmp_path, runtime, monkeypatch):
    monkeypatch.setenv("KR_KEYS", KEY)
    monkeypatch.setenv("AIGO_STATE_DIR", str(tmp_path / "state"))
    d = desired(tmp_path, CONFIG)
    rendered = router_objects(d, KubeSettings(namespace="kr"))
    secret = next((o for o in rendered if o["kind"] == "Secret"), None)
    assert secret is not None
    secret["stringData"] = {"api-keys": keys_file([KEY])}  # what apply fills in from the key's reference
    conf = tmp_path / "conf"
    container = lay_out(rendered, conf)
    mount = container["volumeMounts"][0]["mountPath"]
    port = free_port()
    name = f"aigo-test-kr-{uuid.uuid4().hex[:8]}"
    made = runtime.api.create_container(
        "aigo-haproxy:bookworm",
        entrypoint=container["command"],
        command=container["args"],
        name=name,
        host_config=runtime.api.create_host_config(
            binds={str(conf): {"bind": mount, "mode": "ro"}}, port_bindings={POD_PORT: ("127.0.0.1", port)}
        ),
        ports=[POD_PORT],
    )
    runtime.api.start(made["Id"])
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    else:
        logs = runtime.api.logs(made["Id"]).decode(errors="replace")
        runtime.api.remove_container(made["Id"], force=True)
        pytest.fail(f"the cluster's router did not start here:\n{logs}")
    yield url
    runtime.api.remove_container(made["Id"], force=True)


def test_the_route_waits_probe_header_opens_metrics_and_nothing_else(router):
    assert httpx.get(f"{router}/metrics", timeout=10).status_code == 401
    probed = httpx.get(f"{router}/metrics", headers={"X-Aigo-Router-Key": f"Bearer {KEY}"}, timeout=10)
    assert probed.status_code == 200 and "haproxy_backend_active_servers" in probed.text
    wrong = httpx.get(
        f"{router}/metrics", headers={"X-Aigo-Router-Key": "Bearer sk-not-the-key-0123456789"}, timeout=10
    )
    assert wrong.status_code == 401
    probe = {"X-Aigo-Router-Key": f"Bearer {KEY}"}
    assert httpx.get(f"{router}/v1/models", headers=probe, timeout=10).status_code == 401
    chat = httpx.post(f"{router}/v1/chat/completions", json={"model": "chat"}, headers=probe, timeout=10)
    assert chat.status_code == 401
    assert httpx.post(f"{router}/metrics", headers=probe, timeout=10).status_code == 401
    keyed = httpx.get(f"{router}/v1/models", headers={"Authorization": f"Bearer {KEY}"}, timeout=10)
    assert keyed.status_code == 200
