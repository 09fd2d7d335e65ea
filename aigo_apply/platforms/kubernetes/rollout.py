"""Waiting for a rollout, and saying why one failed. A Deployment is rolled out when the controller has
seen its latest generation and every updated replica is available (kubectl's `rollout status` rule);
a download Job when it completes. While waiting, the pods are read: a definitive failure ends the
wait at once, with its reason worded from the pod's status and events: Unschedulable (e.g.
"0/3 nodes are available: 3 Insufficient nvidia.com/gpu." after a short grace, since a scheduler may
still find room), ImagePullBackOff, CrashLoopBackOff with the container's log tail, a container
config error. Polls with a capped backoff (one GET, one pod LIST per poll); the clock and sleep are
passed in, so tests run in no time."""

from __future__ import annotations

import builtins
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from aigo_apply.errors import NotReady
from aigo_apply.json_types import JsonMap, JsonObject, obj

FIRST_DELAY, MAX_DELAY, BACKOFF = 0.5, 5.0, 1.5
PROGRESS_EVERY = 5.0  # seconds between progress reports
UNSCHEDULABLE_GRACE = 60.0  # seconds a pod may stay unschedulable before the wait gives up
LOG_LINES = 20
PULL_REASONS = ("ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull")
CONFIG_REASONS = ("CreateContainerConfigError", "CreateContainerError", "RunContainerError")


class RolloutClient(Protocol):
    def get(self, kind: str, name: str) -> JsonObject | None: ...
    def list(self, kind: str, labels: Mapping[str, str] | None = None) -> builtins.list[JsonObject]: ...
    def events(self, kind: str, name: str) -> builtins.list[JsonObject]: ...
    def log_tail(self, pod: str, container: str | None = None, lines: int = 20) -> builtins.list[str]: ...


def _condition(resource: JsonMap, kind: str) -> JsonObject:
    conditions = obj(resource.get("status")).get("conditions")
    found = (
        [c for c in conditions if isinstance(c, dict) and c.get("type") == kind] if isinstance(conditions, list) else []
    )
    return found[0] if found else {}


def _count(value: object) -> int:
    return value if type(value) is int else 0


def _strings(labels: JsonMap) -> dict[str, str]:
    """A label selector's matchLabels (the API server keeps only text values there)."""
    return {k: v for k, v in labels.items() if isinstance(v, str)}


def rollout_status(deployment: JsonMap, generation: int | None = None) -> tuple[bool, str]:
    """(done, what it waits for): kubectl's rule, for the latest generation (or `generation`)."""
    meta, spec, status = (obj(deployment.get(k)) for k in ("metadata", "spec", "status"))
    want = max(_count(meta.get("generation")), generation or 0)
    if _count(status.get("observedGeneration")) < want:
        return False, "waiting for the Deployment controller to see the new version"
    progressing = _condition(deployment, "Progressing")
    if progressing.get("reason") == "ProgressDeadlineExceeded":
        return False, f"progress deadline exceeded: {progressing.get('message') or 'no progress'}"
    replicas = _count(spec.get("replicas")) if type(spec.get("replicas")) is int else 1
    updated = _count(status.get("updatedReplicas"))
    if updated < replicas:
        return False, f"{updated} of {replicas} replicas updated"
    if _count(status.get("replicas")) > updated:
        return False, f"{_count(status.get('replicas')) - updated} old replica(s) still terminating"
    available = _count(status.get("availableReplicas"))
    if available < updated:
        return False, f"{available} of {updated} updated replicas available"
    return True, "available"


def job_status(job: JsonMap) -> tuple[str, str]:
    """('complete' | 'failed' | 'running', message) of a Job."""
    for kind, word in (("Complete", "complete"), ("Failed", "failed")):
        condition = _condition(job, kind)
        if condition.get("status") == "True":
            return word, str(condition.get("message") or condition.get("reason") or word)
    return "running", f"{_count(obj(job.get('status')).get('active'))} pod(s) active"


@dataclass(frozen=True)
class Diagnosis:
    """Why a pod does not serve: `kind` unschedulable | image_pull | crash | config | failed | pending."""

    kind: str
    pod: str
    container: str | None
    message: str
    definitive: bool


def diagnose(pods: Sequence[JsonMap]) -> Diagnosis | None:
    """The first reason, in the order a user should fix them, that one of the pods does not serve
    (terminating pods are skipped: they are the previous version going away)."""
    found: list[tuple[int, Diagnosis]] = []
    for pod in pods:
        meta, status = obj(pod.get("metadata")), obj(pod.get("status"))
        if meta.get("deletionTimestamp"):
            continue
        name = str(meta.get("name") or "")
        scheduled = _condition(pod, "PodScheduled")
        if scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
            found.append((0, Diagnosis("unschedulable", name, None, str(scheduled.get("message") or ""), False)))
        statuses = status.get("containerStatuses")
        for container in (c for c in (statuses if isinstance(statuses, list) else []) if isinstance(c, dict)):
            cname = str(container.get("name") or "")
            waiting = obj(obj(container.get("state")).get("waiting"))
            terminated = obj(obj(container.get("state")).get("terminated")) or obj(
                obj(container.get("lastState")).get("terminated")
            )
            reason, message = str(waiting.get("reason") or ""), str(waiting.get("message") or "")
            if reason in PULL_REASONS:
                image = str(container.get("image") or "")
                found.append((1, Diagnosis("image_pull", name, cname, message or f"cannot pull {image}", True)))
            elif reason in CONFIG_REASONS:
                found.append((2, Diagnosis("config", name, cname, message or reason, True)))
            elif reason == "CrashLoopBackOff":
                code = terminated.get("exitCode")
                restarts = _count(container.get("restartCount"))
                found.append((3, Diagnosis("crash", name, cname, f"{restarts} restarts, last exit code {code}", True)))
            elif status.get("phase") == "Failed" and terminated:
                found.append((3, Diagnosis("failed", name, cname, f"exit code {terminated.get('exitCode')}", True)))
    return min(found, key=lambda f: f[0])[1] if found else None


def explain(diagnosis: Diagnosis, events: Sequence[JsonMap], resource: str = "nvidia.com/gpu") -> str:
    """One sentence for a failed rollout, with the cluster's own words from the pod and its events."""
    said = _event_messages(events)
    if diagnosis.kind == "unschedulable":
        hint = (
            f"no node has the free {resource} this model asks for: another workload holds them or the nodes have "
            f"fewer; free them, or lower the model's gpus"
            if f"Insufficient {resource}" in diagnosis.message
            else "check the node selector, tolerations and resource requests against the nodes"
        )
        return f"pod {diagnosis.pod} cannot be scheduled: {diagnosis.message} ({hint})"
    if diagnosis.kind == "image_pull":
        failed = next((m for r, m in said if r in ("Failed", "ErrImagePull")), diagnosis.message)
        return (
            f"pod {diagnosis.pod} cannot pull its image (ImagePullBackOff): {failed}; check the image name and tag, "
            "and that the nodes can reach the registry (with an imagePullSecret for a private one)"
        )
    if diagnosis.kind == "config":
        return f"pod {diagnosis.pod} cannot start its container: {diagnosis.message}"
    if diagnosis.kind == "crash":
        return (
            f"the engine in pod {diagnosis.pod} exits and Kubernetes keeps restarting it (CrashLoopBackOff, "
            f"{diagnosis.message}); its last log lines follow"
        )
    return f"pod {diagnosis.pod} failed ({diagnosis.message}); its last log lines follow"


def _event_messages(events: Sequence[JsonMap]) -> list[tuple[str, str]]:
    return [(str(e.get("reason") or ""), str(e.get("message") or "")) for e in events if isinstance(e, dict)]


@dataclass
class RolloutWait:
    """Waits on the cluster through `client`; raises NotReady with the reason and any log tail."""

    client: RolloutClient
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    interrupted: threading.Event = field(default_factory=threading.Event)
    on_progress: Callable[[float, str], None] | None = None  # elapsed seconds, what it waits for
    unschedulable_grace: float = UNSCHEDULABLE_GRACE
    gpu_resource: str = "nvidia.com/gpu"
    _next_report: float = field(default=PROGRESS_EVERY, init=False)

    def deployment(self, name: str, generation: int | None, timeout: float) -> JsonObject:
        """Block until Deployment `name` has rolled out `generation`; the Deployment as last read."""
        start, self._next_report = self.clock(), PROGRESS_EVERY
        delay, unschedulable_since = FIRST_DELAY, None
        while True:
            if self.interrupted.is_set():
                raise NotReady(f"interrupted while waiting for Deployment {name}", interrupted=True)
            found = self.client.get("Deployment", name)
            if found is None:
                raise NotReady(f"Deployment {name} was deleted while its rollout was awaited")
            done, waiting_for = rollout_status(found, generation)
            if done:
                return found
            if waiting_for.startswith("progress deadline exceeded"):
                raise NotReady(f"Deployment {name}: {waiting_for}")
            selector = obj(obj(found.get("spec")).get("selector")).get("matchLabels")
            pods = self.client.list("Pod", labels=_strings(selector)) if isinstance(selector, dict) and selector else []
            diagnosis = diagnose(pods)
            elapsed = self.clock() - start
            if diagnosis and diagnosis.kind == "unschedulable":
                unschedulable_since = unschedulable_since if unschedulable_since is not None else elapsed
            else:
                unschedulable_since = None
            stuck = unschedulable_since is not None and elapsed - unschedulable_since >= self.unschedulable_grace
            if diagnosis and (diagnosis.definitive or stuck):
                self._fail(diagnosis)
            if elapsed >= timeout:
                why = self._why(diagnosis) if diagnosis else waiting_for
                raise NotReady(f"Deployment {name} did not become available within {timeout:g}s: {why}")
            self._progress(elapsed, waiting_for if diagnosis is None else explain(diagnosis, [], self.gpu_resource))
            self.sleep(min(delay, max(timeout - elapsed, 0.0)))
            delay = min(delay * BACKOFF, MAX_DELAY)

    def job(self, name: str, timeout: float) -> None:
        """Block until Job `name` completes; a failed Job raises with its pod's log tail."""
        start, delay, self._next_report = self.clock(), FIRST_DELAY, PROGRESS_EVERY
        while True:
            if self.interrupted.is_set():
                raise NotReady(f"interrupted while waiting for Job {name}", interrupted=True)
            found = self.client.get("Job", name)
            if found is None:
                raise NotReady(f"Job {name} was deleted while it was awaited")
            state, message = job_status(found)
            if state == "complete":
                return
            pods = self.client.list("Pod", labels={"job-name": name})
            diagnosis = diagnose(pods)
            if state == "failed":
                if diagnosis:
                    self._fail(diagnosis, f"Job {name} failed ({message})")
                raise NotReady(f"Job {name} failed: {message}")
            if diagnosis and diagnosis.kind in ("image_pull", "config"):  # a failed pod is retried (backoffLimit)
                self._fail(diagnosis, f"Job {name}")
            elapsed = self.clock() - start
            if elapsed >= timeout:
                raise NotReady(f"Job {name} did not complete within {timeout:g}s: {message}")
            self._progress(elapsed, f"Job {name}: {message}")
            self.sleep(min(delay, max(timeout - elapsed, 0.0)))
            delay = min(delay * BACKOFF, MAX_DELAY)

    def _progress(self, elapsed: float, stage: str) -> None:
        if self.on_progress and elapsed >= self._next_report:
            self._next_report = elapsed + PROGRESS_EVERY
            self.on_progress(elapsed, stage)

    def _why(self, diagnosis: Diagnosis) -> str:
        return explain(diagnosis, self.client.events("Pod", diagnosis.pod), self.gpu_resource)

    def _fail(self, diagnosis: Diagnosis, prefix: str = "") -> None:
        tail = (
            self.client.log_tail(diagnosis.pod, diagnosis.container, LOG_LINES)
            if diagnosis.kind in ("crash", "failed")
            else []
        )
        message = self._why(diagnosis)
        raise NotReady(f"{prefix}: {message}" if prefix else message, log_tail=tail)
