"""Properties of the pure core, over random files and random machines (hypothesis):

- converge: for a random valid desired state and a random observed state (what an earlier, other
  file left behind, with containers stopped, removed or left over at random), planning, applying
  the plan to an in-memory runtime and planning again gives only no-ops;
- canonical: the same file with its keys reordered, or with every default written out, gives the
  same specs, labels and container definitions, so it never causes a recreate.

The in-memory runtime carries out a plan the way the executor does, on Docker list-API entries,
which the real parser then reads back: labels written from a spec must plan as "no change".
"""

from __future__ import annotations

import itertools
import json
import random

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aigo_apply.config.vllm_facts import names
from aigo_apply.desired.build import build_desired
from aigo_apply.desired.engines import render
from aigo_apply.desired.engines.router import router_container
from aigo_apply.desired.model_store import downloads
from aigo_apply.observe.config_file import load_config
from aigo_apply.observe.containers import parse_state
from aigo_apply.plan.planner import build_plan
from aigo_apply.router.haproxy import render_files
from aigo_apply.router.render_key import render_key

from helpers.configs import host_context

ALIASES = st.text("abcdefghij0123456789", min_size=1, max_size=8).filter(lambda a: a[0].isalpha())
SETTINGS = st.fixed_dictionaries(
    {},
    optional={
        "tool_call_parser": st.sampled_from(sorted(names("tool_call_parser"))[:12]),
        "reasoning_parser": st.sampled_from(sorted(names("reasoning_parser"))[:8]),
        "max_num_seqs": st.integers(1, 512),
        "enable_prefix_caching": st.booleans(),
        "enforce_eager": st.booleans(),
        "tool_calling": st.booleans(),
        "gpu_memory_utilization": st.sampled_from([0.1, 0.15, 0.2]),
        "kv_cache_dtype": st.sampled_from(["auto", "fp8"]),
    },
)
MODEL = st.fixed_dictionaries(
    {
        "source": st.one_of(
            st.fixed_dictionaries({"path": st.sampled_from(["m", "models/a", "/srv/x"])}),
            st.fixed_dictionaries(
                {"repo": st.sampled_from(["org/a", "org/b"])}, optional={"revision": st.sampled_from(["main", "v1"])}
            ),
        ),
        "context_length": st.one_of(st.integers(256, 131072), st.sampled_from(["4k", "32K", "128k"])),
    },
    optional={
        "gpus": st.sampled_from(["none", "all", [0], [1], [0, 1]]),
        "vllm": SETTINGS,
        "env": st.dictionaries(
            st.sampled_from(["A", "LOG_LEVEL", "X_Y"]), st.sampled_from(["1", "info", "a b"]), max_size=2
        ),
        "ready_timeout": st.integers(1, 3000),
    },
)
FILES = st.fixed_dictionaries(
    {
        "models": st.dictionaries(ALIASES, MODEL, min_size=1, max_size=4),
    },
    optional={
        "router": st.fixed_dictionaries(
            {}, optional={"port": st.integers(8000, 8100), "max_body_mb": st.integers(1, 64)}
        ),
        "engines": st.just({"vllm": {"image": "local/engine", "image_tag": "1"}}),
    },
)
MACHINE = st.fixed_dictionaries(
    {
        "stop": st.lists(st.integers(0, 9), max_size=3),
        "drop": st.lists(st.integers(0, 9), max_size=3),
        "leftover": st.booleans(),
        "router_files": st.sampled_from(["match", "stale", "none"]),
    }
)


def write(tmp_path, name: str, data: dict, shuffle: random.Random | None = None) -> str:
    doc = {"version": 1, "project": "prop", **data}
    if shuffle is not None:
        doc = _shuffled(doc, shuffle)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(path)


def _shuffled(value, rng: random.Random):
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: _shuffled(v, rng) for k, v in items}
    return value


def valid(data: dict) -> dict:
    """Keep a random file valid: the memory fractions of up to four models sharing a GPU stay under 1."""
    for model in data["models"].values():
        model.setdefault("vllm", {}).setdefault("gpu_memory_utilization", 0.2)
    return data


def desired_of(tmp_path, name, data, shuffle=None):
    valid(data)
    return build_desired(load_config(write(tmp_path, name, data, shuffle)), host_context(tmp_path / "store"))


class Machine:
    """An in-memory Docker: containers as list-API entries, the router's live files, the store."""

    def __init__(self):
        self.containers: dict[str, dict] = {}
        self.router_files: dict[str, str] = {}
        self.markers: dict[str, dict] = {}
        self.ids = itertools.count(1)

    def observed(self):
        return parse_state(
            "prop",
            list(self.containers.values()),
            [{"Id": "sha256:img", "RepoTags": ["local/engine:1", "vllm/vllm-openai:v0.31.0", "haproxy:3.2"]}],
            self.router_files,
            self.markers,
        )

    def put(self, container, state="running"):
        ports = (
            [
                {
                    "IP": "127.0.0.1",
                    "PrivatePort": container.container_port,
                    "PublicPort": container.host_port,
                    "Type": "tcp",
                }
            ]
            if container.host_port
            else []
        )
        self.containers[container.name] = {
            "Id": f"id{next(self.ids):06d}",
            "Names": [f"/{container.name}"],
            "Image": container.image,
            "ImageID": "sha256:img",
            "Labels": dict(container.labels),
            "State": state,
            "Status": "Up 1 second" if state == "running" else "Exited (0) 1 second ago",
            "Ports": ports,
        }

    def apply(self, plan, desired):
        """What the executor does, action by action (readiness always succeeds here)."""
        for action in plan.actions:
            if action.kind == "download":
                self.markers[action.download.dest] = {  # as the download writes it: with its source
                    "repo": action.download.repo,
                    "revision": action.download.revision,
                    "kind": action.download.kind,
                    "commit": "c" * 40,
                    "files": {"config.json": 1},
                    "complete_repo": True,
                }
            elif action.kind == "remove":
                self.containers.pop(action.container, None)
            elif action.kind in ("create", "recreate"):
                container = (
                    router_container(plan.project, action.spec)
                    if action.address == "router"
                    else render(plan.project, action.model, action.spec)
                )
                self.containers.pop(container.name, None)
                self.put(container)
            elif action.kind == "start":
                self.containers[action.container]["State"] = "running"
                self.containers[action.container]["Status"] = "Up 1 second"
        if any(a.address == "router" and a.kind != "noop" for a in plan.actions) or any(
            a.kind in ("create", "recreate", "remove", "start") for a in plan.actions
        ):
            self.router_files = render_files(
                desired.router.settings, list(desired.router.routes)
            )  # the executor's final route convergence


def scatter(machine: Machine, chaos: dict) -> None:
    """Disturb an applied machine: stop or remove containers, leave an old backup, stale router files."""
    names = sorted(machine.containers)
    for i in chaos["stop"]:
        if names:
            entry = machine.containers[names[i % len(names)]]
            entry["State"], entry["Status"] = "exited", "Exited (137) 2 seconds ago"
    for i in chaos["drop"]:
        if machine.containers:
            machine.containers.pop(sorted(machine.containers)[i % len(machine.containers)], None)
    if chaos["leftover"] and names:
        entry = json.loads(json.dumps(machine.containers.get(names[0]) or {}))
        if entry:
            entry["Id"], entry["Names"], entry["Ports"] = "leftover", [entry["Names"][0] + "-aigo-previous"], []
            machine.containers[entry["Names"][0][1:]] = entry
    if chaos["router_files"] == "stale":
        machine.router_files = {**machine.router_files, "models.json": "{}"}
    elif chaos["router_files"] == "none":
        machine.router_files = {}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before=FILES, after=FILES, chaos=MACHINE)
def test_plan_apply_plan_converges_to_noops(tmp_path, before, after, chaos):
    machine = Machine()
    old = desired_of(tmp_path, "before.yaml", before)
    machine.apply(build_plan(old, machine.observed()), old)
    scatter(machine, chaos)
    new = desired_of(tmp_path, "after.yaml", after)
    first = build_plan(new, machine.observed())
    assert not first.blockers
    machine.apply(first, new)
    second = build_plan(new, machine.observed())
    assert [a for a in second.actions if a.kind != "noop"] == []
    assert not second.has_changes
    # every model folder the file names is complete: nothing left to download
    assert all(
        d["dest"] in machine.markers
        for d in downloads({a: m.spec for a, m in new.models.items()})
        if any(m in new.models for m in d["models"])
    )


DEFAULTS = {"gpus": "all"}
VLLM_DEFAULTS = {"gpu_memory_utilization": 0.9, "tool_calling": True}


def with_defaults(data: dict) -> dict:
    """The same file with every default written out."""
    out = json.loads(json.dumps(data))
    for model in out["models"].values():
        for key, value in DEFAULTS.items():
            model.setdefault(key, value)
        if "repo" in model["source"]:
            model["source"].setdefault("revision", "main")
        settings_ = model.setdefault("vllm", {})
        for key, value in VLLM_DEFAULTS.items():
            settings_.setdefault(key, value)
        if settings_["tool_calling"]:
            settings_.setdefault("tool_call_parser", "hermes")
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=FILES, seed=st.integers(0, 2**32 - 1))
def test_canonical_spec_is_stable_under_reordering_and_written_defaults(tmp_path, data, seed):
    valid(data)
    base = desired_of(tmp_path, "a.yaml", data)
    for variant in (
        desired_of(tmp_path, "b.yaml", data, random.Random(seed)),
        desired_of(tmp_path, "c.yaml", with_defaults(data), random.Random(seed + 1)),
    ):
        assert {a: m.spec for a, m in variant.models.items()} == {a: m.spec for a, m in base.models.items()}
        assert {a: m.container.labels for a, m in variant.models.items()} == {
            a: m.container.labels for a, m in base.models.items()
        }
        assert render_key(variant.router.settings, list(variant.router.routes)) == render_key(
            base.router.settings, list(base.router.routes)
        )
