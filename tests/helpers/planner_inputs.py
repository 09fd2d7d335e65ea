"""The planner's in-memory inputs: a two-model file, its desired state, and the observed state
Docker would report for it (shared by the planner tests and the plan text tests)."""

from __future__ import annotations

from pathlib import Path

from aigo_apply.desired.build import build_desired
from aigo_apply.desired.model_store import downloads
from aigo_apply.observe.config_file import load_config
from aigo_apply.observe.containers import parse_state
from aigo_apply.router.haproxy import render_files

from helpers.configs import host_context, write_config

CONFIG = """
version: 1
project: lab
engines: {vllm: {image: local/engine, image_tag: "1"}}
models:
  alpha:
    source: {path: /m/alpha}
    context_length: 4096
    gpus: none
  beta:
    source: {repo: org/beta, revision: v1}
    context_length: 8K
    gpus: none
    vllm: {tool_call_parser: hermes, max_num_seqs: 8}
"""


def desired(tmp_path, text=CONFIG):
    return build_desired(load_config(str(write_config(tmp_path, text))), host_context(Path("/store")))


def running(d, state="running", status="Up 1 minute", router=True, **overrides):
    """The list-API entries Docker would return for containers made from desired state `d`
    (the engines, and the router unless router=False)."""
    out = []
    if router:
        r = d.router.container
        out.append(
            {
                "Id": "id-router",
                "Names": [f"/{r.name}"],
                "State": "running",
                "Status": "Up 1 minute",
                "Image": r.image,
                "ImageID": "sha256:img",
                "Labels": dict(r.labels),
                "Ports": [],
            }
        )
    for alias, model in d.models.items():
        c = model.container
        entry = {
            "Id": f"id-{alias}",
            "Names": [f"/{c.name}"],
            "State": state,
            "Status": status,
            "Image": c.image,
            "ImageID": "sha256:img",
            "Labels": dict(c.labels),
            "Ports": (
                [{"IP": "127.0.0.1", "PrivatePort": 8000, "PublicPort": c.host_port, "Type": "tcp"}]
                if c.host_port is not None
                else []
            ),
        }
        entry.update(overrides.get(alias, {}))
        out.append(entry)
    return out


IMAGES = [{"Id": "sha256:img", "RepoTags": ["local/engine:1", "haproxy:3.2"]}]


def observed(d, entries=None, files=None, images=IMAGES, downloaded=True):
    """What observe() would return when the machine runs `entries`, the router serves `files`, and
    (with `downloaded`) every model folder the file names is complete."""
    markers = (
        {
            n["dest"]: {
                "repo": n["repo"],
                "revision": n["revision"],
                "commit": "c0ffee",
                "files": {n["file"] or "config.json": 1},
                "complete_repo": True,
                **({"kind": n["kind"]} if "kind" in n else {}),
            }
            for n in downloads({a: m.spec for a, m in d.models.items()})
        }
        if downloaded
        else {}
    )
    return parse_state(
        "lab",
        running(d) if entries is None else entries,
        images,
        render_files(d.router.settings, list(d.router.routes)) if files is None else files,
        markers,
    )
