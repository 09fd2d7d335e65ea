"""Waiting for a rollout and saying why it failed, from what the API server reports: Unschedulable for
lack of GPUs, ImagePullBackOff, CrashLoopBackOff with the log tail, a failed download Job; and
whether the previous pods still serve (strategy Recreate: the model is down)."""

from __future__ import annotations

import threading

import pytest

from aigo_apply.adapters.kube_client import KubeClient
from aigo_apply.errors import NotReady
from aigo_apply.plan.types import Action, Plan
from aigo_apply.platforms.journal import Journal
from aigo_apply.platforms.kubernetes.apply import KubeApply
from aigo_apply.platforms.kubernetes.observe import read_cluster
from aigo_apply.platforms.kubernetes.rollout import RolloutWait, job_status, rollout_status
from aigo_apply.platforms.outcome import StepLog

from helpers.fake_kube_api import GPU_MESSAGE, Clock, FakeKubeAPI, Reporter, model_objects


@pytest.fixture
def fake():
    return FakeKubeAPI()


@pytest.fixture
def client(fake):
    return KubeClient.over_transport(fake, "lab")


@pytest.fixture
def clock():
    return Clock()


def waiter(client, clock, **kw):
    return RolloutWait(client, clock=clock, sleep=clock.sleep, **kw)


def start(client, fake, outcome, alias="qwen", **script):
    deployment = model_objects(alias)[-1]
    name = deployment["metadata"]["name"]
    fake.script(name, outcome, **script)
    stored = client.apply(deployment)
    return name, stored["metadata"]["generation"]


# -- pure rules -----------------------------------------------------------------------------------------
def test_rollout_status_is_kubectls_rule():
    base = {"metadata": {"generation": 2}, "spec": {"replicas": 1}}
    assert rollout_status({**base, "status": {"observedGeneration": 1}})[0] is False
    status = {"observedGeneration": 2, "updatedReplicas": 1, "replicas": 2, "availableReplicas": 1}
    assert rollout_status({**base, "status": status}) == (False, "1 old replica(s) still terminating")
    status = {"observedGeneration": 2, "updatedReplicas": 1, "replicas": 1, "availableReplicas": 0}
    assert rollout_status({**base, "status": status}) == (False, "0 of 1 updated replicas available")
    status = {"observedGeneration": 2, "updatedReplicas": 1, "replicas": 1, "availableReplicas": 1}
    assert rollout_status({**base, "status": status}) == (True, "available")
    assert rollout_status({**base, "status": status}, generation=3)[0] is False  # a newer one was applied
    stuck = {**status, "conditions": [{"type": "Progressing", "reason": "ProgressDeadlineExceeded", "message": "m"}]}
    assert rollout_status({**base, "status": stuck}) == (False, "progress deadline exceeded: m")
    assert rollout_status({"status": "garbage"})[0] is False  # odd answers never raise


def test_job_status():
    assert job_status({"status": {"conditions": [{"type": "Complete", "status": "True"}]}})[0] == "complete"
    failed = {"status": {"conditions": [{"type": "Failed", "status": "True", "message": "backoff limit"}]}}
    assert job_status(failed) == ("failed", "backoff limit")
    assert job_status({"status": {"active": 1}}) == ("running", "1 pod(s) active")


# -- waits ------------------------------------------------------------------------------------------------
def test_a_rollout_that_takes_a_while_succeeds(client, fake, clock):
    name, generation = start(client, fake, "progressing", gets=4)
    progress: list[tuple[float, str]] = []
    found = waiter(client, clock, on_progress=lambda e, s: progress.append((e, s))).deployment(name, generation, 600)
    assert found["status"]["availableReplicas"] == 1
    assert len(fake.calls("GET", "deployments")) == 4
    assert clock.now < 10


def test_progress_is_reported_every_few_seconds(client, fake, clock):
    name, generation = start(client, fake, "progressing", gets=60)
    progress: list[tuple[float, str]] = []
    waiter(client, clock, on_progress=lambda e, s: progress.append((e, s))).deployment(name, generation, 600)
    assert 3 <= len(progress) < 60
    assert all(later - earlier >= 5 for (earlier, _), (later, _) in zip(progress, progress[1:], strict=False))
    assert progress[0][1] == "0 of 1 updated replicas available"


def test_unschedulable_for_lack_of_gpus_fails_after_a_grace_with_the_schedulers_words(client, fake, clock):
    name, generation = start(client, fake, "unschedulable")
    with pytest.raises(NotReady) as caught:
        waiter(client, clock).deployment(name, generation, 1800)
    text = str(caught.value)
    assert GPU_MESSAGE in text and "cannot be scheduled" in text
    assert "no node has the free nvidia.com/gpu this model asks for" in text
    assert 60 <= clock.now < 120  # the grace, not the whole ready_timeout


def test_unschedulable_for_another_reason_points_at_placement(client, fake, clock):
    message = "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
    name, generation = start(client, fake, "unschedulable", message=message)
    with pytest.raises(NotReady, match="node affinity/selector.*check the node selector, tolerations"):
        waiter(client, clock).deployment(name, generation, 1800)


def test_image_pull_backoff_fails_at_once_with_the_pull_error(client, fake, clock):
    name, generation = start(client, fake, "image_pull")
    with pytest.raises(NotReady) as caught:
        waiter(client, clock).deployment(name, generation, 1800)
    text = str(caught.value)
    assert "cannot pull its image (ImagePullBackOff)" in text
    assert 'Failed to pull image "vllm/vllm-openai:v0.31.0"' in text and "not found" in text
    assert "imagePullSecret" in text and clock.now == 0


def test_crash_loop_fails_with_the_log_tail(client, fake, clock):
    log = ["INFO loading", "ValueError: max_model_len 131072 is larger than the model's 32768"]
    name, generation = start(client, fake, "crash", log=log, exit_code=1)
    with pytest.raises(NotReady) as caught:
        waiter(client, clock).deployment(name, generation, 1800)
    assert "CrashLoopBackOff, 3 restarts, last exit code 1" in str(caught.value)
    assert caught.value.log_tail == log
    log_request = fake.calls("GET", "pods")[-1]
    assert log_request.path.endswith("/log") and log_request.query["tailLines"] == "20"


def test_a_rollout_that_never_completes_times_out_with_what_it_waited_for(client, fake, clock):
    name, generation = start(client, fake, "progressing", gets=10_000)
    with pytest.raises(NotReady, match="did not become available within 30s: 0 of 1 updated replicas available"):
        waiter(client, clock).deployment(name, generation, 30)
    assert 30 <= clock.now < 31


def test_an_interrupt_stops_the_wait(client, fake, clock):
    name, generation = start(client, fake, "progressing", gets=10_000)
    stop = threading.Event()
    stop.set()
    with pytest.raises(NotReady) as caught:
        waiter(client, clock, interrupted=stop).deployment(name, generation, 30)
    assert caught.value.interrupted


def test_a_failed_download_job_says_so_with_its_log(client, fake, clock):
    job = model_objects("qwen", download=True)[1]
    fake.script(job["metadata"]["name"], "failed", log=["401 Client Error: gated repo"])
    client.apply(job)
    with pytest.raises(NotReady) as caught:
        waiter(client, clock).job(job["metadata"]["name"], 3600)
    assert f"Job {job['metadata']['name']} failed (Job has reached the specified backoff limit)" in str(caught.value)
    assert caught.value.log_tail == ["401 Client Error: gated repo"]


# -- through the apply engine: what still serves -------------------------------------------------------
def run(tmp_path, client, clock, objs, kind="recreate"):
    reporter = Reporter()
    log = StepLog(Journal(tmp_path), reporter)
    engine = KubeApply(client, log, resolve=lambda slot: "v", wait=waiter(client, clock))
    action = Action("model.qwen", kind, ("test",), model="qwen", ready_timeout=1800)
    plan = Plan("lab", "aigo.yaml", "sha256:" + "0" * 64, (action,))
    return engine.run(plan, objs, read_cluster(client, "lab")), reporter


def test_a_failed_recreate_with_strategy_recreate_says_the_model_is_down(tmp_path, client, fake, clock):
    old = model_objects("qwen")
    for obj in old:
        client.apply(obj)
    new = model_objects("qwen", {"engine": "vllm", "context_length": 8192})
    fake.script(new[-1]["metadata"]["name"], "unschedulable")
    report, reporter = run(tmp_path, client, clock, new)
    (outcome,) = report.outcomes
    assert not outcome.ok and GPU_MESSAGE in outcome.message
    assert "model 'qwen' is down: its strategy Recreate stopped the previous pod" in outcome.message
    assert ("step", {"address": "model.qwen", "step": "recreate", "outcome": "failed", "message": outcome.message}) in (
        reporter.events
    )


def test_a_failed_rolling_update_says_the_previous_pods_still_serve(tmp_path, client, fake, clock):
    for obj in model_objects("qwen", strategy="RollingUpdate"):
        client.apply(obj)
    new = model_objects("qwen", {"engine": "vllm", "context_length": 8192}, strategy="RollingUpdate")
    fake.script(new[-1]["metadata"]["name"], "crash", log=["boom"])
    report, reporter = run(tmp_path, client, clock, new)
    (outcome,) = report.outcomes
    assert "the previous pods still serve model 'qwen'" in outcome.message
    assert outcome.log_tail == ["boom"]
    assert ("log_tail", {"address": "model.qwen", "lines": ["boom"]}) in reporter.events


def test_a_failed_create_says_the_model_does_not_serve(tmp_path, client, fake, clock):
    objs = model_objects("qwen")
    fake.script(objs[-1]["metadata"]["name"], "image_pull")
    report, _ = run(tmp_path, client, clock, objs, kind="create")
    assert "model 'qwen' does not serve (nothing served it before)" in report.outcomes[0].message
