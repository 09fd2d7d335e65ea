"""Environment names an engine container never takes from aigo.yaml, and why.

A model's `env:` is handed to the engine's process as written, so a name that makes a program load
code, or that undoes what aigo-apply decides for the container, would be a free-form argument in
disguise. The list is short and each entry has a reason:

- Code loaders. The dynamic linker reads every `LD_*` name (LD_PRELOAD, LD_AUDIT load libraries
  into every program of the container, LD_LIBRARY_PATH chooses where they come from) and
  GLIBC_TUNABLES; Python reads PYTHON* names at start-up (PYTHONPATH, PYTHONHOME, PYTHONUSERBASE,
  PYTHONPLATLIBDIR and PYTHONPYCACHEPREFIX choose where code is found, PYTHONSTARTUP,
  PYTHONINSPECT and PYTHONBREAKPOINT run or import it, PYTHONWARNINGS imports the classes it
  names), so only a few output and encoding switches are accepted; a shell started in the
  container runs BASH_ENV / ENV, and SHELLOPTS=xtrace with PS4 runs commands; PATH decides which
  program the image's entrypoint (`vllm`) is. The engine's image decides all of these.
- Engine switches that run code or open the engine to its clients (vLLM v0.31.0, see
  ../shared/reference/vllm-v0.31.0.json `env`): VLLM_PLUGINS (which plugins load),
  VLLM_ALLOW_INSECURE_SERIALIZATION (pickle between processes), VLLM_ALLOW_RUNTIME_LORA_UPDATING
  (clients load adapters from any path), VLLM_SERVER_DEV_MODE (development endpoints), and
  llama-server's LLAMA_ARG_* names, which it reads as command-line flags.
- What the tool owns. TOOL_ENV is set on every engine (the engine runs offline; aigo-apply downloads
  models on this host): HF_HUB_OFFLINE, its older spelling TRANSFORMERS_OFFLINE, HF_ENDPOINT and
  VLLM_USE_MODELSCOPE (another hub) would undo that. The GPUs come from `gpus:` (the GPU ledger
  counts on it): the NVIDIA runtime on the host reads NVIDIA_* names to choose the devices and driver
  parts a container gets (not NVIDIA_TF32_OVERRIDE, which cuBLAS reads), CUDA_VISIBLE_DEVICES
  renumbers them inside.
- The network. Proxies (`*_proxy`, any case: Python and curl read both spellings, and any scheme)
  and the TLS trust files would put someone between the engine and what it fetches (image URLs in
  requests).
- Other code loaders and programs named by a path (the class, not only Python's and the linker's):
  glibc's GCONV_PATH (iconv modules), the CUDA driver's CUDA_INJECTION*_PATH (a library in every
  CUDA process), every *PLUGIN* name (VLLM_PLUGINS, NCCL_NET_PLUGIN, NCCL_TUNER_PLUGIN... load a
  library or module by name or path), library, header and program paths (`*_SO_PATH`,
  LIBRARY_PATH, `*_LIB*_PATH`, `*INCLUDE_PATH`, CPATH, VLLM_CUDART_SO_PATH, VLLM_NCCL_SO_PATH, VLLM_CUDA_COMPATIBILITY_PATH, VLLM_RUST_FRONTEND_PATH,
  TRITON_*_PATH such as TRITON_LIBCUDA_PATH and TRITON_PTXAS_PATH), VLLM_LOGGING_CONFIG_PATH
  (logging.config.dictConfig calls any callable the file names), VLLM_TEST_FORCE_LOAD_FORMAT
  (pickle weights), the compiler Triton and TorchInductor run (CC, CXX), compile caches whose
  files are loaded as code (TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR, TORCH_EXTENSIONS_DIR,
  VLLM_CACHE_ROOT: the project's cache volume is where they belong), HOME (Python's user site
  and its usercustomize module) and the start-up options of other runtimes (NODE_OPTIONS,
  JAVA_TOOL_OPTIONS, _JAVA_OPTIONS, PERL5OPT, PERL5LIB, PERLLIB, RUBYOPT, RUBYLIB).

Names are compared as written (Linux is case-sensitive: `ld_preload` is not read by anyone), except
proxies, whose lower-case spelling is read too. Hugging Face token names are refused by env_rules.
"""

from __future__ import annotations

import re

# Set by aigo-apply on every engine container (desired/engines/common.py uses this very mapping).
TOOL_ENV = {"HF_HUB_OFFLINE": "1"}
# Set by aigo-apply on an on-demand vLLM engine only (with --enable-sleep-mode): it registers /sleep,
# /wake_up and /is_sleeping, with vLLM's other development endpoints, which the router never forwards.
SLEEP_MODE_ENV = {"VLLM_SERVER_DEV_MODE": "1"}
SLEEP_MODE_FLAG = "--enable-sleep-mode"

REMOVE = "the engine's image decides this; remove it"
_OFFLINE = (
    "aigo-apply sets HF_HUB_OFFLINE=1 on every engine: it downloads models on this host and the engine never "
    "reaches a hub; remove it (to use another hub, set HF_ENDPOINT in aigo-apply's own environment)"
)
_GPUS = "the GPUs of a container come from the model's `gpus:` (the GPU plan counts on it); use gpus: and remove it"
_PYTHON_ALLOWED = frozenset(
    {
        "PYTHONUNBUFFERED",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONIOENCODING",
        "PYTHONUTF8",
        "PYTHONHASHSEED",
        "PYTHONFAULTHANDLER",
    }
)
_EXACT = {
    "GLIBC_TUNABLES": f"the dynamic linker reads it in every program of the container; {REMOVE}",
    "PATH": f"it decides which program the container runs (the engine's command is found through it); {REMOVE}",
    "BASH_ENV": f"a shell started in the container runs the file it names; {REMOVE}",
    "ENV": f"a shell started in the container runs the file it names; {REMOVE}",
    "SHELLOPTS": f"it sets the options of every bash in the container (with PS4 it runs commands); {REMOVE}",
    "BASHOPTS": f"it sets the options of every bash in the container; {REMOVE}",
    "PS4": f"bash expands it (running any command in it) when tracing; {REMOVE}",
    "VLLM_PLUGINS": f"it chooses which plugins vLLM loads into the engine; {REMOVE}",
    "VLLM_ALLOW_INSECURE_SERIALIZATION": "it lets vLLM unpickle data between its processes, which runs code; remove it",
    "VLLM_ALLOW_RUNTIME_LORA_UPDATING": (
        "it lets any client load or unload LoRA adapters from any path or repo at run time; remove it "
        "(adapters are not served by aigo-apply)"
    ),
    "VLLM_SERVER_DEV_MODE": (
        "it opens vLLM's development endpoints (control of the engine) to every client of the router; remove it"
    ),
    "VLLM_USE_MODELSCOPE": _OFFLINE,
    "HF_HUB_OFFLINE": _OFFLINE,
    "TRANSFORMERS_OFFLINE": _OFFLINE,
    "HF_ENDPOINT": _OFFLINE,
    "CUDA_VISIBLE_DEVICES": _GPUS,
    "SSL_CERT_FILE": f"it chooses whom the engine trusts on its outbound connections; {REMOVE}",
    "SSL_CERT_DIR": f"it chooses whom the engine trusts on its outbound connections; {REMOVE}",
    "REQUESTS_CA_BUNDLE": f"it chooses whom the engine trusts on its outbound connections; {REMOVE}",
    "CURL_CA_BUNDLE": f"it chooses whom the engine trusts on its outbound connections; {REMOVE}",
}
_LOADS = f"it names code or a program the container loads or runs at start-up; {REMOVE}"
_CACHE = (
    "the engine loads compiled code from this cache; the project's cache volume (/root/.cache) is where it "
    "belongs: remove it"
)
_EXACT.update(
    dict.fromkeys(
        (
            "GCONV_PATH",
            "HOME",
            "CC",
            "CXX",
            "NODE_OPTIONS",
            "JAVA_TOOL_OPTIONS",
            "_JAVA_OPTIONS",
            "PERL5OPT",
            "PERL5LIB",
            "PERLLIB",
            "RUBYOPT",
            "RUBYLIB",
            "VLLM_LOGGING_CONFIG_PATH",
            "VLLM_TEST_FORCE_LOAD_FORMAT",
            "VLLM_CUDA_COMPATIBILITY_PATH",
            "VLLM_RUST_FRONTEND_PATH",
        ),
        _LOADS,
    )
)
_EXACT.update(
    dict.fromkeys(("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TORCH_EXTENSIONS_DIR", "VLLM_CACHE_ROOT"), _CACHE)
)
# Anywhere in a name: a library, module or program chosen by name or path.
_LOADER_WORDS = re.compile(
    r"PLUGIN|INJECTION|_SO_PATH\Z|(?:\A|_)LIB[A-Z0-9_]*PATH\Z|INCLUDE_PATH\Z|\ACPATH\Z|\ATRITON_[A-Z0-9_]*PATH\Z"
)
# Names under a refused prefix that the libraries in the container read, not the container runtime
# (cuBLAS and cuDNN read NVIDIA_TF32_OVERRIDE).
_LIBRARY_SWITCHES = frozenset({"NVIDIA_TF32_OVERRIDE"})
_PREFIXES = (
    (
        "LD_",
        f"the dynamic linker reads LD_* names to load or find libraries in every program of the container; {REMOVE}",
    ),
    (
        "NVIDIA_",
        "the NVIDIA runtime on this host reads it to choose the GPUs and driver parts a container gets; " + _GPUS,
    ),
    (
        "LLAMA_ARG_",
        "llama-server reads LLAMA_ARG_* names as command-line flags, and aigo-apply passes no free-form flags; "
        "use the model's llama.cpp: settings, or remove it",
    ),
)


def refused_name(name: str) -> str | None:
    """Why an engine container must not get the environment variable `name` from aigo.yaml, or None."""
    if name in _EXACT:
        return _EXACT[name]
    for prefix, why in _PREFIXES:
        if name.startswith(prefix) and name not in _LIBRARY_SWITCHES:
            return why
    if _LOADER_WORDS.search(name.upper()):
        return _LOADS
    if name.startswith("PYTHON") and name not in _PYTHON_ALLOWED:
        return (
            "Python reads PYTHON* names at start-up, and several load or run code; the engine's image decides "
            f"this: remove it (only {', '.join(sorted(_PYTHON_ALLOWED))} are accepted)"
        )
    if name.lower().endswith("_proxy"):
        return (
            "it would send the engine's outbound connections through a proxy (any spelling is read); engines run "
            "offline and take no network settings from aigo.yaml: remove it"
        )
    return None
