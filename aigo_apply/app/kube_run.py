"""plan, apply, status and destroy on a Kubernetes cluster (`platform: kubernetes` or `--platform
kubernetes`): the same file, the same planner and the same plan output as on Docker. The cluster is
read with one LIST per kind (kube/observe.py), the objects come from the pure renderer
(kube/manifests.py), and changes go out by server-side apply (kube/apply.py). Secret values are read
here, at apply time only, and go nowhere but the API server."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from aigo_apply.adapters.hub import token
from aigo_apply.adapters.kube_client import KubeClient
from aigo_apply.app.apply import ApplyOptions, _finish, _interrupts
from aigo_apply.app.host_context import current_host
from aigo_apply.app.router_keys import digest_of, read_keys
from aigo_apply.apply.journal import Journal
from aigo_apply.apply.outcome import StepLog
from aigo_apply.apply.secrets import resolve as read_secret
from aigo_apply.apply.state_dir import state_dir
from aigo_apply.config import kube_rules
from aigo_apply.config.load import Config, choose_file, load_config
from aigo_apply.desired.build import build_desired
from aigo_apply.desired.types import DesiredState
from aigo_apply.errors import EXIT_ERROR, EXIT_OK, AigoError, ConfigInvalid, PlanBlocked, UsageProblem
from aigo_apply.kube.apply import KubeApply, destroy
from aigo_apply.kube.manifests import objects
from aigo_apply.kube.observe import ClusterState, read_cluster
from aigo_apply.kube.planning import plan_for_cluster
from aigo_apply.kube.rollout import RolloutWait
from aigo_apply.kube.secrets import API_KEYS_KEY, SecretSlot
from aigo_apply.kube.settings import KubeSettings, platform_of, settings_of
from aigo_apply.plan.facts import PlanRequest
from aigo_apply.plan.types import Plan
from aigo_apply.router.haproxy import keys_file

# How the cluster is reached: tests put a client over a transport that answers like the API server.
connect: Callable[[KubeSettings], KubeClient] = lambda s: KubeClient.connect(context=s.context, namespace=s.namespace)


@dataclasses.dataclass(frozen=True)
class Target:
    """One run's view of the cluster: what the file asks for, rendered, and what is there."""

    desired: DesiredState
    settings: KubeSettings
    client: KubeClient
    rendered: list[dict[str, Any]]
    cluster: ClusterState


def _target(file: str | None, keys: bool = False) -> Target:
    config = load_config(choose_file(file))
    _check_placement(config)
    desired = build_desired(config, current_host())
    if keys:  # the digest of the router's keys rolls its pod when a key changes (never the keys themselves)
        digest = digest_of(desired.project, read_keys(desired.router.spec))
        router = dataclasses.replace(desired.router.settings, keys_digest=digest)
        desired = dataclasses.replace(desired, router=dataclasses.replace(desired.router, settings=router))
    settings = settings_of(config.data)
    client = connect(settings)
    return Target(desired, settings, client, objects(desired, settings), read_cluster(client, desired.project))


def _check_placement(config: Config) -> None:
    """A Docker file sent to a cluster with --platform is held to the cluster's rules too."""
    if platform_of(config.data) != "kubernetes":
        problems = kube_rules.placement_problems(config.file, config.data, config.marks)
        if problems:
            raise ConfigInvalid(config.file, problems)


def make_plan(file: str | None, request: PlanRequest | None = None) -> Plan:
    t = _target(file, keys=True)
    return plan_for_cluster(t.desired, t.cluster, t.rendered, request=request)


def run_apply(opts: ApplyOptions, force_conflicts: bool = False) -> int:
    if opts.planfile is not None:
        raise UsageProblem(
            "a saved plan is applied on Docker only for now; run `aigo-apply apply --platform kubernetes` "
            "with the file (it shows the plan and asks)"
        )
    if opts.pull == "never":
        raise UsageProblem("--pull never has no meaning on a cluster: its nodes pull the images")
    t = _target(opts.file, keys=True)
    request = PlanRequest(frozenset(opts.replace), frozenset(opts.target), frozenset(opts.ignore))
    plan = plan_for_cluster(t.desired, t.cluster, t.rendered, request=request)
    return _converge(plan, "apply", opts, lambda run: run.run(plan, t.rendered, t.cluster), t, force_conflicts)


def run_destroy(opts: ApplyOptions) -> int:
    t = _target(opts.file)
    names = [f"{o.kind}/{o.name}" for o in t.cluster.objects]
    opts.console.say(
        f"destroy removes every object of project '{t.desired.project}' in namespace '{t.settings.namespace}' "
        f"({len(names)}): {', '.join(names) or 'none'}"
    )
    if not names:
        return EXIT_OK
    return _converge(None, "destroy", opts, lambda run: destroy(t.client, t.cluster, run.log), t)


def _converge(
    plan: Plan | None, command: str, opts: ApplyOptions, act: Callable, t: Target, force: bool = False
) -> int:
    console = opts.console
    if plan is not None:
        console.show_plan(plan)
        if plan.blockers:
            raise PlanBlocked(f"{command} refused: the plan is blocked; nothing was changed")
        if not plan.has_changes:
            return EXIT_OK
    if not opts.yes:
        if opts.confirm is None:
            raise AigoError(f"{command} needs confirmation, and there is no terminal to ask on; pass -y/--yes")
        if not opts.confirm(f"Do you want to {command} these changes on the cluster? Only 'yes' will be accepted"):
            console.say(f"{command.capitalize()} cancelled; nothing was changed.", err=True)
            return EXIT_ERROR
    folder = state_dir(t.desired.project) / "kubernetes"
    folder.mkdir(exist_ok=True)
    run = KubeApply(
        t.client,
        StepLog(Journal(folder), console),
        resolve=_resolver(t.desired, t.settings, console),
        force_conflicts=force,
        wait=RolloutWait(t.client, gpu_resource=t.settings.gpu_resource),
    )
    with _interrupts(run.interrupted, console):
        report = act(run)
    return _finish(report, command, console, opts.output)


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


def _resolver(desired: DesiredState, settings: KubeSettings, console: Any) -> Callable[[SecretSlot], str | None]:
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


def status(file: str | None) -> dict[str, Any]:
    """Each model's Deployment as the cluster reports it, and whether its settings match the file."""
    t = _target(file)
    plan = plan_for_cluster(t.desired, t.cluster, t.rendered)
    kinds = {a.address: a.kind for a in plan.actions}
    seen = {c.alias: c for c in t.cluster.observed.ours if c.alias}
    models = []
    for alias in sorted(t.desired.models):
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
        "project": t.desired.project,
        "namespace": t.settings.namespace,
        "context": t.client.context,
        "models": models,
        "damaged": list(t.cluster.observed.damaged),
    }


def render_status(report: dict[str, Any]) -> str:
    lines = [f"project '{report['project']}' on namespace '{report['namespace']}' (context {report['context']})"]
    for m in report["models"]:
        drift = "  (differs from the file: run plan)" if m["drift"] else ""
        lines.append(f"  {m['alias']}: {m['state']} {m['status']}".rstrip() + drift)
    lines += [f"  warning: {d}" for d in report["damaged"]]
    return "\n".join(lines)
