"""Readiness checks for each model's LoRA adapters, from what their folders hold (read before planning,
DesiredState.adapter_files). Blocking, `adapter.files`: a folder that is missing or not an adapter vLLM
can load (adapter_config.json and safetensors weights), or a rank above the engine's --max-lora-rank
(vLLM would refuse it at start). A repo adapter whose folder is not complete in the model store (its
download marker, as for a model) is `ok`, saying so: apply downloads it (only an adapter's files:
model_store.select_adapter_files, which refuses a repo without adapter_config.json); what its
adapter_config.json on the Hub says was asked before the build (platforms/hub_facts.adapter_answers)
and is judged as a folder's is (a config vLLM cannot load, a rank above max_lora_rank); asked nothing
(offline), its rank is vLLM's default until it is read (desired/adapters.lora_settings notes so). A
warning, `adapter.base`: an adapter trained on another base model than the one it is served with (its
`base_model_name_or_path` names another repo). Pure."""

from __future__ import annotations

from collections.abc import Mapping

from aigo_apply.desired.model_store import is_complete
from aigo_apply.desired.spec import ModelSpec
from aigo_apply.desired.types import AdapterFiles, DesiredState
from aigo_apply.plan.host_checks import Check

FILES_FIX = (
    "point the adapter's source.path at its folder (adapter_config.json and adapter_model.safetensors); "
    "for a repo adapter, delete its folder in the model store so apply downloads it again"
)
HUB_FIX = "pin the adapter's source.revision to a commit whose adapter_config.json vLLM can load"
RANK_FIX = "raise the model's vllm.max_lora_rank (or leave it unset: it then fits the largest adapter)"


def adapter_checks(desired: DesiredState, markers: Mapping[str, Mapping[str, object]] | None = None) -> list[Check]:
    """`markers`: the model store's download markers by folder (observe/markers.read_markers)."""
    out = []
    for alias, model in sorted(desired.models.items()):
        adapters = model.spec.get("adapters") or {}
        rank = model.spec.get("vllm", {}).get("max_lora_rank")
        for name, adapter in sorted(adapters.items()):
            files = desired.adapter_files.get(adapter["adapter_dir"]) or AdapterFiles(
                problem=f"{adapter['adapter_dir']} was not read"
            )
            where = f"model '{alias}' adapter '{name}'"
            source = adapter["source"]
            pending = "repo" in source and not is_complete(
                (markers or {}).get(adapter["adapter_dir"]), {**source, "kind": "adapter"}
            )
            if pending and not (files.hub and files.problem):
                said = f", rank {files.rank} by its adapter_config.json on the Hub" if files.hub else ""
                out.append(
                    Check(
                        "adapter.files",
                        "ok",
                        f"{where}: {source['repo']}@{source['revision']} is not in the model store yet{said}: "
                        "apply downloads it (or `aigo-apply models pull`), and its files are checked then",
                    )
                )
            if pending and not files.hub:
                continue
            if files.problem:
                fix = HUB_FIX if files.hub else FILES_FIX
                out.append(Check("adapter.files", "blocking", f"{where}: {files.problem}", fix))
            elif files.rank is not None and isinstance(rank, int) and files.rank > rank:
                out.append(
                    Check(
                        "adapter.files",
                        "blocking",
                        f"{where}: its rank {files.rank} is above the engine's max_lora_rank {rank}, "
                        "and vLLM refuses to load it",
                        RANK_FIX,
                    )
                )
            other = _other_base(model.spec, files)
            if other:
                out.append(
                    Check(
                        "adapter.base",
                        "warning",
                        f"{where} was trained on {other} (its base_model_name_or_path), but is served with "
                        f"{_base_name(model.spec)}: its answers may make no sense",
                        "serve it with the base model it was trained on, or check that the two share weights",
                    )
                )
    return out


def _base_name(spec: ModelSpec) -> str:
    source = spec["source"]
    return str(source.get("repo") or source.get("path") or "?")


def _other_base(spec: ModelSpec, files: AdapterFiles) -> str | None:
    """The repo the adapter names as its base when it is not the model's (compared as repo ids, case
    aside: the Hub's ids are case-insensitive). A local path on either side says nothing either way."""
    named, source = files.base_model, spec["source"]
    if not named or "repo" not in source or named.count("/") != 1 or named.startswith(("/", ".", "~")):
        return None
    return named if named.lower() != str(source["repo"]).lower() else None
