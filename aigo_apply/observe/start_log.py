"""What an engine's start spent its time on, read from the engine's own start-up log, and the record
apply keeps of each start (platforms/docker/start_records.py writes it; plan and status read it).

A vLLM start is mostly a handful of long steps, and vLLM times most of them itself. The phases, in
seconds, each from vLLM's own lines (their texts as vLLM 0.32.0 writes them):

  inspect        the model's class inspected, from its first line to "Resolved architecture: ..." by those
                 lines' own time stamps (to the second): vLLM inspects the class in a second Python process
                 and keeps what it found in its cache folder (modelinfos), so a start that finds it there
                 spends next to nothing here
  weights        the model built and its weights read: "Model loading took A GiB memory and S seconds"
                 (the GPU runner), else "Initializing model took S seconds" plus "Loading weights took S
                 seconds" (the CPU runner)
  dynamo         "Dynamo bytecode transform time: S s"
  compile        the graphs compiled ("Compiling a graph for compile range R takes S s") or loaded from
                 the compile cache ("Directly load the compiled graph(s) for compile range R from the
                 cache, took S s"); the CPU build traces once and compiles while it warms the model up,
                 so there it is the time from "Warming up model for the compilation..." to "Warming up
                 done." by those lines' own time stamps (to the second)
  graph_capture  "Graph capturing finished in S secs" (CUDA graphs)
  engine_init    the rest of "init engine (profile, create kv cache, warmup model) took S s": the
                 profiling run, the KV cache, the warm-up (the three phases above happen inside it)
  other          the rest of the start apply measured: Python's start, the configuration, the engine's
                 processes, the API server and the first answers

A line printed by several worker processes (tensor parallelism) counts once: times add up within a
process and the slowest process counts. `cache` is "warm" when vLLM found compile artefacts of this
model in its cache (it loaded them, or, where its build cannot load the saved AOT graph, compiled again
from what else was cached: "Compiling model again due to a load failure"), "cold" when it compiled with
nothing cached, and None when the start compiled nothing (`enforce_eager`, SGLang and llama.cpp, whose
starts are measured as a whole). Pure: functions of the lines and of the numbers apply measured."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypedDict, TypeGuard

from aigo_apply.json_types import JsonValue, text

PHASES = ("inspect", "weights", "dynamo", "compile", "graph_capture", "engine_init", "other")
CACHES = ("cold", "warm")
MAX_SECONDS = 1e7  # no start takes months: a larger number in a record is not one apply wrote

_NUMBER = r"(\d{1,9}(?:\.\d{1,9})?)"
_PROCESS = re.compile(r"^\s*\(([^()]{1,80}?) pid=(\d{1,10})\)")
# vLLM's logger: `INFO 12-06 17:12:05 [file.py:87] message` (month-day, to the second)
_STAMP = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6}))? \[")
_MODEL_LOADING = re.compile(r"Model loading took \S{1,20} GiB memory and " + _NUMBER + " seconds")
_INITIALISING = re.compile(r"Initializing model took " + _NUMBER + " seconds")
_WEIGHTS = re.compile(r"Loading weights took " + _NUMBER + " seconds")
_DYNAMO = re.compile(r"Dynamo bytecode transform time: " + _NUMBER + " s")
_COMPILED = re.compile(r"Compiling a graph for compile range .{0,200}? takes " + _NUMBER + " s")
_LOADED = re.compile(
    r"Directly load the compiled graph\(s\) for compile range .{0,200}? from the cache, took " + _NUMBER
)
_CAPTURE = re.compile(r"Graph capturing finished in " + _NUMBER + " secs")
_INIT_ENGINE = re.compile(r"init engine \(profile, create kv cache, warmup model\) took " + _NUMBER + " s")
_RESOLVED = re.compile(r"Resolved architecture: ")
_CPU_WARMUP = re.compile(r"Warming up model for the compilation\.\.\.")
_CPU_WARMED = re.compile(r"Warming up done\.")
# the compile cache found (a graph or the AOT compilation loaded, or found and compiled again), or not
_WARM = re.compile(
    r"Directly load the compiled graph\(s\)|Directly load AOT compilation from path|"
    r"Compiling model again due to a load failure from"
)
_COLD = re.compile(
    r"Compiling a graph for compile range|saved AOT compiled function to|Cache the graph of compile range"
)


class SavedStart(TypedDict):
    """A StartRecord as the state folder keeps it (StartRecord.to_dict)."""

    at: str
    seconds: float
    phases: dict[str, float]
    cache: str | None
    image_id: str
    image: str
    engine: str
    spec_hash: str | None
    kind: str


class ShownStart(TypedDict):
    """A model's last start as `status -o json` gives it (StartRecord.shown)."""

    seconds: float
    phases: dict[str, float]
    cache: str | None
    image_id: str
    at: str


@dataclass(frozen=True)
class StartRecord:
    """One engine start that ended serving: when it served (`at`, ISO 8601 UTC), the seconds from its
    container's start to serving, the phases (PHASES, those its log showed), whether the compile cache
    served it (CACHES, or None), which image (its id, and the reference it was made from), which engine,
    the container's definition hash (the spec-hash label: the same command line, mounts and
    environment) and the plan action that started it (create, recreate or start)."""

    at: str
    seconds: float
    phases: Mapping[str, float] = field(default_factory=dict)
    cache: str | None = None
    image_id: str = ""
    image: str = ""
    engine: str = "vllm"
    spec_hash: str | None = None
    kind: str = "create"

    def to_dict(self) -> SavedStart:
        return {
            "at": self.at,
            "seconds": self.seconds,
            "phases": dict(self.phases),
            "cache": self.cache,
            "image_id": self.image_id,
            "image": self.image,
            "engine": self.engine,
            "spec_hash": self.spec_hash,
            "kind": self.kind,
        }

    def shown(self) -> ShownStart:
        """What `status -o json` gives as a model's `last_start`."""
        return {
            "seconds": self.seconds,
            "phases": dict(self.phases),
            "cache": self.cache,
            "image_id": self.image_id,
            "at": self.at,
        }

    @classmethod
    def from_dict(cls, data: JsonValue) -> StartRecord | None:
        """A record read back from the state folder, checked for its types and bounds; None when it is
        not one apply writes (damaged, or edited)."""
        if not isinstance(data, dict):
            return None
        seconds, phases = data.get("seconds"), data.get("phases")
        texts = ("at", "image_id", "image", "engine", "kind")
        if (
            not _seconds(seconds)
            or not isinstance(phases, dict)
            or not all(k in PHASES and _seconds(v) for k, v in phases.items())
            or data.get("cache") not in (*CACHES, None)
            or not all(isinstance(value := data.get(k), str) and len(value) <= 512 for k in texts)
            or not isinstance(data.get("spec_hash"), (str, type(None)))
            or not _when(text(data["at"]))
        ):
            return None
        cache, spec_hash = data.get("cache"), data.get("spec_hash")  # each text or None (checked above)
        return cls(
            text(data["at"]),
            float(seconds),
            {k: float(v) for k in PHASES if k in phases and _seconds(v := phases[k])},  # in the order of a start
            cache if isinstance(cache, str) else None,
            text(data["image_id"]),
            text(data["image"]),
            text(data["engine"]),
            spec_hash if isinstance(spec_hash, str) else None,
            text(data["kind"]),
        )


def measure(lines: Iterable[str], engine: str, seconds: float) -> tuple[dict[str, float], str | None]:
    """The phases (rounded to 0.01 s) and the cache verdict of one start of `engine` that took
    `seconds` to serve, from its log lines since its container started. Engines other than vLLM:
    no phases (their total is the record's `seconds`)."""
    if engine != "vllm":
        return {}, None
    sums: dict[str, dict[str, float]] = {}  # phase -> process -> seconds
    loading: dict[str, float] = {}  # the GPU runner's "Model loading took", which covers both CPU lines
    init_engine: float | None = None
    warmup: dict[str, float] = {}  # process -> the stamp its CPU warm-up began
    warmed: dict[str, float] = {}  # process -> seconds of its CPU warm-up
    warm = cold = False
    first: float | None = None  # the stamp of vLLM's first line
    inspected: float | None = None
    for line in lines:
        process = _process(line)
        if inspected is None and (first is None or _RESOLVED.search(line)):
            stamp = _stamp(line)
            if first is None:
                first = stamp
            elif stamp is not None and _RESOLVED.search(line):
                inspected = _since(first, stamp)
        if _WARM.search(line):
            warm = True
        elif _COLD.search(line):
            cold = True
        for phase, pattern in (
            ("weights", _INITIALISING),
            ("weights", _WEIGHTS),
            ("dynamo", _DYNAMO),
            ("compile", _COMPILED),
            ("compile", _LOADED),
            ("graph_capture", _CAPTURE),
        ):
            if found := pattern.search(line):
                here = sums.setdefault(phase, {})
                here[process] = here.get(process, 0.0) + float(found.group(1))
        if found := _MODEL_LOADING.search(line):
            loading[process] = float(found.group(1))
        if found := _INIT_ENGINE.search(line):
            init_engine = max(init_engine or 0.0, float(found.group(1)))
        if _CPU_WARMUP.search(line) and (stamp := _stamp(line)) is not None:
            warmup[process] = stamp
        elif _CPU_WARMED.search(line) and process in warmup and (stamp := _stamp(line)) is not None:
            warmed[process] = max(0.0, _since(warmup.pop(process), stamp))
    phases = {phase: max(per.values()) for phase, per in sums.items()}
    if inspected is not None:
        phases["inspect"] = inspected
    if loading:
        phases["weights"] = max(loading.values())
    if "compile" not in phases and warmed:  # the CPU build: its compile is its warm-up
        phases["compile"] = max(warmed.values())
        if init_engine is not None:
            phases["compile"] = min(phases["compile"], init_engine)
    if init_engine is not None:
        inside = sum(phases.get(p, 0.0) for p in ("dynamo", "compile", "graph_capture"))
        phases["engine_init"] = max(0.0, init_engine - inside)
    phases["other"] = max(0.0, seconds - sum(phases.values()))
    shown = {p: round(phases[p], 2) for p in PHASES if p in phases}
    return shown, "warm" if warm else "cold" if cold else None


def _process(line: str) -> str:
    """Which process printed the line: `(Worker_TP1 pid=41) INFO ...` -> its pid ("" for none)."""
    found = _PROCESS.match(line)
    return found.group(2) if found else ""


def _stamp(line: str) -> float | None:
    """Seconds into a leap year of the line's `MM-DD HH:MM:SS` stamp (vLLM's logger writes no year)."""
    found = _STAMP.search(line)
    if not found:
        return None
    month, day, hour, minute, second = (int(found.group(i)) for i in range(1, 6))
    fraction = float("0." + found.group(6)) if found.group(6) else 0.0
    try:
        moment = datetime(2024, month, day, hour, minute, second)
    except ValueError:
        return None
    return (moment - datetime(2024, 1, 1)).total_seconds() + fraction


def _since(begin: float, end: float) -> float:
    """Seconds from one stamp to a later one, across a new year's midnight too."""
    return end - begin if end >= begin else end + 366 * 86400 - begin


def _seconds(value: object) -> TypeGuard[float]:
    return (
        type(value) in (int, float)
        and isinstance(value, (int, float))
        and math.isfinite(value)
        and 0 <= value <= MAX_SECONDS
    )


def _when(text: str) -> bool:
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True
