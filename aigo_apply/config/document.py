"""The shape of an aigo.yaml document once schemas/aigo.schema.json has accepted it, as the type
checker sees it: one TypedDict per mapping of the schema, a Literal per closed set of names.

These describe data AFTER validation (`Config.data`, config/load.py). The cross-field rules
(config/rules.py and the *_rules modules) run on data that may have failed the schema, so they read
it as JSON (aigo_apply/json_types.py) or as a read-only Mapping[str, object], and narrow what they use.
Keys the schema names as optional are optional here (total=False); keys that are not identifiers
("llama.cpp", "safetensors-repo") use the functional syntax.
"""

from __future__ import annotations

from typing import Literal, NotRequired, Required, TypedDict, TypeGuard

from aigo_apply.config.vllm_flags import VllmSettings
from aigo_apply.json_types import JsonValue

Engine = Literal["vllm", "sglang", "llama.cpp"]
Platform = Literal["docker", "kubernetes"]
UpdateMode = Literal["auto", "parallel", "recreate", "sleep"]
WeightsFormat = Literal["safetensors-repo", "gguf"]
GpusChoice = Literal["all", "none"]
Gpus = GpusChoice | list[int]  # "all", "none" or distinct indices 0-63


class SecretRef(TypedDict, total=False):
    """A secret by reference only: exactly one of the two keys."""

    from_env: str
    from_file: str


EnvValue = str | int | float | bool | SecretRef


class ModelSource(TypedDict, total=False):
    """Where weights come from: `repo` (with `revision`, `file`) or `path`, never both."""

    repo: str
    revision: str
    path: str
    file: str


class Logs(TypedDict, total=False):
    max_size: str
    max_files: int


class Canary(TypedDict, total=False):
    max_slowdown: float
    requests: int
    concurrency: int
    prompt_tokens: int
    max_tokens: int
    compare_output: bool
    seed: int


class SglangSettings(TypedDict, total=False):
    tensor_parallel_size: int
    gpu_memory_utilization: float
    trust_remote_code: bool


class LlamaCppSettings(TypedDict, total=False):
    gpu_layers: Literal["all"] | int
    tensor_parallel_size: int


class Adapter(TypedDict):
    """One LoRA adapter: its source ({repo, revision} or {path}, no `file`)."""

    source: ModelSource


class ModelKubernetes(TypedDict, total=False):
    node_selector: dict[str, str]
    storage_gib: int


ModelEntry = TypedDict(
    "ModelEntry",
    {
        "source": Required[ModelSource],
        "context_length": Required[int | str],
        "engine": Engine,
        "enabled": bool,
        "on_demand": bool,
        "swap_group": str,
        "max_awake": int,
        "gpus": Gpus,
        "port": int,
        "vllm": VllmSettings,
        "adapters": dict[str, Adapter],
        "sglang": SglangSettings,
        "llama.cpp": LlamaCppSettings,
        "env": dict[str, EnvValue],
        "ready_timeout": int,
        "update": UpdateMode,
        "canary": Canary | Literal[False],
        "logs": Logs,
        "kubernetes": ModelKubernetes,
    },
    total=False,
)
"""One model under `models:`, keyed by its alias ("llama.cpp" is not an identifier, hence this syntax)."""

EngineByFormat = TypedDict("EngineByFormat", {"safetensors-repo": Engine, "gguf": Engine}, total=False)
"""The engine per weights format; which engines read which format is the schema's (and each engine
kind's record), not repeated here."""


class Defaults(TypedDict, total=False):
    """Values every model inherits unless it sets its own."""

    gpu_memory_utilization: float
    models_dir: str
    ready_timeout: int
    update: UpdateMode
    canary: Canary | Literal[False]
    logs: Logs
    engine_by_format: EngineByFormat


class Router(TypedDict, total=False):
    port: int
    bind: str
    api_keys: SecretRef
    image: str
    image_tag: str
    max_body_mb: int
    timeout: int
    hold_seconds: int
    stall_seconds: int
    logs: Logs
    metrics_without_key: bool


class EngineImage(TypedDict, total=False):
    """An engine's image: repository without tag, and tag."""

    image: str
    image_tag: str


Engines = dict[str, EngineImage]  # engine name -> its image (the schema allows the engines' names only)


class Toleration(TypedDict, total=False):
    key: str
    operator: Literal["Equal", "Exists"]
    value: str
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Storage(TypedDict, total=False):
    storage_class: str
    size_gib: int
    node_local: bool


class Kubernetes(TypedDict, total=False):
    """The `kubernetes:` section (platform: kubernetes, and `render --as kubernetes`)."""

    context: str
    namespace: str
    gpu_resource: str
    gpus_per_node: int
    runtime_class_name: str
    node_selector: dict[str, str]
    tolerations: list[Toleration]
    storage: Storage
    cluster_domain: str
    download_image: str


class Document(TypedDict):
    """A whole aigo.yaml that passed the schema (`Config.data`)."""

    version: Literal[1]
    project: str
    models: dict[str, ModelEntry]
    platform: NotRequired[Platform]
    defaults: NotRequired[Defaults]
    router: NotRequired[Router]
    engines: NotRequired[Engines]
    kubernetes: NotRequired[Kubernetes]


def is_document(data: JsonValue) -> TypeGuard[Document]:
    """Whether `data` has a document's top level: a mapping with `version: 1`, a `project` name, a
    `models` mapping of mappings, and mappings (or nothing) for the optional sections. Asked of data
    the schema has accepted (config/load.py), whose nested shape is the schema's word."""
    if not isinstance(data, dict):
        return False
    models = data.get("models")
    return (
        data.get("version") == 1
        and isinstance(data.get("project"), str)
        and isinstance(models, dict)
        and all(isinstance(model, dict) for model in models.values())
        and data.get("platform", "docker") in ("docker", "kubernetes")
        and all(isinstance(data.get(key, {}), dict) for key in ("defaults", "router", "engines", "kubernetes"))
    )
