"""A download folder counts only when its marker records the very source wanted there (kind, repo,
revision, and the file selection): a marker of another source is a `model.store` blocker naming both,
whatever the model does, and never a reuse, nor a commit for aigo.lock. A folder of the older store
layout whose marker records exactly the wanted source is linked over instead of downloaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from aigo_apply.desired.build import build_desired
from aigo_apply.desired.model_store import is_complete
from aigo_apply.observe.config_file import load_config
from aigo_apply.observe.hub_answer import HubAnswer
from aigo_apply.plan import lockfile
from aigo_apply.plan.facts import PlanFacts
from aigo_apply.plan.planner import build_plan

from helpers.configs import host_context, write_config
from helpers.planner_inputs import observed

CONFIG = """
version: 1
project: lab
engines: {vllm: {image: local/engine, image_tag: "1"}}
models:
  fx:
    source: {repo: org/m, revision: feature/x}
    context_length: 4096
    gpus: none
  fdx:
    source: {repo: org/m, revision: feature--x}
    context_length: 4096
    gpus: none
  base:
    source: {repo: org/base, revision: r1}
    context_length: 4096
    gpus: none
    adapters:
      sql: {source: {repo: org/m, revision: r1}}
  plain:
    source: {repo: org/m, revision: r1}
    context_length: 4096
    gpus: none
"""
FX, FDX = "/store/org--m/feature--x", "/store/org--m/feature%2D%2Dx"
ADAPTER, PLAIN = "/store/adapters/org--m/r1", "/store/org--m/r1"
C1 = "1" * 40


def desired(tmp_path):
    return build_desired(load_config(str(write_config(tmp_path, CONFIG))), host_context(Path("/store")))


def marker(repo="org/m", revision="feature/x", kind=None, files=None):
    return {
        "repo": repo,
        "revision": revision,
        "commit": C1,
        "files": files or {"config.json": 1},
        "complete_repo": True,
        **({"kind": kind} if kind else {}),
    }


WANT = {"repo": "org/m", "revision": "feature/x"}


@pytest.mark.parametrize(
    "recorded, named",
    [
        (marker(revision="feature--x"), "org/m@feature--x"),  # the revision that shared its folder
        (marker(repo="org/other"), "org/other@feature/x"),
        (marker(kind="adapter"), "LoRA adapter org/m@feature/x"),  # another kind, same repo@revision
    ],
)
def test_a_folder_holding_another_source_blocks_the_plan_naming_both_even_for_a_running_model(
    tmp_path, recorded, named
):
    d = desired(tmp_path)
    seen = observed(d)  # every model runs as the file says: without the check, "No changes."
    seen.model_files[FX] = recorded
    assert not is_complete(recorded, WANT)
    plan = build_plan(d, seen, PlanFacts())
    [blocker] = [b for b in plan.blockers if b.id == "model.store"]
    assert blocker.address == "model.fx"
    assert blocker.message == (
        f"{FX} holds {named} by its download marker, but model fx needs org/m@feature/x there: an older "
        "aigo-apply gave both one folder, and it is never used for another source"
    )
    assert "`aigo-apply apply --replace fx` then downloads org/m@feature/x" in blocker.remediation
    assert "download" not in [a.kind for a in plan.actions]
    assert lockfile.build(d, [], seen.model_files)["models"].get("org/m@feature/x") is None  # not its commit


def test_only_a_marker_of_exactly_the_source_and_selection_makes_a_folder_complete():
    assert is_complete(marker(), WANT) and is_complete(marker(), WANT, commit=C1)
    assert not is_complete(marker(), WANT, commit="2" * 40)
    assert not is_complete(marker(revision="feature--x"), WANT)
    assert not is_complete(marker(repo="org/M"), WANT)
    assert not is_complete(marker(kind="adapter"), WANT)
    assert is_complete(marker(kind="adapter"), {**WANT, "kind": "adapter"})
    gguf = marker(files={"a.gguf": 5}) | {"complete_repo": False}
    assert is_complete(gguf, {**WANT, "file": "a.gguf"}) and not is_complete(gguf, {**WANT, "file": "b.gguf"})
    assert not is_complete(gguf, WANT)  # one GGUF file is not the whole selection
    unsourced = {k: v for k, v in marker().items() if k not in ("repo", "revision")}
    assert not is_complete(unsourced, WANT)  # a marker that records no source proves nothing


def test_the_older_layouts_folders_are_linked_over_only_where_their_marker_records_exactly_the_source(tmp_path):
    """The older layout gave feature/x and feature--x one folder (FX), and a model and a LoRA adapter
    of one repo@revision one folder typed "adapter" (PLAIN): what each holds, by its marker, decides."""
    d = desired(tmp_path)
    seen = observed(d, entries=[], downloaded=False)
    seen.model_files[FX] = marker(revision="feature--x")  # written for fdx by the older layout
    seen.model_files[PLAIN] = marker(revision="r1", kind="adapter", files={"adapter_config.json": 1})
    seen.model_files["/store/org--base/r1"] = marker(repo="org/base", revision="r1")
    remote = {("org/m", "feature--x", None): HubAnswer(error="HF_HUB_OFFLINE is set")}
    plan = build_plan(d, seen, PlanFacts(remote=remote))
    reasons = {a.address: a.reasons[0] for a in plan.actions if a.kind == "download"}
    assert reasons["download.org/m@feature--x"] == (
        f"org/m@feature--x is in {FX}, where an older aigo-apply kept it (its marker records exactly this "
        f"source): its files are linked into {FDX}, nothing is downloaded"
    )
    assert reasons["download.adapter:org/m@r1"].startswith(  # the adapter: two downloads of org/m@r1 now
        f"LoRA adapter sql of model base: org/m@r1 is in {PLAIN}, where an older aigo-apply kept it"
    )
    assert not [w for w in plan.warnings if "Hub could not tell" in w]  # nothing is asked of it
    blocked = {b.address: b.message for b in plan.blockers if b.id == "model.store"}
    assert blocked == {
        "model.fx": f"{FX} holds org/m@feature--x by its download marker, but model fx needs org/m@feature/x "
        "there: an older aigo-apply gave both one folder, and it is never used for another source",
        "model.plain": f"{PLAIN} holds LoRA adapter org/m@r1 by its download marker, but model plain needs "
        "org/m@r1 there: an older aigo-apply gave both one folder, and it is never used for another source",
    }
    # an older folder whose marker records another source is never taken: fdx is downloaded
    seen.model_files[FX] = marker(revision="feature/x")
    plan = build_plan(d, seen, PlanFacts(remote=remote))
    reasons = {a.address: a.reasons[0] for a in plan.actions if a.kind == "download"}
    assert reasons["download.org/m@feature--x"] == "org/m@feature--x is not on this machine (size unknown)"
