"""The canonical specs a cluster's objects record, and the desired state the planner compares them with.

On Docker a model's spec names host folders (`model_dir` in this machine's model store) and the
router's spec the state folder, user and bind address of this machine. On a cluster none of these
exist, and recording them would make two people applying the same file see a change on every plan
(their homes differ). So the Kubernetes spec leaves them out, and the annotations, the planner's
desired side (`desired_for_kubernetes`) and the spec hashes all use this one form.

Log rotation (`logs`, desired/logs.py) is Docker's: on a cluster the kubelet rotates every container's
logs by its own settings (containerLogMaxSize, containerLogMaxFiles). The Kubernetes spec leaves it out
too, so changing it changes nothing there, and the plan says so where the file sets it.
"""

from __future__ import annotations

from dataclasses import replace

from aigo_apply.desired.build import served_on_ports
from aigo_apply.desired.spec import ModelSpec, RouterSpec, model_spec_of, router_spec_of
from aigo_apply.desired.types import DesiredModel, DesiredRouter, DesiredState

_ROUTER_HOST_KEYS = ("bind", "config_dir", "sockets_dir", "user")  # where and as whom the Docker router runs
DOCKER_ONLY = ("logs",)  # Docker's log rotation: the kubelet rotates a cluster's logs


def model_spec(model: DesiredModel) -> ModelSpec:
    """The model's canonical spec without the host folders of downloaded weights and adapters (a
    local `source.path` keeps its folder: on a cluster it is the node's folder the pod mounts)."""
    spec: dict[str, object] = {k: v for k, v in model.spec.items() if k not in DOCKER_ONLY}
    if "socket" in spec:  # on a cluster every engine listens on its port (desired/build.served_on_ports)
        del spec["socket"]
        spec["port"] = model.port
    if "repo" in model.spec["source"]:
        spec.pop("model_dir", None)
    settings = model.spec.get("vllm") or {}
    speculative = settings.get("speculative")
    draft = speculative.get("draft", {}) if speculative else {}
    if speculative and "repo" in draft:
        on_node = {k: v for k, v in draft.items() if k != "model_dir"}
        spec["vllm"] = {**settings, "speculative": {**speculative, "draft": on_node}}
    if adapters := model.spec.get("adapters"):
        spec["adapters"] = {
            name: {k: v for k, v in adapter.items() if k != "adapter_dir" or "repo" not in adapter["source"]}
            for name, adapter in adapters.items()
        }
    return model_spec_of(spec, f"model '{model.alias}'")


def router_spec(router: DesiredRouter) -> RouterSpec:
    return router_spec_of({k: v for k, v in router.spec.items() if k not in _ROUTER_HOST_KEYS + DOCKER_ONLY})


def desired_for_kubernetes(desired: DesiredState) -> DesiredState:
    """The desired state with every spec in its Kubernetes form: what the planner compares with the
    specs a cluster's objects record (its containers, commands and routes are unchanged)."""
    desired = served_on_ports(desired)
    models = {alias: replace(model, spec=model_spec(model)) for alias, model in desired.models.items()}
    router = replace(desired.router, spec=router_spec(desired.router))
    return replace(desired, models=models, router=router, warnings=desired.warnings + logs_note(desired.logs_set))


def logs_note(places: tuple[str, ...]) -> tuple[str, ...]:
    """What the plan says of log rotation the file sets, on a cluster: nothing of it is applied."""
    if not places:
        return ()
    return (
        f"{', '.join(places)}: no effect on Kubernetes: the kubelet rotates each container's logs by its own "
        "settings (containerLogMaxSize, containerLogMaxFiles; 10Mi x 5 unless the cluster sets others), so "
        "nothing is changed for them; they apply when the file runs on Docker",
    )
