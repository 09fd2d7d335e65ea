"""apply waits until the router routes each model it applied: the router is asked through the API
server's service proxy (its /v1/models, or /metrics when it has API keys, since the API server strips
the caller's Authorization header), within the model's remaining wait; a model it never lists fails
with the reason, and a refused services/proxy permission says how to grant it."""

from __future__ import annotations

import pytest
from unit.platforms.kubernetes.test_kube_apply import SECRET, act, engine, plan

from aigo_apply.adapters.kube_client import KubeClient
from aigo_apply.config import kube_names as names
from aigo_apply.desired.types import SecretRef
from aigo_apply.kube.secrets import API_KEYS_KEY, secret_object
from aigo_apply.platforms.kubernetes.observe import read_cluster
from aigo_apply.platforms.kubernetes.router_wait import healthy_backends, listed_models, routes
from aigo_apply.router.haproxy import keys_file

from helpers.fake_kube_api import FakeKubeAPI, Reporter, model_objects, router_objects

ROUTER = names.router_name("lab")
PROXY = f"/api/v1/namespaces/lab/services/{ROUTER}:http/proxy"
FILES = {"haproxy.cfg": "global\n", "models.map": "a be_a\nb be_b\n"}


@pytest.fixture
def fake():
    return FakeKubeAPI()


@pytest.fixture
def client(fake):
    return KubeClient.over_transport(fake, "lab")


@pytest.fixture
def reporter():
    return Reporter()


def router(keys: bool = False):
    objs = router_objects(files=FILES)
    if keys:
        labels = names.labels("lab", "router", "router")
        objs.insert(0, secret_object(ROUTER, "lab", labels, {API_KEYS_KEY: SecretRef("from_env", "ROUTER_KEYS")}))
    return objs


def proxied(fake):
    return [r for r in fake.requests if "/proxy" in r.path]


def run(tmp_path, fake, client, reporter, aliases=("a",), keys=False, **kw):
    objs = [o for a in aliases for o in model_objects(a)] + router(keys)
    actions = [act(f"model.{a}", "create") for a in aliases] + [act("router", "create")]
    app = engine(tmp_path, client, reporter, **kw)
    return app, app.run(plan(*actions), objs, read_cluster(client, "lab"))


def test_the_table_and_answers_are_read():
    assert routes({"models.map": "a be_a\nb be_b\n\n"}) == {"a": "be_a", "b": "be_b"}
    assert routes({}) == {}
    assert listed_models('{"object": "list", "data": [{"id": "a"}, {"x": 1}]}') == {"a"}
    assert listed_models("<html>") == set()
    text = 'haproxy_backend_active_servers{proxy="be_a"} 1\nhaproxy_backend_active_servers{proxy="be_b"} 0\n'
    assert healthy_backends(text) == {"be_a"}


def test_apply_waits_until_the_router_lists_the_model(tmp_path, fake, client, reporter):
    _, report = run(tmp_path, fake, client, reporter)
    assert [(o.address, o.ok) for o in report.outcomes] == [("router", True), ("model.a", True)]
    assert "the router routes it after" in report.outcomes[1].message
    calls = proxied(fake)
    assert calls and {(r.method, r.path) for r in calls} == {("GET", f"{PROXY}/v1/models")}
    # the router's Deployment was applied before the router was asked
    router_patch = max(i for i, r in enumerate(fake.requests) if r.method == "PATCH" and r.path.endswith(ROUTER))
    assert fake.requests.index(calls[0]) > router_patch
    steps = [f for k, f in reporter.events if k == "step" and f["address"] == "model.a"]
    assert [s["outcome"] for s in steps] == ["", "", "ok"]  # one final ok, after the router's check


def test_one_request_per_poll_for_all_models(tmp_path, fake, client, reporter):
    _, report = run(tmp_path, fake, client, reporter, aliases=("a", "b"))
    assert all(o.ok for o in report.outcomes)
    assert len(proxied(fake)) == 1


def test_a_model_the_router_never_lists_fails_within_its_wait(tmp_path, fake, client, reporter):
    fake.router_down = {"a"}
    app, report = run(tmp_path, fake, client, reporter, aliases=("a", "b"))
    by = {o.address: o for o in report.outcomes}
    assert by["model.b"].ok and by["router"].ok
    failed = by["model.a"]
    assert not failed.ok
    assert "rolled out" in failed.message and "the router does not route model 'a' yet" in failed.message
    assert "it routes b" in failed.message and f"kubectl -n lab logs deploy/{ROUTER}" in failed.message
    clock = app.wait.clock
    assert clock() <= 600 + 900 + 5  # bounded by the model's own wait (ready_timeout + pull allowance)
    assert 10 < len(proxied(fake)) < 2000
    assert any(k == "waiting" and f["address"] == "model.a" and "router" in f["stage"] for k, f in reporter.events)


def test_a_router_that_does_not_roll_out_skips_the_check(tmp_path, fake, client, reporter):
    fake.script(ROUTER, "image_pull")
    _, report = run(tmp_path, fake, client, reporter)
    by = {o.address: o for o in report.outcomes}
    assert not by["router"].ok and by["model.a"].ok
    assert "not checked with the router" in by["model.a"].message and proxied(fake) == []


def test_forbidden_services_proxy_says_how_to_grant_it(tmp_path, fake, client, reporter):
    fake.deny.add(("get", "services/proxy"))
    _, report = run(tmp_path, fake, client, reporter)
    failed = {o.address: o for o in report.outcomes}["model.a"]
    assert not failed.ok and len(proxied(fake)) == 1
    assert "get services/proxy" in failed.message and "forbidden (403)" in failed.message
    assert "kubectl auth can-i get services/proxy -n lab" in failed.message
    assert 'resources: ["services/proxy"], verbs: ["get"]' in failed.message


def test_a_router_with_api_keys_is_asked_through_metrics_with_its_key_in_the_probe_header(
    tmp_path, fake, client, reporter
):
    """The router's /metrics needs a key (unless router.metrics_without_key): the wait sends one as
    X-Aigo-Router-Key, which the service proxy passes on (Authorization it would take for itself)."""
    _, report = run(
        tmp_path, fake, client, reporter, keys=True, resolve=lambda slot: keys_file([SECRET]), router_key=SECRET
    )
    assert all(o.ok for o in report.outcomes), report.outcomes
    assert {r.path for r in proxied(fake)} == {f"{PROXY}/metrics"}
    assert {r.probe for r in proxied(fake)} == {f"Bearer {SECRET}"}
    assert not any(SECRET in str(r.body) or SECRET in r.path for r in proxied(fake))


def test_without_the_routers_key_the_wait_says_the_router_answered_401(tmp_path, fake, client, reporter):
    _, report = run(tmp_path, fake, client, reporter, keys=True, resolve=lambda slot: keys_file([SECRET]))
    failed = {o.address: o for o in report.outcomes}["model.a"]
    assert not failed.ok and "the router's Service answered 401" in failed.message, failed.message
    assert "log in again" not in failed.message  # the router's 401 is not the API server's


def test_a_model_without_a_route_is_not_awaited(tmp_path, fake, client, reporter):
    objs = model_objects("c") + router()
    report = engine(tmp_path, client, reporter).run(
        plan(act("model.c", "create"), act("router", "create")), objs, read_cluster(client, "lab")
    )
    assert all(o.ok for o in report.outcomes) and proxied(fake) == []
