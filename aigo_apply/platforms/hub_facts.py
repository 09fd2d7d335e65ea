"""What the Hub says of the downloads a file names, asked by both platforms' planning: the commit, files
and bytes of each model or adapter not complete in this machine's store (platforms/docker/planning.py), and
what each repo adapter's adapter_config.json says, asked before the desired state is built (on Docker for
the adapters not complete in the store, on a cluster, whose download Job fetches them, for all), so that
the one build sizes each engine's --max-lora-rank by its adapters."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aigo_apply.desired.model_store import Download, downloads, is_complete, kind_of, label
from aigo_apply.desired.types import AdapterFiles, DesiredState
from aigo_apply.errors import AigoError, HubError
from aigo_apply.json_types import JsonObject, obj
from aigo_apply.observe.adapter_files import hub_adapter
from aigo_apply.observe.containers import ObservedState
from aigo_apply.observe.hub_answer import HubAnswer, HubKey, hub_key, key_kind

MODELS_AND_ADAPTERS = frozenset({"model", "adapter"})
Markers = Mapping[str, Mapping[str, object]]  # the store's download markers by folder (observe/markers.py)


def remote_info(
    desired: DesiredState,
    observed: ObservedState,
    lock: JsonObject | None = None,
    kinds: frozenset[str] = MODELS_AND_ADAPTERS,
    asked: Mapping[HubKey, HubAnswer] | None = None,
) -> dict[HubKey, HubAnswer]:
    """What the Hub says about each download the plan may need (commit, files, bytes, or the
    error), asked in parallel only for folders that are not complete here. With `lock` (apply
    --locked) every download is pinned to the commit aigo.lock records. `kinds`: only the downloads
    of these kinds. `asked`: answers this run got before (the adapters' before the build), kept and
    not asked again. Never raises."""
    return remote_answers(downloads(desired.specs()), observed.model_files, lock, kinds, asked)


def remote_answers(
    needs: Sequence[Download],
    markers: Markers,
    lock: JsonObject | None = None,
    kinds: frozenset[str] = MODELS_AND_ADAPTERS,
    asked: Mapping[HubKey, HubAnswer] | None = None,
) -> dict[HubKey, HubAnswer]:
    """remote_info for the downloads `needs` (desired/model_store.downloads of a desired state, or of a
    file before its one build: desired/adapters.adapter_downloads), with the store's `markers`."""

    missing: set[HubKey] = set()
    pins: dict[HubKey, str] = {}
    out: dict[HubKey, HubAnswer] = {}
    for d in needs:
        if kind_of(d) not in kinds:
            continue
        k = hub_key(d)
        if asked is not None and k in asked:
            out[k] = asked[k]
            continue
        marker = markers.get(d["dest"]) or {}
        if lock is not None:
            entry = obj(lock["models"]).get(label(d))  # an object: lockfile.parse checked the lock's shape
            if entry is None:
                out[k] = HubAnswer(
                    error=f"{label(d)} is not in aigo.lock",
                    access=True,
                    blocker="lock.missing",
                    fix="apply without --locked once to record it (or remove the model)",
                )
                continue
            commit = str(obj(entry)["commit"])  # a string: lockfile.parse checked it
            pins[k] = commit
            if is_complete(marker, d, commit):
                continue
            missing.add(k)
        elif not is_complete(marker, d):
            missing.add(k)
    if not missing:
        return out
    from aigo_apply.adapters.hub import offline, remote  # only a plan that asks the Hub needs it

    if offline():
        return {**out, **{key: HubAnswer(error="HF_HUB_OFFLINE is set") for key in missing}}

    def ask(key: HubKey) -> tuple[HubKey, HubAnswer]:
        repo, revision, file = key[:3]
        try:
            found = remote(repo, pins.get(key, revision), file, with_config=True, kind=key_kind(key))
            weights = sum(n for p, n in found.files.items() if p.endswith((".safetensors", ".bin", ".gguf")))
            return key, HubAnswer(
                commit=found.commit,
                bytes=found.bytes,
                files=tuple(sorted(found.files)),
                weights=weights,
                config=found.config,
                pin=pins.get(key),
            )
        except HubError as exc:
            return key, HubAnswer(error=exc.message, fix=exc.fix, access=exc.access)
        except AigoError as exc:  # e.g. a repo with nothing an engine can serve
            return key, HubAnswer(error=str(exc), access=True)

    from concurrent.futures import ThreadPoolExecutor  # with logging: only a plan that asks the Hub needs it

    with ThreadPoolExecutor(max_workers=min(8, len(missing))) as pool:
        return {**out, **dict(pool.map(ask, sorted(missing, key=repr)))}


def adapter_answers(needs: Sequence[Download], remote: Mapping[HubKey, HubAnswer]) -> dict[str, AdapterFiles]:
    """By folder, what the Hub's adapter_config.json says of each repo adapter among `needs` it was
    asked about (`remote`: one not complete in the model store, or any on a cluster): the build sizes
    the engine's --max-lora-rank by it and the plan checks it before anything is downloaded, instead
    of vLLM's default rank until the next plan."""
    out: dict[str, AdapterFiles] = {}
    for d in needs:
        answer = remote.get(hub_key(d))
        if kind_of(d) == "adapter" and answer is not None and answer.known:
            out[d["dest"]] = hub_adapter(f"{d['repo']}@{str(answer.commit)[:12]}", answer.config)
    return out


def cluster_adapters(needs: Sequence[Download]) -> dict[str, AdapterFiles]:
    """On a cluster, whose download Job fetches the adapters (nothing of them is in this machine's
    store): what the Hub's adapter_config.json says of each repo adapter, by folder, so the engine's
    --max-lora-rank is the adapters' there too (asked nothing offline: vLLM's default, noted). `needs`:
    the file's repo adapters, found before the desired state is built (desired/adapters.adapter_downloads),
    so that it is built once, with the answers."""
    if not any(kind_of(d) == "adapter" for d in needs):
        return {}
    return adapter_answers(needs, remote_answers(needs, {}, kinds=frozenset({"adapter"})))  # nothing is here
