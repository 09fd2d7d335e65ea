"""No refusal of what users ordinarily write. Every variable vLLM 0.31.0's envs.py
reads (tests/fixtures/vllm-v0.31.0-env.json, held to the package by tests/contract/test_vllm_env_names.py),
and the common Hugging Face, PyTorch, CUDA and NCCL switches, each with an ordinary value, validate in
a model's `env:` unless aigo-apply refuses the name on purpose, with its own reason (env_names.py: code
loaders, what the tool owns, the GPUs). The credential check judges names by whole words (HF_TOKEN,
API_KEY, DB_PASSWORD, GITHUB_TOKEN are secrets; TOKENIZERS, MAX_TOKENS, TOKENS_PER_... are not) and
values by their shape (a switch or a size under a secret's name is no credential)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aigo_apply.config import env_names
from aigo_apply.config.secret_names import hub_token_name, public_variable, secret_name, switch_value, words
from aigo_apply.errors import ConfigInvalid
from aigo_apply.observe.config_file import load_config

from helpers.paths import FIXTURES

VLLM_ENV = json.loads((FIXTURES / "vllm-v0.31.0-env.json").read_text())["env"]
# Common switches of the libraries an engine runs on, with a value people write.
COMMON = {
    # Hugging Face
    "TOKENIZERS_PARALLELISM": "false", "HF_HUB_ENABLE_HF_TRANSFER": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1", "HF_HUB_DOWNLOAD_TIMEOUT": "60",
    "HF_HUB_ETAG_TIMEOUT": "30", "HF_HUB_DISABLE_SYMLINKS_WARNING": "1", "HF_HUB_VERBOSITY": "warning",
    "HF_DATASETS_OFFLINE": "1", "HF_XET_HIGH_PERFORMANCE": "1", "TRANSFORMERS_VERBOSITY": "info",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1", "SAFETENSORS_FAST_GPU": "1", "HF_HUB_DISABLE_XET": "1",
    "TOKENIZERS_VERBOSE": "0",
    # PyTorch
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "TORCH_CUDA_ARCH_LIST": "8.0 9.0+PTX",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "TORCH_NCCL_BLOCKING_WAIT": "1", "TORCH_DISTRIBUTED_DEBUG": "INFO",
    "TORCH_LOGS": "+dynamo", "TORCH_COMPILE_DEBUG": "0", "TORCHDYNAMO_DISABLE": "1",
    "TORCHINDUCTOR_COMPILE_THREADS": "1", "TORCH_SHOW_CPP_STACKTRACES": "1", "TORCH_USE_CUDA_DSA": "1",
    "PYTORCH_NVML_BASED_CUDA_CHECK": "1", "PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "OMP_NUM_THREADS": "8",
    "MKL_NUM_THREADS": "8", "TORCH_NCCL_TRACE_BUFFER_SIZE": "1000", "TORCHINDUCTOR_FREEZING": "1",
    # CUDA, cuBLAS, NCCL
    "CUDA_LAUNCH_BLOCKING": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_MODULE_LOADING": "LAZY",
    "CUDA_DEVICE_MAX_CONNECTIONS": "1", "CUDA_CACHE_DISABLE": "1", "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
    "NVIDIA_TF32_OVERRIDE": "0", "NCCL_DEBUG": "INFO", "NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1",
    "NCCL_SOCKET_IFNAME": "eth0", "NCCL_CUMEM_ENABLE": "0", "NCCL_NVLS_ENABLE": "0", "NCCL_SHM_DISABLE": "1",
    "NCCL_ASYNC_ERROR_HANDLING": "1", "CUDA_MPS_PIPE_DIRECTORY": "/tmp/nvidia-mps",
    # the issue's own examples
    "MAX_TOKENS": "4096", "VLLM_MAX_TOKENS_PER_EXPERT_FP4_MOE": "163840",
}  # fmt: skip
# Refused on purpose, with a reason of their own (not "a secret written in clear").
ON_PURPOSE_SECRETS = {"VLLM_API_KEY", "S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY"}  # with a real secret as value
HEAD = "version: 1\nproject: lab\nmodels:\n  m:\n    source: {repo: org/m}\n    context_length: 4096\n    gpus: none\n"


def _problems(tmp_path, env: dict[str, str]) -> dict[str, str]:
    """name -> the message of its problem, for every entry refused."""
    path = tmp_path / "aigo.yaml"
    body = "".join(f"      {name}: {json.dumps(value)}\n" for name, value in env.items())
    path.write_text(HEAD + "    env:\n" + body)
    try:
        load_config(str(path))
    except ConfigInvalid as exc:
        return {p.path.rsplit(".", 1)[-1]: p.message for p in exc.problems}
    return {}


@pytest.mark.parametrize("source", ["vllm", "common"])
def test_every_ordinary_setting_validates_unless_refused_on_purpose(tmp_path, source):
    env = VLLM_ENV if source == "vllm" else COMMON
    assert len(env) > (300 if source == "vllm" else 40)
    names = sorted(env)
    refused: dict[str, str] = {}
    for start in range(0, len(names), 100):  # at most 128 variables per engine
        refused |= _problems(tmp_path, {name: env[name] for name in names[start : start + 100]})
    for name, message in refused.items():
        why = env_names.refused_name(name)
        assert why is not None and message == f"an engine never gets {name} from aigo.yaml: {why}", (name, message)
    assert "looks like a secret" not in " ".join(refused.values())


def test_the_refusals_on_purpose_are_the_known_ones():
    """What the name rules refuse among vLLM's own variables, each for its reason."""
    refused = {name for name in VLLM_ENV if env_names.refused_name(name)}
    assert {"VLLM_PLUGINS", "VLLM_SERVER_DEV_MODE", "VLLM_USE_MODELSCOPE", "CUDA_VISIBLE_DEVICES"} <= refused
    assert {"LD_LIBRARY_PATH", "VLLM_ALLOW_RUNTIME_LORA_UPDATING", "VLLM_CACHE_ROOT"} <= refused
    assert not {"VLLM_LOGGING_LEVEL", "VLLM_ATTENTION_BACKEND", "VLLM_USE_FASTOKENS"} & refused
    assert not {name for name in COMMON if env_names.refused_name(name)}


@pytest.mark.parametrize("name", sorted(ON_PURPOSE_SECRETS) + ["HF_TOKEN_PATH", "DB_PASSWORD", "GITHUB_TOKEN"])
def test_a_secret_written_in_clear_under_a_secret_name_is_still_refused(tmp_path, name):
    refused = _problems(tmp_path, {name: "s3cr3t-value-written-in-clear"})
    assert "looks like a secret written in clear" in refused.get(name, ""), refused


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True), ("API_KEY", True), ("DB_PASSWORD", True), ("GITHUB_TOKEN", True), ("OPENAI_API_KEY", True),
        ("AWS_SECRET_ACCESS_KEY", True), ("AIGO_API_KEYS", True), ("apiKey", True), ("githubToken", True),
        ("MY_APIKEY", True), ("SSH_PRIVATE_KEY", True), ("AWS_ACCESS_KEY_ID", True), ("PGPASSWORD", True),
        ("TOKENIZERS_PARALLELISM", False), ("MAX_TOKENS", False), ("VLLM_MAX_TOKENS_PER_EXPERT_FP4_MOE", False),
        ("TOKENS_PER_SECOND", False), ("VLLM_USE_FASTOKENS", False), ("KEY_VALUE_CACHE", False), ("SECRETARY", False),
    ],
)  # fmt: skip
def test_names_are_judged_by_whole_words(name, secret):
    assert secret_name(name) is secret, words(name)


@pytest.mark.parametrize(
    ("name", "token"),
    [("HF_TOKEN", True), ("HUGGING_FACE_HUB_TOKEN", True), ("HUGGINGFACEHUB_API_TOKEN", True), ("HF_READ_TOKEN", True),
     ("HF_API_KEY", True), ("hf_token", True), ("HF_HUB_DISABLE_IMPLICIT_TOKEN", False), ("HF_TOKEN_PATH", False),
     ("TOKENIZERS_PARALLELISM", False), ("HF_HUB_ENABLE_HF_TRANSFER", False)],
)  # fmt: skip
def test_hub_token_names_by_words(name, token):
    assert hub_token_name(name) is token


@given(st.sampled_from(["", "0", "1", "true", "False", "on", "OFF", "4096", "-1", "0.5", "auto"]))
def test_switches_and_sizes_are_no_secret_by_their_shape(value):
    assert switch_value(value)


@pytest.mark.parametrize("value", ["hunter2", "s3cr3t", "1234567890123", "x" * 20, "/run/secrets/key"])
def test_other_values_keep_the_secret_rule(value):
    assert not switch_value(value)


@pytest.mark.parametrize(
    "name", ["HOME", "PATH", "USER", "PWD", "SHELL", "LANG", "TERM", "LOGNAME", "HOSTNAME", "LC_ALL", "XDG_RUNTIME_DIR",
             "SSH_AUTH_SOCK", "SUDO_USER", "OLDPWD", "TMPDIR", "GITHUB_SHA", "AIGO_FILE", "DISPLAY"],
)  # fmt: skip
def test_variables_anyone_can_know_are_public(name):
    assert public_variable(name)


@pytest.mark.parametrize("name", ["AIGO_API_KEYS", "ROUTER_KEYS", "GITHUB_TOKEN", "MY_SECRET", "LLM_KEYS"])
def test_variables_of_ones_own_are_not(name):
    assert public_variable(name) is None
