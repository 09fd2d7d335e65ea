"""The Kubernetes client adapter, through the real lightkube client over a transport that answers like
the API server: the server-side apply request's shape, LIST selectors, and each error's words."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from aigo_apply.adapters.kube_client import APPLY_CONTENT_TYPE, KubeClient
from aigo_apply.errors import KubeConflict, KubeError, KubeUnavailable
from aigo_apply.platforms.kubernetes.observe import selector

from helpers.fake_kube_api import FakeKubeAPI, model_objects


@pytest.fixture
def fake():
    return FakeKubeAPI()


@pytest.fixture
def client(fake):
    return KubeClient.over_transport(fake, "lab")


def deployment(alias="qwen"):
    return model_objects(alias)[-1]


def test_apply_is_a_server_side_apply_patch_as_aigo_apply(fake, client):
    obj = deployment()
    stored = client.apply(obj)
    (request,) = fake.requests
    assert request.method == "PATCH"
    assert request.path == f"/apis/apps/v1/namespaces/lab/deployments/{obj['metadata']['name']}"
    assert request.content_type == APPLY_CONTENT_TYPE == "application/apply-patch+yaml"
    assert request.query == {"fieldManager": "aigo-apply"}  # no force unless asked
    assert request.body == obj  # the whole object, as rendered
    assert stored["metadata"]["generation"] == 1 and stored["kind"] == "Deployment"
    assert set(fake.managers("Deployment", obj["metadata"]["name"])) == {"aigo-apply"}


def test_force_is_sent_only_when_asked(fake, client):
    client.apply(deployment(), force=True)
    assert fake.requests[-1].query == {"fieldManager": "aigo-apply", "force": "true"}
    client.apply(deployment())
    assert "force" not in fake.requests[-1].query


def test_core_kinds_go_to_the_core_api_path(fake, client):
    service = model_objects("qwen")[0]
    client.apply(service)
    assert fake.requests[-1].path == f"/api/v1/namespaces/lab/services/{service['metadata']['name']}"


def test_list_sends_the_project_selector_in_one_request(fake, client):
    for obj in model_objects("a") + model_objects("b") + model_objects("c", project="other", namespace="lab"):
        fake.put(obj)
    found = client.list("Deployment", labels=selector("lab"))
    assert sorted(d["metadata"]["annotations"]["io.aigo-apply.model"] for d in found) == ["a", "b"]
    assert all(d["kind"] == "Deployment" and d["apiVersion"] == "apps/v1" for d in found)  # items come without them
    (request,) = fake.requests
    assert request.method == "GET" and request.path == "/apis/apps/v1/namespaces/lab/deployments"
    assert request.query["labelSelector"] == "app.kubernetes.io/managed-by=aigo-apply,app.kubernetes.io/instance=lab"


def test_list_with_a_set_based_selector(fake, client):
    for alias in ("a", "b", "c"):
        fake.put(deployment(alias))
    found = client.list("Deployment", labels={"app.kubernetes.io/name": ["a", "c"]})
    assert sorted(d["metadata"]["labels"]["app.kubernetes.io/name"] for d in found) == ["a", "c"]
    assert fake.requests[-1].query["labelSelector"] == "app.kubernetes.io/name in (a,c)"


def test_conflict_names_the_other_manager_and_the_field_and_the_way_out(fake, client):
    obj = deployment()
    theirs = {**obj, "spec": {**obj["spec"], "replicas": 3}}
    fake.seed(theirs, manager="kubectl-client-side-apply")
    with pytest.raises(KubeConflict) as caught:
        client.apply(obj)
    error = caught.value
    assert error.managers == ("kubectl-client-side-apply",) and error.fields == (".spec.replicas",)
    text = str(error)
    assert '"kubectl-client-side-apply"' in text and ".spec.replicas" in text and "--force-conflicts" in text
    assert fake.get("Deployment", obj["metadata"]["name"])["spec"]["replicas"] == 3  # nothing changed

    stored = client.apply(obj, force=True)  # --force-conflicts: the field changes hands
    assert stored["spec"]["replicas"] == 1
    assert ".spec.replicas" in fake.managers("Deployment", obj["metadata"]["name"])["aigo-apply"]
    assert ".spec.replicas" not in fake.managers("Deployment", obj["metadata"]["name"])["kubectl-client-side-apply"]


def test_the_same_value_owned_by_another_manager_is_no_conflict(fake, client):
    obj = deployment()
    fake.seed(obj, manager="kubectl-client-side-apply")
    client.apply(obj)  # shared ownership, as the API server does


def test_get_and_delete_of_a_missing_object(fake, client):
    assert client.get("Deployment", "nope") is None
    assert client.delete("Deployment", "nope") is False
    fake.put(deployment())
    name = deployment()["metadata"]["name"]
    assert client.get("Deployment", name)["metadata"]["name"] == name
    assert client.delete("Deployment", name) is True
    assert fake.requests[-1].method == "DELETE" and fake.requests[-1].query == {"propagationPolicy": "Background"}
    assert fake.get("Deployment", name) is None


def test_unreachable_cluster_says_what_to_check(fake, client):
    fake.unreachable = True
    with pytest.raises(
        KubeUnavailable, match=r"cannot reach the Kubernetes API server https://kube.test .*kubernetes.context"
    ):
        client.list("Deployment", labels=selector("lab"))


def test_refused_credentials(fake, client):
    fake.unauthorized = True
    with pytest.raises(KubeUnavailable, match=r"refused the credentials of context .*401 Unauthorized.*log in again"):
        client.get("Deployment", "x")


def test_forbidden_names_the_verb_and_resource_to_grant(fake, client):
    fake.deny.add(("patch", "deployments"))
    with pytest.raises(KubeUnavailable) as caught:
        client.apply(deployment())
    text = str(caught.value)
    assert "forbidden (403)" in text and "RBAC permission to patch deployments.apps" in text
    assert "kubectl auth can-i patch deployments.apps -n lab" in text


def test_other_refusals_carry_the_servers_words(fake, client):
    job = model_objects("qwen", download=True)[1]
    client.apply(job)
    job["spec"]["template"]["spec"]["containers"][0]["image"] = "other"
    with pytest.raises(KubeError) as caught:
        client.apply(job)
    assert caught.value.code == 422 and caught.value.reason == "Invalid"
    assert f"patch Job {job['metadata']['name']} in namespace 'lab'" in str(caught.value)
    assert "answered 422 Invalid: " in str(caught.value) and "field is immutable" in str(caught.value)


def test_objects_of_another_namespace_or_kind_are_refused_before_sending(fake, client):
    other = deployment()
    other["metadata"]["namespace"] = "kube-system"
    with pytest.raises(KubeError, match="names namespace 'kube-system'"):
        client.apply(other)
    with pytest.raises(KubeError, match="not one aigo-apply makes"):
        client.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "x"}})
    assert fake.requests == []


def test_log_tail_and_events(fake, client):
    obj = deployment()
    fake.script(obj["metadata"]["name"], "crash", log=[f"line {n}" for n in range(50)])
    client.apply(obj)
    (pod,) = fake.names("Pod")
    assert client.log_tail(pod, "engine", 3) == ["line 47", "line 48", "line 49"]
    assert fake.requests[-1].query["tailLines"] == "3"
    events = client.events("Pod", pod)
    assert [e["reason"] for e in events] == ["BackOff"]
    assert fake.requests[-1].query["fieldSelector"] == f"involvedObject.kind=Pod,involvedObject.name={pod}"


def test_log_tail_of_a_container_that_never_ran_is_empty(fake, client):
    obj = deployment()
    fake.script(obj["metadata"]["name"], "unschedulable")
    client.apply(obj)
    (pod,) = fake.names("Pod")
    assert client.log_tail(pod) == []


def test_connect_reads_the_kubeconfig_and_its_context(tmp_path):
    config = tmp_path / "config"
    config.write_text(
        textwrap.dedent(
            """
            apiVersion: v1
            kind: Config
            current-context: one
            clusters:
            - {name: c1, cluster: {server: "https://10.0.0.1:6443", insecure-skip-tls-verify: true}}
            - {name: c2, cluster: {server: "https://10.0.0.2:6443", insecure-skip-tls-verify: true}}
            users:
            - {name: u, user: {token: abc}}
            contexts:
            - {name: one, context: {cluster: c1, user: u, namespace: team}}
            - {name: two, context: {cluster: c2, user: u}}
            """
        )
    )
    first = KubeClient.connect(str(config))
    assert (first.server, first.context, first.namespace) == ("https://10.0.0.1:6443", "one", "team")
    second = KubeClient.connect(str(config), context="two", namespace="lab")
    assert (second.server, second.context, second.namespace) == ("https://10.0.0.2:6443", "two", "lab")
    with pytest.raises(KubeUnavailable, match=r"Context 'three' not found \(contexts in it: one, two\)"):
        KubeClient.connect(str(config), context="three")
    with pytest.raises(KubeUnavailable, match="no kubeconfig at .*missing; set KUBECONFIG"):
        KubeClient.connect(str(tmp_path / "missing"))


def test_importing_the_adapter_or_starting_the_cli_does_not_import_lightkube():
    code = (
        "import sys, aigo_apply.adapters.kube_client, aigo_apply.platforms.kubernetes.apply, aigo_apply.platforms.kubernetes.observe, "
        "aigo_apply.cli.main; print(sorted(m for m in ('lightkube', 'httpx2', 'msgspec') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_fake_bumps_versions_like_the_api_server(fake, client):
    obj = deployment()
    first = client.apply(obj)["metadata"]
    same = client.apply(obj)["metadata"]
    assert (same["resourceVersion"], same["generation"]) == (first["resourceVersion"], first["generation"])
    relabelled = {**obj, "metadata": {**obj["metadata"], "labels": {**obj["metadata"]["labels"], "extra": "1"}}}
    meta = client.apply(relabelled)["metadata"]
    assert meta["resourceVersion"] != first["resourceVersion"] and meta["generation"] == first["generation"]
    changed = model_objects("qwen", {"engine": "vllm", "context_length": 8192, "port": 8001})[-1]
    meta = client.apply(changed)["metadata"]
    assert meta["generation"] == first["generation"] + 1
    assert "extra" not in meta["labels"]  # a field aigo-apply stops applying goes


def test_the_fake_answers_unknown_paths_with_a_not_found_status(fake):
    import httpx2

    with httpx2.Client(transport=fake, base_url="https://kube.test") as http:
        answer = http.get("/apis/example.com/v1/namespaces/lab/widgets")
    assert answer.status_code == 404
    assert answer.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the server could not find the requested resource",
        "reason": "NotFound",
        "details": {},
        "code": 404,
    }
