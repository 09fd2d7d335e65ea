"""A Kubernetes cluster as a platform (platforms/platform.py) for plan, apply, status and destroy
(`platform: kubernetes` or `--platform kubernetes`): the same file, the same planner, the same plan
output and the same converge loop (app/converge.py) as on Docker. The cluster is read with one LIST
per kind (platforms/kubernetes/observe.py), the objects come from the pure renderer (kube/manifests.py), and changes
go out by server-side apply (platforms/kubernetes/apply.py). Secret values are read here, at apply time only, and go
nowhere but the API server."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from aigo_apply.adapters.hub import token
from aigo_apply.adapters.kube_client import KubeClient
from aigo_apply.config import kube_rules
from aigo_apply.config.load import Config
from aigo_apply.config.platforms import platform_of
from aigo_apply.config.secret_values import unquoted
from aigo_apply.desired.adapters import adapter_downloads
from aigo_apply.desired.types import DesiredState
from aigo_apply.errors import ConfigInvalid, UsageProblem
from aigo_apply.json_types import JsonObject, JsonValue, arr, obj
from aigo_apply.kube.manifests import objects
from aigo_apply.kube.secrets import API_KEYS_KEY, SecretSlot
from aigo_apply.kube.settings import KubeSettings, settings_of
from aigo_apply.plan.facts import PlanRequest
from aigo_apply.plan.types import Action, Plan
from aigo_apply.platforms.capabilities import LACKS
from aigo_apply.platforms.host_context import current_host, desired_state
from aigo_apply.platforms.hub_facts import cluster_adapters
from aigo_apply.platforms.journal import Journal
from aigo_apply.platforms.kubernetes.apply import KubeApply, destroy
from aigo_apply.platforms.kubernetes.logs import log_stream
from aigo_apply.platforms.kubernetes.observe import ClusterState, read_cluster
from aigo_apply.platforms.kubernetes.planning import plan_for_cluster
from aigo_apply.platforms.kubernetes.rollout import RolloutWait
from aigo_apply.platforms.outcome import StepLog
from aigo_apply.platforms.platform import LogStream, Run
from aigo_apply.platforms.project_lock import ProjectLock
from aigo_apply.platforms.router_keys import digest_of, read_keys
from aigo_apply.platforms.secrets import resolve as read_secret
from aigo_apply.platforms.state_dir import state_dir
from aigo_apply.router.haproxy import keys_file

if TYPE_CHECKING:
    from aigo_apply.platforms.platform import Execution
    from aigo_apply.platforms.requests import ApplyRequest, LogsRequest
    from aigo_apply.platforms.views import Console

# How the cluster is reached: tests put a client over a transport that answers like the API server.
connect: Callable[[KubeSettings], KubeClient] = lambda s: KubeClient.connect(context=s.context, namespace=s.namespace)


class KubePlatform:
    """A cluster as a platform (platforms/platform.py): one run's view of the file, rendered, and the
    cluster it is applied to."""

    name = "kubernetes"
    lacks = LACKS["kubernetes"]
    where = " on the cluster"

    def __init__(self, config: Config, plans: bool = False):
        """`plans`: the run makes a plan (plan, apply): the Hub is asked first what the file's repo LoRA
        adapters are (their rank sizes the engine's --max-lora-rank), so the desired state is built once,
        with the answers; status, logs and destroy ask the Hub nothing."""
        _check_placement(config)
        host = current_host()
        hub = cluster_adapters(adapter_downloads(config, host)) if plans else {}
        # a node-local adapter's rank is read here too (desired_state reads the adapters' folders)
        self.desired: DesiredState = desired_state(config, host, hub or None)
        self.state_root = host.state_root
        self.project, self.file = self.desired.project, self.desired.file
        self.settings = settings_of(config.data)
        self._client: KubeClient | None = None
        self._rendered: list[JsonObject] = []

    @property
    def client(self) -> KubeClient:
        """The cluster's client, connected on first use: what admit and the command line refuse is
        refused before any kubeconfig is read."""
        if self._client is None:
            self._client = connect(self.settings)
        return self._client

    def admit(self, request: PlanRequest, saved: Plan | None) -> None:
        if saved is not None:
            raise UsageProblem(
                "a saved plan is applied on Docker only for now; run `aigo-apply apply --platform kubernetes` "
                "with the file (it shows the plan and asks)"
            )
        if request.pull == "never":
            raise UsageProblem("--pull never has no meaning on a cluster: its nodes pull the images")
        if request.require_canary:
            raise UsageProblem(
                "--require-canary: the canary gate runs on Docker only for now (a cluster rolls its pods itself)"
            )

    def lock(self, command: str, timeout: float) -> AbstractContextManager[object]:
        """The project's one lock (platforms/project_lock.py), as on Docker: two runs from this machine never
        apply or destroy the same project at once (the cluster's own field managers guard the rest)."""
        return ProjectLock(state_dir(self.project, self.state_root), self.project, command, timeout)

    def observe(self) -> ClusterState:
        return read_cluster(self.client, self.project)

    def plan(self, observed: ClusterState, request: PlanRequest) -> Plan:
        """The digest of the router's keys rolls its pod when a key changes (never the keys themselves);
        repo adapters are sized by what the Hub said of them before the one build (__init__, `plans`)."""
        digest = digest_of(self.project, read_keys(self.desired.router.spec))
        router = dataclasses.replace(self.desired.router.settings, keys_digest=digest)
        keyed = dataclasses.replace(self.desired, router=dataclasses.replace(self.desired.router, settings=router))
        self._rendered = objects(keyed, self.settings)
        request = PlanRequest(request.replace, request.target, request.ignore)  # the nodes pull; no aigo.lock
        return plan_for_cluster(keyed, observed, self._rendered, request=request)

    def destroy_plan(self, observed: ClusterState) -> Plan:
        """Every object of the project, to be deleted (platforms/kubernetes/apply.destroy)."""
        reason = f"destroy removes every object of project '{self.project}'"
        actions = tuple(Action(f"{o.kind}/{o.name}", "remove", (reason,)) for o in observed.objects)
        return Plan(self.project, self.file, "", actions)

    def show(self, console: Console, command: str, plan: Plan) -> None:
        if command != "destroy":
            console.show_plan(plan)
            return
        names = [a.address for a in plan.actions]
        console.say(
            f"destroy removes every object of project '{self.project}' in namespace '{self.settings.namespace}' "
            f"({len(names)}): {', '.join(names) or 'none'}"
        )

    def executor(
        self, command: str, plan: Plan, observed: ClusterState, request: ApplyRequest, console: Console
    ) -> Execution:
        folder = state_dir(self.project, self.state_root) / "kubernetes"
        folder.mkdir(exist_ok=True)
        run = KubeApply(
            self.client,
            StepLog(Journal(folder), console),
            resolve=_resolver(self.desired, self.settings, console),
            force_conflicts=request.force_conflicts,
            wait=RolloutWait(self.client, gpu_resource=self.settings.gpu_resource),
            router_key=None if command == "destroy" else next(iter(read_keys(self.desired.router.spec) or []), None),
        )
        if command == "destroy":
            return Run(run.interrupted, lambda: destroy(self.client, observed, run.log))
        rendered = self._rendered
        return Run(run.interrupted, lambda: run.run(plan, rendered, observed))

    def settled(
        self,
        command: str,
        plan: Plan,
        request: ApplyRequest,
        console: Console,
        canaries: tuple[JsonObject, ...] = (),
    ) -> None:
        pass  # nothing of the cluster's is kept on this machine

    def status(self) -> JsonObject:
        """Each model's Deployment as the cluster reports it, and whether its settings match the file."""
        cluster = self.observe()
        plan = plan_for_cluster(self.desired, cluster, objects(self.desired, self.settings))
        kinds = {a.address: a.kind for a in plan.actions}
        seen = {c.alias: c for c in cluster.observed.ours if c.alias}
        models: list[JsonValue] = []
        for alias in sorted(self.desired.models):
            found = seen.get(alias)
            models.append(
                {
                    "alias": alias,
                    "deployment": found.name if found else None,
                    "state": found.state if found else "missing",
                    "status": found.status if found else "",
                    "drift": kinds.get(f"model.{alias}", "noop") != "noop",
                }
            )
        return {
            "platform": "kubernetes",
            "project": self.project,
            "namespace": self.settings.namespace,
            "context": self.client.context,
            "models": models,
            "damaged": list(cluster.observed.damaged),
        }

    def logs(self, request: LogsRequest) -> LogStream:
        return log_stream(self.client, self.project, self.desired, request)

    def status_text(self, report: JsonObject) -> str:
        lines = [f"project '{report['project']}' on namespace '{report['namespace']}' (context {report['context']})"]
        for m in arr(report["models"]):  # status() made each row an object
            row = obj(m)
            drift = "  (differs from the file: run plan)" if row["drift"] else ""
            lines.append(f"  {row['alias']}: {row['state']} {row['status']}".rstrip() + drift)
        lines += [f"  warning: {d}" for d in arr(report["damaged"])]
        return "\n".join(lines)


def _check_placement(config: Config) -> None:
    """A Docker file sent to a cluster with --platform is held to the cluster's rules too."""
    if platform_of(config.data) != "kubernetes":
        problems = kube_rules.placement_problems(config.file, config.data, config.marks)
        if problems:
            raise ConfigInvalid(config.file, unquoted(problems))


# Images a download Job may get the Hugging Face token in. The token is the applying user's (the file
# never names it), and `kubernetes.download_image` / `engines.vllm.image` come from the file, which
# may be a repository its user does not fully trust: any other image gets no token (public repos
# still download) and apply says so.
TOKEN_IMAGES = ("vllm/vllm-openai", "docker.io/vllm/vllm-openai", "lmsysorg/sglang", "docker.io/lmsysorg/sglang")


def token_image_ok(image: str) -> bool:
    """`image`'s repository (no digest, no tag; a registry port stays, and is then no match) is trusted."""
    name = image.split("@", 1)[0]
    if ":" in name.rsplit("/", 1)[-1]:
        name = name[: name.rindex(":")]
    return name in TOKEN_IMAGES


def _resolver(desired: DesiredState, settings: KubeSettings, console: Console) -> Callable[[SecretSlot], str | None]:
    """A Secret's value at apply time: the Hugging Face token (None for a public repo, or for a
    download image outside TOKEN_IMAGES), the router's key file, or a model's reference."""

    def resolve(slot: SecretSlot) -> str | None:
        if slot.ref is None:
            if not token_image_ok(settings.download_image):
                console.say(
                    f"the Hugging Face token is not given to the download image {settings.download_image!r}: "
                    f"only {', '.join(TOKEN_IMAGES[::2])} get it (the file chose that image); public repos "
                    "still download, a gated one fails its Job",
                    err=True,
                )
                return None
            return token()
        if slot.key == API_KEYS_KEY:
            return keys_file(read_keys(desired.router.spec) or [])
        return read_secret(slot.ref, f"Secret {slot.secret} key {slot.key}")

    return resolve
