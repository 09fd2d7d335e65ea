"""Every example's generated command line really starts an engine: its containers are created from
the desired specs with the stub engine image standing in for vllm/vllm-openai, lmsysorg/sglang and
the llama.cpp server image (and no GPU, as this machine has none), then each answers /v1/models with
its alias at its address (vLLM: its Unix socket; the others: 127.0.0.1) and reports the context length
it was given."""

from __future__ import annotations

import json
import socket
import time
import urllib.request
from pathlib import Path

import httpx
import pytest

from aigo_apply.adapters.engine_http import EngineClient
from aigo_apply.desired.build import build_desired
from aigo_apply.desired.engines import render
from aigo_apply.desired.types import EngineAddress
from aigo_apply.observe.config_file import load_config

from helpers.configs import host_context
from helpers.paths import EXAMPLES

STUB = "aigo-stub-engine:1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_models(address: EngineAddress, timeout: float = 20.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with EngineClient(address, 2) as engine:
                reply = engine.get("/v1/models")  # llama-server answers 503 while it loads
                if reply.status_code == 200:
                    return reply.json()
        except (OSError, httpx.HTTPError):
            pass
        if time.monotonic() > deadline:
            raise OSError(f"no answer from {address}")
        time.sleep(0.1)


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_example_command_lines_start_the_stub_engine(example, runtime, project, tmp_path):
    desired = build_desired(load_config(str(EXAMPLES / example)), host_context(tmp_path / "store"))
    started = {}
    for alias, model in desired.models.items():
        # a free port, so a demo or another project on this machine never collides with the test
        spec = {**model.spec, "image": STUB, "gpus": "none", "env": {}}
        if "socket" in spec:  # its socket's folder in this test's own state folder
            spec["socket"] = str(tmp_path / "state" / "sockets" / alias)
        else:
            spec["port"] = free_port()
        if "model_file" in spec:  # llama.cpp loads one .gguf file: give it one (empty; the stub loads nothing)
            spec["model_dir"] = str(tmp_path / alias)
            (tmp_path / alias / spec["model_file"]).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / alias / spec["model_file"]).write_bytes(b"GGUF")
        container = render(project, alias, spec)
        expected = list(model.container.command)
        if model.spec["engine"] == "llama.cpp":  # without GPUs, llama.cpp offloads no layer
            expected[expected.index("--n-gpu-layers") + 1] = "0"
        assert list(container.command) == expected  # only image, GPUs, env, port (and the gguf folder) were swapped
        for mount in container.mounts:  # the model folders a download would have made (Docker makes none)
            if mount.source.startswith("/") and not Path(mount.source).exists():
                Path(mount.source).mkdir(parents=True)
        cid = runtime.create(container, {})
        runtime.start(cid)
        started[alias] = (cid, EngineAddress.of(spec))
    for alias, (cid, address) in started.items():
        try:
            cards = wait_for_models(address)
        except OSError:
            logs = runtime.api.logs(cid, tail=20).decode(errors="replace")
            pytest.fail(f"{alias} did not start from its command line:\n{logs}")
        assert [c["id"] for c in cards["data"]] == [alias]
        wanted = desired.models[alias].spec["context_length"]
        if desired.models[alias].spec["engine"] == "llama.cpp":  # llama-server reports n_ctx in /props
            with urllib.request.urlopen(f"http://127.0.0.1:{address.port}/props", timeout=2) as response:
                assert json.load(response)["default_generation_settings"]["n_ctx"] == wanted
        else:
            assert cards["data"][0]["max_model_len"] == wanted


def test_stub_refuses_what_vllm_refuses(runtime):
    out = runtime.api.create_container(
        STUB,
        command=["/m", "--served-model-name", "x", "--enable-auto-tool-choice", "--tool-call-parser", "qwen3coder"],
    )
    try:
        runtime.api.start(out["Id"])
        assert runtime.api.wait(out["Id"], timeout=20)["StatusCode"] == 1
        logs = runtime.api.logs(out["Id"]).decode()
        assert "KeyError: invalid tool call parser: qwen3coder (chose from {" in logs
    finally:
        runtime.api.remove_container(out["Id"], force=True)
