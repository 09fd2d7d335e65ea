"""Environment names that load code into an engine or undo what aigo-apply decides for its container
are refused in `env:`, located and with the reason, at validation and again where the container
is made (config/env_names.py); harmless names pass."""

from __future__ import annotations

import json

import pytest

from aigo_apply.config import env_names
from aigo_apply.desired.engines import common
from aigo_apply.errors import ConfigInvalid, UnsafeSetting
from aigo_apply.observe.config_file import load_config

REFUSED = [
    # the dynamic linker: every LD_* name, and its tunables
    ("LD_PRELOAD", "dynamic linker"),
    ("LD_LIBRARY_PATH", "dynamic linker"),
    ("LD_AUDIT", "dynamic linker"),
    ("LD_DEBUG_OUTPUT", "dynamic linker"),
    ("LD_ANYTHING_NEW", "dynamic linker"),
    ("GLIBC_TUNABLES", "dynamic linker"),
    # Python start-up: where code is found, and what runs or is imported
    ("PYTHONPATH", "Python reads PYTHON*"),
    ("PYTHONSTARTUP", "Python reads PYTHON*"),
    ("PYTHONHOME", "Python reads PYTHON*"),
    ("PYTHONUSERBASE", "Python reads PYTHON*"),
    ("PYTHONINSPECT", "Python reads PYTHON*"),
    ("PYTHONBREAKPOINT", "Python reads PYTHON*"),
    ("PYTHONWARNINGS", "Python reads PYTHON*"),
    ("PYTHONPLATLIBDIR", "Python reads PYTHON*"),
    ("PYTHONPYCACHEPREFIX", "Python reads PYTHON*"),
    ("PYTHONEXECUTABLE", "Python reads PYTHON*"),
    # shells and PATH
    ("BASH_ENV", "shell"),
    ("ENV", "shell"),
    ("SHELLOPTS", "bash"),
    ("PS4", "bash"),
    ("PATH", "which program the container runs"),
    # engine switches that run code or open the engine
    ("VLLM_PLUGINS", "plugins"),
    ("VLLM_ALLOW_INSECURE_SERIALIZATION", "unpickle"),
    ("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "LoRA"),
    ("VLLM_SERVER_DEV_MODE", "development endpoints"),
    ("LLAMA_ARG_HOST", "command-line flags"),
    ("LLAMA_ARG_LORA", "command-line flags"),
    ("LLAMA_ARG_HF_REPO", "command-line flags"),
    # what the tool owns: offline engines, GPUs
    ("HF_HUB_OFFLINE", "HF_HUB_OFFLINE=1"),
    ("TRANSFORMERS_OFFLINE", "HF_HUB_OFFLINE=1"),
    ("HF_ENDPOINT", "HF_HUB_OFFLINE=1"),
    ("VLLM_USE_MODELSCOPE", "HF_HUB_OFFLINE=1"),
    ("CUDA_VISIBLE_DEVICES", "gpus:"),
    ("NVIDIA_VISIBLE_DEVICES", "gpus:"),
    ("NVIDIA_DRIVER_CAPABILITIES", "gpus:"),
    ("NVIDIA_MIG_MONITOR_DEVICES", "gpus:"),
    # the network: proxies in any case and for any scheme, TLS trust
    ("HTTP_PROXY", "proxy"),
    ("http_proxy", "proxy"),
    ("Https_Proxy", "proxy"),
    ("ALL_PROXY", "proxy"),
    ("all_proxy", "proxy"),
    ("NO_PROXY", "proxy"),
    ("no_proxy", "proxy"),
    ("FTP_PROXY", "proxy"),
    ("socks5_proxy", "proxy"),
    ("SSL_CERT_FILE", "trusts"),
    ("REQUESTS_CA_BUNDLE", "trusts"),
    ("CURL_CA_BUNDLE", "trusts"),
]
ACCEPTED = [
    "VLLM_LOGGING_LEVEL",
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN",
    "VLLM_ATTENTION_BACKEND",
    "SGLANG_LOG_LEVEL",
    "PYTHONUNBUFFERED",
    "PYTHONIOENCODING",
    "OMP_NUM_THREADS",
    "NCCL_DEBUG",
    "ld_preload",  # the dynamic linker reads upper case only (Linux names are case-sensitive)
    "pythonpath",
    "MY_LD_PRELOAD",
    "TZ",
    "HF_HUB_ENABLE_HF_TRANSFER",
]


def problems(tmp_path, env: str, where: str = "model") -> list[str]:
    model_env = f", env: {env}" if where == "model" else ""
    text = (
        "version: 1\nproject: p\nmodels:\n"
        f"  m: {{source: {{path: /srv/models/m}}, context_length: 4096, gpus: none{model_env}}}\n"
    )
    path = tmp_path / "aigo.yaml"
    path.write_text(text)
    try:
        load_config(str(path))
    except ConfigInvalid as exc:
        return [p.format().replace(str(path), "F") for p in exc.problems]
    return []


@pytest.mark.parametrize("name, why", REFUSED)
def test_a_name_that_loads_code_or_undoes_the_tools_settings_is_refused_where_written(tmp_path, name, why):
    found = problems(tmp_path, f"{{A: x, {name}: '1'}}")
    assert len(found) == 1, found
    assert found[0].startswith("F:4:") and f"models.m.env.{name}: an engine never gets {name}" in found[0]
    assert why in found[0] and "remove it" in found[0]


@pytest.mark.parametrize("name, why", REFUSED)
def test_a_refused_name_is_refused_whatever_its_value(tmp_path, name, why):
    for value in ("''", "0", "{from_env: SOME_VARIABLE}", "{from_file: /srv/secret}"):
        assert any(f"an engine never gets {name}" in p for p in problems(tmp_path, f"{{{name}: {value}}}"))


@pytest.mark.parametrize("name", ACCEPTED)
def test_ordinary_engine_settings_pass(tmp_path, name):
    assert problems(tmp_path, f"{{{name}: '1'}}") == []


def test_every_name_the_tool_sets_on_an_engine_is_refused_in_env():
    assert env_names.TOOL_ENV and common.OFFLINE_ENV is env_names.TOOL_ENV
    assert all(env_names.refused_name(name) for name in env_names.TOOL_ENV)


def spec(env: dict) -> dict:
    logs = {"max_files": 5, "max_size": "50m"}
    return {"gpus": "none", "image": "vllm/vllm-openai:v0.31.0", "port": 20000, "env": env, "logs": logs}


@pytest.mark.parametrize("name", [name for name, _ in REFUSED])
def test_the_container_is_refused_where_it_is_made_if_validation_was_bypassed(name):
    with pytest.raises(UnsafeSetting, match=f"model 'm': refusing to give the engine {name}"):
        common.engine_container("p", "m", spec({name: "1"}), ["x"], [], 8000)


def test_the_tools_own_variables_are_what_the_engine_gets():
    container = common.engine_container("p", "m", spec({"VLLM_LOGGING_LEVEL": "DEBUG"}), ["x"], [], 8000)
    assert dict(container.env) == {"HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "DEBUG"}
    assert json.loads(json.dumps(dict(container.env)))["HF_HUB_OFFLINE"] == "1"
