"""The apply engine for a cluster, through the real lightkube client over the fake API server: the
order of its requests, Secrets filled at apply time and never shown, conflicts and --force-conflicts,
prune (only the project's objects, never another's, never a damaged one) and destroy."""

from __future__ import annotations

import base64
import copy
import json
import threading

import pytest

from aigo_apply.adapters.kube_client import KubeClient
from aigo_apply.config import kube_names as names
from aigo_apply.desired import labels as L
from aigo_apply.errors import AigoError
from aigo_apply.kube.secrets import secret_object
from aigo_apply.plan.facts import PlanRequest
from aigo_apply.plan.types import Action, Plan
from aigo_apply.platforms.journal import Journal
from aigo_apply.platforms.kubernetes.apply import KubeApply, destroy
from aigo_apply.platforms.kubernetes.observe import read_cluster
from aigo_apply.platforms.kubernetes.rollout import RolloutWait
from aigo_apply.platforms.outcome import StepLog

from helpers.fake_kube_api import Clock, FakeKubeAPI, Reporter, model_objects, router_objects

SECRET = "s3cret-value-for-test-only"


@pytest.fixture
def fake():
    return FakeKubeAPI()


@pytest.fixture
def client(fake):
    return KubeClient.over_transport(fake, "lab")


@pytest.fixture
def reporter():
    return Reporter()


def engine(tmp_path, client, reporter, **kw):
    clock = Clock()
    kw.setdefault("resolve", lambda slot: SECRET)
    log = StepLog(Journal(tmp_path), reporter)
    return KubeApply(client, log, wait=RolloutWait(client, clock=clock, sleep=clock.sleep), clock=clock, **kw)


def act(address, kind, **kw):
    model = address.split(".", 1)[1] if address.startswith("model.") else None
    return Action(address, kind, ("test",), model=model, ready_timeout=600.0, **kw)


def plan(*actions, target=()):
    return Plan("lab", "aigo.yaml", "sha256:" + "0" * 64, tuple(actions), request=PlanRequest(target=frozenset(target)))


def sent(fake):
    """(method, kind plural, name) of every write request."""
    out = []
    for r in fake.requests:
        if r.method in ("PATCH", "DELETE"):
            parts = r.path.split("/")
            out.append((r.method, parts[-2], parts[-1]))
    return out


def name(alias):
    return names.model_name("lab", alias)


def test_create_applies_each_object_in_order_and_awaits_the_rollout(tmp_path, fake, client, reporter):
    objs = model_objects("a", env_secret="A_KEY") + router_objects()
    report = engine(tmp_path, client, reporter).run(
        plan(act("model.a", "create"), act("router", "create")), objs, read_cluster(client, "lab")
    )
    assert [(o.address, o.ok) for o in report.outcomes] == [("router", True), ("model.a", True)]
    assert sent(fake) == [
        ("PATCH", "secrets", names.env_secret_name("lab", "a")),
        ("PATCH", "services", name("a")),
        ("PATCH", "deployments", name("a")),
        ("PATCH", "configmaps", names.router_name("lab")),
        ("PATCH", "services", names.router_name("lab")),
        ("PATCH", "deployments", names.router_name("lab")),
    ]
    patches = fake.calls("PATCH")
    assert {(r.content_type, json.dumps(r.query, sort_keys=True)) for r in patches} == {
        ("application/apply-patch+yaml", '{"fieldManager": "aigo-apply"}')
    }
    assert "rolled out" in report.outcomes[1].message
    assert (
        "step",
        {"address": "model.a", "step": "create", "outcome": "ok", "message": report.outcomes[1].message},
    ) in (reporter.events)


def test_secret_values_reach_only_the_api_server(tmp_path, fake, client, reporter):
    objs = model_objects("a", env_secret="A_KEY")
    asked = []
    run = engine(tmp_path, client, reporter, resolve=lambda slot: asked.append(slot) or SECRET)
    run.run(plan(act("model.a", "create")), objs, read_cluster(client, "lab"))
    (slot,) = asked
    assert (slot.key, slot.ref.kind, slot.ref.target) == ("API_KEY", "from_env", "A_KEY")
    (secret_patch,) = fake.calls("PATCH", "secrets")
    encoded = base64.b64encode(SECRET.encode()).decode()
    assert secret_patch.body["data"] == {"API_KEY": encoded}
    stored = fake.get("Secret", names.env_secret_name("lab", "a"))
    assert stored["data"] == {"API_KEY": encoded} and SECRET not in json.dumps(stored["metadata"])
    shown = json.dumps(reporter.events) + (tmp_path / "journal.jsonl").read_text()
    assert SECRET not in shown and encoded not in shown
    assert objs[0].get("data") is None  # the rendered object itself is never filled


def test_a_secret_without_a_value_is_not_applied(tmp_path, fake, client, reporter):
    hub = secret_object(
        names.hub_secret_name("lab"), "lab", names.labels("lab", "hub-token", "download"), {"token": None}
    )
    run = engine(tmp_path, client, reporter, resolve=lambda slot: None if slot.ref is None else SECRET)
    run.run(plan(act("model.a", "create")), model_objects("a") + [hub], read_cluster(client, "lab"))
    assert fake.names("Secret") == [] and fake.names("Deployment") == [name("a")]


def test_an_unreadable_secret_stops_the_run_before_any_change(tmp_path, fake, client, reporter):
    def refuse(slot):
        raise AigoError("models.a.env.API_KEY: the environment variable A_KEY is not set")

    with pytest.raises(AigoError, match="A_KEY is not set"):
        engine(tmp_path, client, reporter, resolve=refuse).run(
            plan(act("model.a", "create")), model_objects("a", env_secret="A_KEY"), read_cluster(client, "lab")
        )
    assert sent(fake) == []


def test_objects_without_the_projects_labels_are_refused_before_any_change(tmp_path, fake, client, reporter):
    objs = model_objects("a")
    del objs[0]["metadata"]["labels"]["app.kubernetes.io/instance"]
    with pytest.raises(AigoError, match="lacks project 'lab''s labels"):
        engine(tmp_path, client, reporter).run(plan(act("model.a", "create")), objs, read_cluster(client, "lab"))
    assert sent(fake) == []


def test_the_download_job_completes_before_the_deployment_is_applied(tmp_path, fake, client, reporter):
    objs = model_objects("a", download=True)
    job = objs[1]["metadata"]["name"]
    fake.script(job, "failed", log=["HTTP 401: gated repo"])
    report = engine(tmp_path, client, reporter).run(plan(act("model.a", "create")), objs, read_cluster(client, "lab"))
    (outcome,) = report.outcomes
    assert not outcome.ok and f"Job {job} failed" in outcome.message and outcome.log_tail == ["HTTP 401: gated repo"]
    assert sent(fake) == [("PATCH", "persistentvolumeclaims", job), ("PATCH", "jobs", job)]  # no Deployment


def test_a_finished_download_job_that_renders_differently_is_kept(tmp_path, fake, client, reporter):
    objs = model_objects("a", download=True)
    for obj in objs:
        client.apply(obj)
    changed = copy.deepcopy(objs)
    changed[1]["spec"]["template"]["spec"]["containers"][0]["image"] = "newer"  # a Job's template is immutable
    report = engine(tmp_path, client, reporter).run(
        plan(act("model.a", "recreate")), changed, read_cluster(client, "lab")
    )
    assert report.outcomes[0].ok and ("DELETE", "jobs", objs[1]["metadata"]["name"]) not in sent(fake)


def test_a_conflict_fails_that_model_only_and_force_conflicts_takes_over(tmp_path, fake, client, reporter):
    objs = model_objects("a") + model_objects("b")
    theirs = copy.deepcopy(objs[1])
    theirs["spec"]["replicas"] = 0
    fake.seed(theirs, manager="kubectl-edit")
    report = engine(tmp_path, client, reporter).run(
        plan(act("model.a", "create"), act("model.b", "create")), objs, read_cluster(client, "lab")
    )
    by = {o.address: o for o in report.outcomes}
    assert not by["model.a"].ok and by["model.b"].ok
    assert '"kubectl-edit"' in by["model.a"].message and ".spec.replicas" in by["model.a"].message
    assert "--force-conflicts" in by["model.a"].message

    fake.requests.clear()
    report = engine(tmp_path, client, reporter, force_conflicts=True).run(
        plan(act("model.a", "recreate")), objs[:2], read_cluster(client, "lab")
    )
    assert report.outcomes[0].ok and fake.get("Deployment", name("a"))["spec"]["replicas"] == 1
    assert {r.query.get("force") for r in fake.calls("PATCH")} == {"true"}


def test_remove_deletes_a_models_objects_before_others_start(tmp_path, fake, client, reporter):
    for obj in model_objects("old", env_secret="K", download=True):
        client.apply(obj)
    fake.requests.clear()
    report = engine(tmp_path, client, reporter).run(
        plan(act("model.old", "remove"), act("model.a", "create")), model_objects("a"), read_cluster(client, "lab")
    )
    writes = sent(fake)
    deletes = [w for w in writes if w[0] == "DELETE"]
    assert [w[1] for w in deletes] == ["deployments", "services", "jobs", "persistentvolumeclaims", "secrets"]
    assert writes.index(deletes[-1]) < writes.index(("PATCH", "deployments", name("a")))
    assert [(o.address, o.kind, o.ok) for o in report.outcomes] == [
        ("model.old", "remove", True),
        ("model.a", "create", True),
    ]
    assert not [n for n in fake.names("Deployment") if n != name("a")]


def put_others(fake):
    """What prune and destroy must never touch: another project's objects, objects without our
    labels, and a damaged object with our labels."""
    for obj in model_objects("x", project="other"):
        fake.put(obj)
    foreign = copy.deepcopy(model_objects("y")[0])
    foreign["metadata"]["labels"] = {"app": "theirs"}
    fake.put(foreign)
    damaged = copy.deepcopy(model_objects("z")[-1])
    damaged["metadata"]["name"] = "not-ours-by-name"
    fake.put(damaged)
    return {("Service", names.model_name("other", "x")), ("Deployment", names.model_name("other", "x"))} | {
        ("Service", foreign["metadata"]["name"]),
        ("Deployment", "not-ours-by-name"),
    }


def present(fake):
    return {(kind, n) for kind, _, n in fake.objects if kind not in ("Pod", "Event")}


def test_prune_deletes_only_this_projects_objects_that_the_file_no_longer_has(tmp_path, fake, client, reporter):
    before = model_objects("a", env_secret="K", download=True)
    for obj in before:
        client.apply(obj)
    kept = put_others(fake)
    now = model_objects("a")  # no env Secret, no download any more
    report = engine(tmp_path, client, reporter).run(plan(act("model.a", "noop")), now, read_cluster(client, "lab"))
    assert [(o.address, o.kind, o.ok) for o in report.outcomes] == [("model.a", "prune", True)]
    assert [w for w in sent(fake) if w[0] == "DELETE"] == [
        ("DELETE", "jobs", before[2]["metadata"]["name"]),
        ("DELETE", "persistentvolumeclaims", before[1]["metadata"]["name"]),
        ("DELETE", "secrets", before[0]["metadata"]["name"]),
    ]
    assert present(fake) == kept | {("Service", name("a")), ("Deployment", name("a"))}


def test_prune_with_target_stays_within_the_targeted_models(tmp_path, fake, client, reporter):
    for obj in model_objects("a", env_secret="K") + model_objects("b", env_secret="K"):
        client.apply(obj)
    now = model_objects("a") + model_objects("b")
    engine(tmp_path, client, reporter).run(plan(act("model.a", "noop"), target=["a"]), now, read_cluster(client, "lab"))
    assert fake.names("Secret") == [names.env_secret_name("lab", "b")]


def test_a_failed_models_old_objects_are_kept_for_the_next_try(tmp_path, fake, client, reporter):
    for obj in model_objects("a", env_secret="K"):
        client.apply(obj)
    now = model_objects("a", {"engine": "vllm", "context_length": 8192, "port": 8001})
    fake.script(name("a"), "crash")
    report = engine(tmp_path, client, reporter).run(plan(act("model.a", "recreate")), now, read_cluster(client, "lab"))
    assert [o.ok for o in report.outcomes] == [False]
    assert fake.names("Secret") == [names.env_secret_name("lab", "a")]


def test_destroy_removes_every_object_of_the_project_and_nothing_else(tmp_path, fake, client, reporter):
    for obj in model_objects("a", env_secret="K", download=True) + model_objects("b") + router_objects():
        client.apply(obj)
    kept = put_others(fake)
    cluster = read_cluster(client, "lab")
    fake.requests.clear()
    report = destroy(client, cluster, StepLog(Journal(tmp_path), reporter))
    assert [(o.address, o.ok) for o in report.outcomes] == [("model.a", True), ("model.b", True), ("router", True)]
    assert present(fake) == kept
    deletes = sent(fake)
    assert deletes[0] == ("DELETE", "deployments", name("a"))  # each model's Deployment goes first
    assert deletes.index(("DELETE", "deployments", names.router_name("lab"))) > deletes.index(
        ("DELETE", "deployments", name("b"))
    )
    assert len(cluster.observed.damaged) == 1  # warned about, left alone


def test_an_interrupted_run_starts_nothing(tmp_path, fake, client, reporter):
    stop = threading.Event()
    stop.set()
    report = engine(tmp_path, client, reporter, interrupted=stop).run(
        plan(act("model.a", "create")), model_objects("a"), read_cluster(client, "lab")
    )
    assert report.interrupted and sent(fake) == []


def test_many_models_apply_side_by_side(tmp_path, fake, client, reporter):
    aliases = [f"m{n}" for n in range(12)]
    objs = [o for a in aliases for o in model_objects(a)]
    report = engine(tmp_path, client, reporter).run(
        plan(*(act(f"model.{a}", "create") for a in aliases)), objs, read_cluster(client, "lab")
    )
    assert all(o.ok for o in report.outcomes) and len(report.outcomes) == 12
    assert sorted(fake.names("Deployment")) == sorted(name(a) for a in aliases)


def test_journal_records_the_run(tmp_path, fake, client, reporter):
    engine(tmp_path, client, reporter).run(
        plan(act("model.a", "create")), model_objects("a"), read_cluster(client, "lab")
    )
    entries = [json.loads(line) for line in (tmp_path / "journal.jsonl").read_text().splitlines()]
    assert entries[0]["outcome"] == "started" and entries[-1]["outcome"] == "finished"
    assert {e["address"] for e in entries} == {"project.lab", "model.a"}
    assert L.PREFIX  # the annotations the renderer writes are the Docker labels
