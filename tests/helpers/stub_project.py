"""A two-model project on the stub engine (chat and tools, behind the router), and ways to reach its
engines: shared by the apply tests and the fault tests."""

from __future__ import annotations

import json
import textwrap
import urllib.request

from aigo_apply.adapters.engine_http import EngineClient
from aigo_apply.desired import labels
from aigo_apply.desired.types import EngineAddress, socket_file

from helpers.configs import free_port, model_folder, router_yaml, write_config

ROUTER_PORTS: dict[str, int] = {}


def config(
    tmp_path,
    project,
    chat_env="",
    tools_parser="llama3_json",
    load="0.3",
    ready_timeout=60,
    extra="",
    engine_image="aigo-stub-engine:1",
):
    router_port = ROUTER_PORTS.setdefault(project, free_port())  # the same port for every file of a test
    model_folder(tmp_path / "m")
    return write_config(
        tmp_path,
        textwrap.dedent(f"""
        version: 1
        project: {project}
        engines: {{vllm: {{image: {engine_image.rpartition(":")[0]}, image_tag: "{engine_image.rpartition(":")[2]}"}}}}
        {router_yaml(router_port)}
        defaults: {{ready_timeout: {ready_timeout}}}
        models:
          chat:
            source: {{path: m}}
            context_length: 4096
            gpus: none
            env: {{AIGO_STUB_LOAD_SECONDS: "{load}"{chat_env}}}
          tools:
            source: {{path: m}}
            context_length: 8K
            gpus: none
            env: {{AIGO_STUB_LOAD_SECONDS: "{load}"}}
            vllm: {{tool_call_parser: {tools_parser}}}
        """)
        + extra,
    )


def chat(where: int | str, alias: str) -> dict:
    """A chat completion straight to an engine at `where`: a port on 127.0.0.1 (the router's, or an
    engine's) or an engine's Unix socket (its path)."""
    body = {"model": alias, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    if isinstance(where, str):
        # as the tool reaches it: a deep test folder makes the path longer than AF_UNIX takes
        with EngineClient(EngineAddress(socket=where), timeout=5) as direct:
            reply = direct.post("/v1/chat/completions", json=body)
            reply.raise_for_status()
            return reply.json()
    request = urllib.request.Request(
        f"http://127.0.0.1:{where}/v1/chat/completions",
        method="POST",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.load(response)


def engine_addresses(runtime, project) -> dict[str, int | str]:
    """Where each running engine of the project listens on this machine: the port it publishes, or
    its Unix socket (the host side of its /run/aigo mount, the file of its slot)."""
    out: dict[str, int | str] = {}
    for c in runtime.list_containers():
        if c["Labels"].get(labels.PROJECT) != project or labels.MODEL not in c["Labels"]:
            continue
        socket = next((m["Source"] for m in c.get("Mounts") or [] if m.get("Destination") == "/run/aigo"), None)
        if c["Ports"]:
            out[c["Labels"][labels.MODEL]] = c["Ports"][0]["PublicPort"]
        elif socket:
            slot = c["Labels"].get(labels.SLOT, "a")
            out[c["Labels"][labels.MODEL]] = f"{socket}/{socket_file(slot)}"
    return out
