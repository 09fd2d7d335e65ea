"""How long a change takes a model away, said in the plan before anything runs: from the last measured
start of that model on that image (apply/start_records.py keeps them; app/planning.py reads them into
PlanFacts.starts), or that it is not known.

Which actions take a model away: a recreate that is not parallel (the old engine stops first; the
router holds the model's requests until the new one serves) and a start of a stopped engine (it is
away already: the figure says when it serves again). A parallel replace takes it away for none of it
(the old engine serves until the new one does); a paused engine is unpaused, not started.

Whether the next start is warm: vLLM keys its compiled graphs by the engine's settings and keeps them,
with what it found inspecting the model's class, in the project's cache volume (until `destroy`, which
removes the records too). So a start with the same container definition (the spec-hash label: command
line, mounts, environment) on the same image as a measured one finds them: the newest warm start of it
is the figure, else its newest start less the phases the cache now serves (observe/start_log.CACHED:
the inspection and the compile; a build that loads its graphs spends next to nothing on them, vLLM
0.32.0's CPU build compiles again from what else is cached). New settings compile anew: the newest cold
start on that image less its inspection is the figure (a lower bound where only warm ones were
measured). Engines that compile nothing (enforce_eager) keep only the inspection; SGLang and llama.cpp
starts are measured whole. Pure."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from aigo_apply.desired.types import DesiredState
from aigo_apply.observe.containers import ObservedContainer
from aigo_apply.observe.start_log import CACHED, StartRecord
from aigo_apply.plan.types import Action, Downtime

NOT_MEASURED = "not known: no start of it on this image was measured yet"
WHAT = {"inspect": "inspecting the model", "compile": "compiling its graphs"}


def with_downtime(
    actions: list[Action],
    desired: DesiredState,
    images: Mapping[str, str],
    starts: Mapping[str, tuple[StartRecord, ...]],
    observed: Mapping[str, list[ObservedContainer]],
) -> list[Action]:
    """Each model action that takes its model away with its Downtime (`images`: reference -> the id
    it names now; `starts`: each model's records, newest first; `observed`: each model's containers)."""
    out = []
    for action in actions:
        alias = action.model
        if action.kind in ("recreate", "start") and alias in desired.models:
            model = desired.models[alias]
            paused = any(c.name == model.container.name and c.state == "paused" for c in observed.get(alias, []))
            if action.kind == "recreate" and action.strategy is not None and action.strategy.name == "parallel":
                guess = Downtime(0.0, "a parallel replace: the old engine serves until the new one does")
            elif action.kind == "start" and paused:
                guess = Downtime(0.0, "its engine is unpaused, not started again")
            else:
                image_id = images.get(model.container.image, "")
                guess = predict(starts.get(alias, ()), image_id, model.container.definition_hash())
            action = dataclasses.replace(action, downtime=guess)
        out.append(action)
    return out


def predict(records: tuple[StartRecord, ...], image_id: str, spec_hash: str) -> Downtime:
    """The next start's seconds from a model's `records` (newest first), for the image `image_id`
    (empty: not on this machine yet) and the container definition `spec_hash`."""
    here = [r for r in records if image_id and r.image_id == image_id]
    if not here:
        if records:
            other = records[0]
            return Downtime(None, f"{NOT_MEASURED} (its last, on another image, took {other.seconds:.1f} s)")
        return Downtime(None, NOT_MEASURED)
    same = [r for r in here if r.spec_hash == spec_hash]
    warm = next((r for r in same if r.cache == "warm"), None)
    if warm is not None:
        return Downtime(warm.seconds, f"its last warm start took {warm.seconds:.1f} s")
    if same:  # the cache volume holds what its last start inspected and compiled
        return _less(same[0], CACHED, "")
    last = next((r for r in here if r.cache == "cold"), here[0])
    if last.cache == "warm":  # only warm starts with other settings: these compile anew, for longer
        return Downtime(
            last.seconds,
            f"at least: its last start took {last.seconds:.1f} s warm, with other settings: these are compiled anew",
        )
    return _less(last, ("inspect",), ", with other settings: these are compiled anew")


def _less(record: StartRecord, served: tuple[str, ...], besides: str) -> Downtime:
    """`record`'s seconds less its phases in `served`, which the cache volume now holds."""
    spent = {p: record.phases[p] for p in served if record.phases.get(p)}
    cache = f" {record.cache}" if record.cache else ""
    said = f"its last start took {record.seconds:.1f} s{cache}{besides}"
    if not spent:
        return Downtime(record.seconds, said)
    words = " and ".join(f"{seconds:.1f} s {WHAT[p]}" for p, seconds in spent.items())
    return Downtime(
        round(max(0.0, record.seconds - sum(spent.values())), 1),
        f"{said}, {words} that the cache volume now holds",
    )
