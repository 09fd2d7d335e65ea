"""How long a change takes a model away, said in the plan before anything runs: from the last measured
start of that model on that image (platforms/docker/start_records.py keeps them; platforms/docker/planning.py reads them into
PlanFacts.starts), or that it is not known.

Which actions take a model away: a recreate that is not parallel (the old engine stops first; the
router holds the model's requests until the new one serves) and a start of a stopped engine (it is
away already: the figure says when it serves again). A parallel replace takes it away for none of it
(the old engine serves until the new one does); a paused engine is unpaused, not started.

Whether the next start is warm: vLLM keys its compiled graphs by the engine's settings and keeps them,
with what it found inspecting the model's class, in its image's cache volume (until `destroy`, which
removes the records too). So a start with the same container definition (the spec-hash label: command
line, mounts, environment) on the same image as a measured one is warm: the newest warm start of it is
the figure. Where only a cold one was measured, that start less what the cache now serves of it: its
inspection of the model (next to nothing once cached), and of its compile the cold-minus-warm
difference where a warm start on this image timed its compile; where none did, the compile is counted
whole and the plan says a warm start is shorter (how much depends on the build: vLLM 0.32.0's CPU build
cannot load its saved graph and compiles again, faster). New settings are compiled anew: the newest
cold start on that image less its inspection (a lower bound where only warm ones were measured).
Engines that compile nothing (enforce_eager) save only the inspection; SGLang and llama.cpp starts are
measured whole. Pure."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from aigo_apply.desired.types import DesiredState
from aigo_apply.observe.containers import ObservedContainer
from aigo_apply.observe.start_log import StartRecord
from aigo_apply.plan.types import Action, Downtime

NOT_MEASURED = "not known: no start of it on this image was measured yet"


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
        last = same[0]
        other_warm = next((r for r in here if r.cache == "warm"), None)
        return _less(last, _compile_saved(last, other_warm), "")
    last = next((r for r in here if r.cache == "cold"), here[0])
    if last.cache == "warm":  # only warm starts with other settings: these compile anew, for longer
        return Downtime(
            last.seconds,
            f"at least: its last start took {last.seconds:.1f} s warm, with other settings: these are compiled anew",
        )
    return _less(last, None, ", with other settings, which are compiled anew")


def _compile_saved(cold: StartRecord, warm: StartRecord | None) -> float | None:
    """What the cache saves of `cold`'s compile: its cold-minus-warm difference where a warm start on
    the image timed its compile; None where no warm figure is known (or `cold` compiled nothing)."""
    if cold.cache != "cold" or warm is None:
        return None
    compiled, again = cold.phases.get("compile"), warm.phases.get("compile")
    return None if compiled is None or again is None else max(0.0, compiled - again)


def _less(record: StartRecord, compile_saved: float | None, besides: str) -> Downtime:
    """`record`'s seconds less what the cache volume now serves of it: its inspection of the model
    (next to nothing once cached), and `compile_saved` seconds of its compile where known."""
    inspected = record.phases.get("inspect") or 0.0
    cache = f" {record.cache}" if record.cache else ""
    said = f"its last start took {record.seconds:.1f} s{cache}{besides}"
    saved = [f"the {inspected:.1f} s it spent inspecting the model"] if inspected else []
    if compile_saved:
        saved.append(f"{compile_saved:.1f} s of its compile (a warm one on this image compiled faster)")
    words = f"; the cache volume saves {' and '.join(saved)}" if saved else ""
    if record.cache == "cold" and compile_saved is None:
        words += "; a warm start is shorter by what the cache saves of its compile"
    seconds = max(0.0, record.seconds - inspected - (compile_saved or 0.0))
    return Downtime(round(seconds, 1), said + words)
