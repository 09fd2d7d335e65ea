"""Desired state -> the exact container each model needs. Golden files pin the full container
definition (image, `vllm serve` command line, env, mounts, port, GPUs) of every example; set
AIGO_UPDATE_GOLDEN=1 to rewrite them after an intended change, and review the diff."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from aigo_apply.desired import labels
from aigo_apply.desired.build import assign_ports, build_desired
from aigo_apply.desired.engines import render
from aigo_apply.desired.engines.vllm import UnsafeSetting
from aigo_apply.observe.config_file import load_config

from helpers.configs import host_context, write_config
from helpers.paths import EXAMPLES, GOLDEN, ROOT


def definition_of(example: str) -> dict:
    os.environ["AIGO_STATE_DIR"] = "/state"
    try:
        desired = build_desired(load_config(str(EXAMPLES / example)), host_context(Path("/store")))
    finally:
        del os.environ["AIGO_STATE_DIR"]
    out = {}
    for alias, container in [(a, m.container) for a, m in desired.models.items()] + [
        ("(router)", desired.router.container)
    ]:
        d = container.definition()
        d["labels"] = sorted(container.labels)
        out[alias] = d
    text = json.dumps(out).replace(str(ROOT), "<checkout>").replace(f'"{os.getuid()}:{os.getgid()}"', '"<uid>:<gid>"')
    return json.loads(text)


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_container_definitions_match_golden(example):
    golden = GOLDEN / (Path(example).stem + ".json")
    actual = definition_of(example)
    if os.environ.get("AIGO_UPDATE_GOLDEN"):
        golden.write_text(json.dumps(actual, indent=2) + "\n")
    assert actual == json.loads(golden.read_text())


def test_router_container_shape():
    router = definition_of("demo.yaml")["(router)"]
    assert router["entrypoint"] == ["haproxy"] and router["network_mode"] == "host"
    assert router["command"] == ["-W", "-db", "-f", "/usr/local/etc/haproxy/aigo/live/haproxy.cfg"]
    assert router["mounts"] == [
        ["/state/demo/router", "/usr/local/etc/haproxy/aigo", True],
        ["/state/demo/sockets", "/run/aigo-engines", True],  # the engines' sockets: connecting needs no write
    ]
    assert router["user"] == "<uid>:<gid>" and router["image"] == "aigo-haproxy:bookworm"
    # scheduled ahead of a busy engine (desired/engines/router.py); an engine keeps Docker's weight
    assert router["cpu_shares"] == 8192
    assert all("cpu_shares" not in d for name, d in definition_of("demo.yaml").items() if name != "(router)")


def test_nemotron_command_line_maps_each_recipe_setting():
    command = definition_of("dgx-spark-nemotron.yaml")["nemotron-30b"]["command"]
    assert command == [
        "/models/nemotron-30b",
        "--served-model-name",
        "nemotron-30b",
        "--max-model-len",
        "131072",
        "--gpu-memory-utilization",
        "0.85",
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "qwen3_coder",
        "--reasoning-parser",
        "nemotron_v3",
        "--moe-backend",
        "flashinfer_cutlass",
        "--mamba-backend",
        "triton",
        "--tensor-parallel-size",
        "1",
        "--trust-remote-code",
        "--uds",
        "/run/aigo/engine.sock",
    ]


def test_container_shape(tmp_path):
    d = build_desired(load_config(str(EXAMPLES / "single-gpu.yaml")), host_context(Path("/store")))
    c = d.models["qwen3-8b"].container
    assert c.image == "vllm/vllm-openai:v0.31.0"
    assert c.name == "aigo-workstation-qwen3-8b"
    # no port: it serves on its socket, in the one folder of the project's state it may write
    assert (c.host_port, c.container_port, c.ipc_mode, c.gpus) == (None, None, "private", "all")
    assert c.shm_size == 32 * 1024**3 and c.network_mode == "none"  # its own /dev/shm; no network
    assert c.command[-2:] == ("--uds", "/run/aigo/engine.sock") and c.entrypoint[:2] == ("/bin/sh", "-c")
    assert [m.target for m in c.mounts if not m.read_only] == ["/run/aigo", "/root/.cache"]
    assert c.mounts[1].source == str(d.router.spec["sockets_dir"]) + "/qwen3-8b"
    assert c.mounts[0].source == "/store/Qwen--Qwen3-8B/main" and c.mounts[0].read_only
    assert c.labels[labels.PROJECT] == "workstation" and c.labels[labels.MODEL] == "qwen3-8b"
    assert json.loads(c.labels[labels.SPEC]) == d.models["qwen3-8b"].spec
    # downloaded on the host: the engine runs offline and gets no token
    assert dict(c.env) == {"HF_HUB_OFFLINE": "1"} and json.loads(c.labels[labels.SPEC])["env"] == {}


def test_image_override_and_defaults(tmp_path):
    base = "version: 1\nproject: p\nmodels:\n  m: {source: {path: /m}, context_length: 10, gpus: none}\n"
    spec = lambda text: build_desired(load_config(str(write_config(tmp_path, text))), host_context()).models["m"].spec
    assert spec(base)["image"] == "vllm/vllm-openai:v0.31.0"
    assert spec(base + "engines: {vllm: {image_tag: v0.31.0-cu129}}\n")["image"] == "vllm/vllm-openai:v0.31.0-cu129"
    assert (
        spec(base + "engines: {vllm: {image: mirror.local:5000/vllm}}\n")["image"] == "mirror.local:5000/vllm:v0.31.0"
    )
    s = spec(base)
    assert s["vllm"] == {"gpu_memory_utilization": 0.9, "tool_call_parser": "hermes", "tool_calling": True}
    s = spec(base.replace("gpus: none}", "gpus: none, vllm: {tool_calling: false}}"))
    assert s["vllm"] == {"gpu_memory_utilization": 0.9, "tool_calling": False}
    command = render("p", "m", s).command
    assert "--enable-auto-tool-choice" not in command and "--tool-call-parser" not in command
    assert spec(base + "defaults: {gpu_memory_utilization: 0.5}\n")["vllm"]["gpu_memory_utilization"] == 0.5


def test_relative_path_source_resolves_against_the_file(tmp_path):
    (tmp_path / "models" / "m").mkdir(parents=True)
    text = "version: 1\nproject: p\nmodels:\n  m: {source: {path: models/m}, context_length: 10, gpus: none}\n"
    spec = build_desired(load_config(str(write_config(tmp_path, text))), host_context()).models["m"].spec
    assert spec["source"] == {"path": str(tmp_path / "models" / "m")} and spec["model_dir"] == str(
        tmp_path / "models" / "m"
    )


def test_auto_ports_are_stable_and_avoid_taken_ports():
    models = {f"m{i}": {} for i in range(40)}
    first = assign_ports("lab", models, 8000)
    assert first == assign_ports("lab", dict(reversed(list(models.items()))), 8000)
    assert len(set(first.values())) == 40 and all(20000 <= p < 30000 for p in first.values())
    # adding a model never moves the existing ones (barring a hash collision with the newcomer)
    more = assign_ports("lab", {**models, "newcomer": {}}, 8000)
    assert {a: more[a] for a in first} == first
    # an explicit port that sits on an automatic one pushes that one aside
    pinned = assign_ports("lab", {**models, "pinned": {"port": first["m3"]}}, 8000)
    assert pinned["pinned"] == first["m3"] and pinned["m3"] != first["m3"]


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"tool_call_parser": "nope"}, "vllm.tool_call_parser 'nope' is not a name vLLM v0.31.0 accepts"),
        ({"reasoning_parser": "--api-key=x"}, "is not a name vLLM v0.31.0 accepts"),
        ({"max_num_seqs": "8 --api-key x"}, "refusing to put '8 --api-key x' on the vLLM command line"),
        ({"max_num_seqs": "-1"}, "refusing to put '-1'"),
    ],
)
def test_render_rechecks_values_before_any_container(settings, message):
    spec = {
        "engine": "vllm",
        "image": "i:1",
        "model_dir": "/m",
        "context_length": 10,
        "gpus": "none",
        "port": 1,
        "env": {},
        "vllm": {"gpu_memory_utilization": 0.9, "tool_calling": False, **settings},
    }
    with pytest.raises(UnsafeSetting, match=message):
        render("p", "m", spec)


@pytest.mark.parametrize(
    "tag, warned",
    [
        ("v0.31.0", False),
        ("v0.31.0-cu129", False),
        ("v0.30.1", True),
        ("0.29.0-cu126", True),
        ("nightly-2026", True),
        ("custom-build", False),
    ],
)
def test_other_release_tags_are_warned_about(tmp_path, tag, warned):
    text = (
        "version: 1\nproject: p\nmodels:\n  m: {source: {path: /m}, context_length: 10, gpus: none}\n"
        f"engines: {{vllm: {{image_tag: {tag}}}}}\n"
    )
    warnings = build_desired(load_config(str(write_config(tmp_path, text))), host_context()).warnings
    assert bool(warnings) == warned
    if warned:
        assert (
            "checked against vLLM v0.31.0" in warnings[0]
            or "checked every setting name against vLLM v0.31.0" in warnings[0]
        )


def test_image_object_with_and_without_override(tmp_path):
    from aigo_apply.desired.images import image_object

    base = "version: 1\nproject: p\nmodels: {}\n"
    plain = image_object(load_config(str(write_config(tmp_path, base))).data, "vllm")
    assert (plain["image_reference"], plain["default_tag"], plain["tag_overridden"]) == (
        "vllm/vllm-openai:v0.31.0",
        "v0.31.0",
        False,
    )
    data = load_config(str(write_config(tmp_path, base + "engines: {vllm: {image_tag: v0.31.0-cu129}}\n"))).data
    over = image_object(data, "vllm")
    assert (over["image_reference"], over["default_tag"], over["tag_overridden"]) == (
        "vllm/vllm-openai:v0.31.0-cu129",
        "v0.31.0",
        True,
    )
    data = load_config(str(write_config(tmp_path, base + "engines: {vllm: {image: mirror.local/vllm}}\n"))).data
    mirror = image_object(data, "vllm")
    assert mirror["image_reference"] == "mirror.local/vllm:v0.31.0" and mirror["repository_overridden"]
    assert not mirror["tag_overridden"]
    untagged = image_object(data, "sglang")  # no built-in tag: nothing to pull until the file names one
    assert (untagged["image_reference"], untagged["default_tag"], untagged["tag_overridden"]) == (None, None, False)
    data = load_config(str(write_config(tmp_path, base + "engines: {llama.cpp: {image_tag: server-cuda}}\n"))).data
    tagged = image_object(data, "llama.cpp")
    assert (tagged["image_reference"], tagged["default_tag"], tagged["tag_overridden"]) == (
        "ghcr.io/ggml-org/llama.cpp:server-cuda",
        None,
        False,
    )


def test_speculative_renders_one_json_flag_and_mounts_the_draft(tmp_path):
    (tmp_path / "head").mkdir()
    text = (
        "version: 1\nproject: p\nmodels:\n  m:\n    source: {path: /m}\n    context_length: 10\n    gpus: none\n"
        "    vllm: {speculative: {method: eagle3, num_speculative_tokens: 3, draft: {path: head}}}\n"
        "  n:\n    source: {path: /n}\n    context_length: 10\n    gpus: none\n"
        "    vllm: {speculative: {method: nemotron_h_mtp}}\n"
    )
    desired = build_desired(load_config(str(write_config(tmp_path, text))), host_context())
    m = desired.models["m"].container
    flag = m.command.index("--speculative-config")
    assert json.loads(m.command[flag + 1]) == {
        "method": "eagle3",
        "num_speculative_tokens": 3,
        "model": "/models/m.draft",
    }
    assert [(x.source, x.target, x.read_only) for x in m.mounts][1] == (str(tmp_path / "head"), "/models/m.draft", True)
    n = desired.models["n"]
    assert json.loads(n.container.command[n.container.command.index("--speculative-config") + 1]) == {
        "method": "nemotron_h_mtp"
    }
    assert any("deprecated in vLLM v0.31.0, which runs it as 'mtp'" in note for note in n.notes)


def test_speculative_method_is_checked_with_a_hint(tmp_path):
    text = (
        "version: 1\nproject: p\nmodels:\n  m:\n    source: {path: /m}\n    context_length: 10\n    gpus: none\n"
        "    vllm: {speculative: {method: eagle-3, num_speculative_tokens: 0}}\n"
    )
    from aigo_apply.errors import ConfigInvalid

    with pytest.raises(ConfigInvalid) as info:
        load_config(str(write_config(tmp_path, text)))
    found = " | ".join(p.format() for p in info.value.problems)
    assert (
        "models.m.vllm.speculative.method: 'eagle-3' is not a speculative method that vLLM v0.31.0 knows "
        "(did you mean 'eagle3'?)"
    ) in found
    assert "models.m.vllm.speculative.num_speculative_tokens: must be at least 1, not 0" in found


ENGINES_FILE = """
version: 1
project: lab
engines:
  sglang: {image_tag: v0.5.6}
  llama.cpp: {image: registry.local:5000/llama.cpp, image_tag: server-cuda-b6000}
models:
  main: {source: {repo: Qwen/Qwen3-8B}, context_length: 8192, gpus: [2], vllm: {tool_call_parser: qwen3_xml}}
  sg:
    engine: sglang
    source: {path: m}
    context_length: 16k
    gpus: [0, 1]
    sglang: {tensor_parallel_size: 2, trust_remote_code: true}
    vllm: {tool_call_parser: qwen3_xml, max_num_seqs: 8}
  quant: {source: {repo: Qwen/Qwen3-4B-GGUF, revision: v1, file: q4/Qwen3-4B-Q4_K_M.gguf}, context_length: 4096,
          gpus: [0, 1], llama.cpp: {tensor_parallel_size: 2, gpu_layers: 30}}
  cpu: {source: {path: gguf/tiny.gguf}, context_length: 2048, gpus: none}
"""


def test_each_engine_has_its_own_launch_line_and_notes_ignored_settings(tmp_path):
    desired = build_desired(load_config(str(write_config(tmp_path, ENGINES_FILE))), host_context(Path("/store")))
    m = desired.models
    assert {a: x.spec["engine"] for a, x in m.items()} == {
        "main": "vllm",
        "sg": "sglang",
        "quant": "llama.cpp",
        "cpu": "llama.cpp",
    }
    assert m["sg"].container.entrypoint == ("python3", "-m", "sglang.launch_server")
    assert m["sg"].container.image == "lmsysorg/sglang:v0.5.6"
    assert list(m["sg"].container.command) == [
        "--model-path",
        "/models/sg",
        "--served-model-name",
        "sg",
        "--context-length",
        "16000",
        "--mem-fraction-static",
        "0.9",
        "--tp-size",
        "2",
        "--trust-remote-code",
        "--enable-metrics",
        "--host",
        "0.0.0.0",
        "--port",
        "30000",
    ]
    assert m["sg"].container.container_port == 30000 and m["sg"].container.host_ip == "127.0.0.1"
    port = m["sg"].spec["port"]
    assert m["sg"].notes == (
        "vllm settings (max_num_seqs, tool_call_parser) are ignored: this model runs on sglang",
        "context_length '16k' means 16000 tokens",
        f"served on 127.0.0.1:{port} (the sglang server cannot listen on a Unix socket): any account on this "
        "machine can reach it there without an API key, bypassing the router",
    )
    assert "vllm" not in m["sg"].spec  # ignored settings never cause a recreate
    quant = m["quant"].container
    assert quant.image == "registry.local:5000/llama.cpp:server-cuda-b6000" and quant.entrypoint == (
        "/app/llama-server",
    )
    assert list(quant.command) == [
        "--model",
        "/models/quant/q4/Qwen3-4B-Q4_K_M.gguf",
        "--alias",
        "quant",
        "--ctx-size",
        "4096",
        "--n-gpu-layers",
        "30",
        "--split-mode",
        "row",
        "--jinja",
        "--metrics",
        "--host",
        "0.0.0.0",
        "--port",
        "8080",
    ]
    assert quant.mounts[0].source == "/store/Qwen--Qwen3-4B-GGUF/v1" and quant.mounts[0].read_only
    cpu = m["cpu"].container
    assert cpu.command[:2] == ("--model", "/models/cpu/tiny.gguf")
    assert cpu.command[cpu.command.index("--n-gpu-layers") + 1] == "0"
    assert [m.source for m in cpu.mounts] == [str(tmp_path / "gguf" / "tiny.gguf")] and cpu.gpus == "none"
    assert json.loads(cpu.labels[labels.SPEC])["engine"] == "llama.cpp" and cpu.labels[labels.ENGINE] == "llama.cpp"
    assert [r.owned_by for r in desired.router.routes] == ["llama.cpp", "vllm", "llama.cpp", "sglang"]


def test_engine_by_format_chooses_the_engine_of_a_model_that_names_none(tmp_path):
    text = ENGINES_FILE.replace("models:\n", "defaults: {engine_by_format: {safetensors-repo: sglang}}\nmodels:\n", 1)
    desired = build_desired(load_config(str(write_config(tmp_path, text))), host_context(Path("/store")))
    assert desired.models["main"].spec["engine"] == "sglang"
    assert desired.models["main"].notes[0] == "vllm settings (tool_call_parser) are ignored: this model runs on sglang"
    assert desired.warnings == ()  # no model runs on vLLM: no vLLM tag warning either


@pytest.mark.parametrize(
    "engine, spec_patch, message",
    [
        ("sglang", {"sglang": {"gpu_memory_utilization": 1.5}}, "is not a fraction"),
        ("sglang", {"context_length": "8192 --evil"}, "refusing to put '8192 --evil' on the SGLang command line"),
        ("llama.cpp", {"model_file": "../../etc/passwd.gguf"}, "is not a .gguf file inside the model folder"),
        ("llama.cpp", {"model_file": "x.bin"}, "is not a .gguf file inside the model folder"),
        ("llama.cpp", {"llama.cpp": {"gpu_layers": "1 --x"}}, "refusing to put '1 --x' on the llama.cpp command line"),
    ],
)
def test_other_engines_recheck_values_before_any_container(tmp_path, engine, spec_patch, message):
    desired = build_desired(load_config(str(write_config(tmp_path, ENGINES_FILE))), host_context(Path("/store")))
    alias = {"sglang": "sg", "llama.cpp": "quant"}[engine]
    with pytest.raises(UnsafeSetting, match=message.replace("(", r"\(").replace(")", r"\)")):
        render("lab", alias, {**desired.models[alias].spec, **spec_patch})


def test_the_desired_state_depends_on_the_host_context_alone(tmp_path, monkeypatch):
    from dataclasses import replace

    from aigo_apply.desired.types import HostContext
    from aigo_apply.observe.host_paths import host_facts

    text = (
        "version: 1\nproject: lab\ndefaults: {models_dir: ~/store}\nmodels:\n"
        "  local: {source: {path: ~/models/m}, context_length: 4096, gpus: none}\n"
        "  hub: {source: {repo: org/m}, context_length: 4096, gpus: none}\n"
    )
    config = load_config(str(write_config(tmp_path, text)))
    alice = HostContext(1000, 1000, tmp_path / "alice", tmp_path / "state-a", tmp_path / "cache-a")
    root = HostContext(0, 0, tmp_path / "root", tmp_path / "state-r", tmp_path / "cache-r")
    # what each host says of its own folders and of the file's paths, `~` against its home
    alice = replace(alice, paths=host_facts(alice.home, alice.models_dir, config))
    root = replace(root, paths=host_facts(root.home, root.models_dir, config))
    # the process's own environment plays no part
    monkeypatch.setenv("HOME", "/nonexistent-home")
    monkeypatch.setenv("AIGO_STATE_DIR", "/nonexistent-state")
    monkeypatch.setenv("XDG_CACHE_HOME", "/nonexistent-cache")
    a, r = build_desired(config, alice), build_desired(config, root)
    assert a.router.spec["user"] == "1000:1000" and r.router.spec["user"] == "0:0"
    assert a.router.spec["config_dir"] == str(tmp_path / "state-a" / "lab" / "router")
    assert a.models["local"].spec["source"]["path"] == str((tmp_path / "alice" / "models" / "m").resolve())
    assert a.models["hub"].spec["model_dir"].startswith(str(tmp_path / "alice" / "store"))
    assert build_desired(config, alice) == a  # the same file and context give the same state


def test_a_number_that_is_not_finite_never_reaches_a_command_line():
    from aigo_apply.desired.engines.common import number

    assert number(0.9) == "0.9" and number(4096) == "4096"
    for bad in (float("nan"), float("inf"), -float("inf"), True):
        with pytest.raises(UnsafeSetting):
            number(bad)
