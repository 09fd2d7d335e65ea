"""The `vllm serve` command lines aigo-apply renders, checked by the real vLLM 0.31.0: its own parser
and the checks it runs before loading weights (scripts/vllm_contract.py says which). Every golden
vLLM command line must be accepted; each kind of value the schema refuses must be refused by vLLM
too, unless the table below says we are stricter on purpose (and then vLLM must still accept it, so
the README's list of where we are stricter stays true). One vLLM start checks every line here."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml

from aigo_apply.config.engine_choice import engine_of
from aigo_apply.desired.build import build_desired
from aigo_apply.errors import ConfigInvalid
from aigo_apply.observe.config_file import load_config

from helpers.configs import host_context
from helpers.paths import EXAMPLES, GOLDEN, ROOT

HERE = Path(__file__).parent
EVERY_SETTING = HERE / "every-vllm-setting.yaml"  # not an example: each `vllm:` setting, draft and MTP


def config_of(golden: Path) -> Path:
    """The config a golden file was rendered from: an example, or a config kept beside these tests."""
    example = EXAMPLES / f"{golden.stem}.yaml"
    return example if example.exists() else HERE / f"{golden.stem}.yaml"


def golden_cases() -> list:
    """One case per model of every golden file; models other engines serve are skipped, by name."""
    cases = []
    for golden in sorted(GOLDEN.glob("*.json")):
        data = yaml.safe_load(config_of(golden).read_text())
        for alias, container in json.loads(golden.read_text()).items():
            if alias == "(router)":
                continue
            engine = engine_of(data["models"][alias], data.get("defaults"))
            marks = [] if engine == "vllm" else [pytest.mark.skip(reason=f"{engine}: this contract is vLLM's only")]
            cases.append(pytest.param(container["command"], id=f"{golden.stem}:{alias}", marks=marks))
    return cases


class Refusal(NamedTuple):
    """A kind of value the schema refuses: as written in aigo.yaml, and as the flag it would become."""

    case: str
    yaml: dict[str, str]  # model-level key -> YAML text; `vllm.KEY` for a key under vllm:
    flags: dict[str, str]  # flag -> value, replacing the base command line's or added to it
    stricter: str | None = None  # why we refuse what vLLM 0.31.0 accepts; None: vLLM refuses it too


SPEC = "--speculative-config"
REFUSALS = [
    Refusal(
        "unknown tool-call parser",
        {"vllm.tool_call_parser": "nemotron_tools"},
        {"--tool-call-parser": "nemotron_tools"},
    ),
    Refusal("unknown reasoning parser", {"vllm.reasoning_parser": "nano_v3"}, {"--reasoning-parser": "nano_v3"}),
    Refusal("unknown MoE backend", {"vllm.moe_backend": "flashinfer"}, {"--moe-backend": "flashinfer"}),
    Refusal("unknown Mamba backend", {"vllm.mamba_backend": "cuda"}, {"--mamba-backend": "cuda"}),
    Refusal("unknown quantization", {"vllm.quantization": "nvfp4"}, {"--quantization": "nvfp4"}),
    Refusal("unknown KV-cache dtype", {"vllm.kv_cache_dtype": "int8"}, {"--kv-cache-dtype": "int8"}),
    Refusal("unknown dtype", {"vllm.dtype": "fp16"}, {"--dtype": "fp16"}),
    Refusal("unknown speculative method", {"vllm.speculative": "{method: eagle4}"}, {SPEC: '{"method":"eagle4"}'}),
    Refusal(
        "MoE backend in another spelling",
        {"vllm.moe_backend": "FlashInfer-CUTLASS"},
        {"--moe-backend": "FlashInfer-CUTLASS"},
        "vLLM folds case and '-' for --moe-backend; aigo-apply takes the one spelling vLLM lists, so a "
        "respelling never changes the spec hash (and recreates the container) when the meaning is the same",
    ),
    Refusal(
        "Mamba backend in capitals",
        {"vllm.mamba_backend": "TRITON"},
        {"--mamba-backend": "TRITON"},
        "vLLM matches --mamba-backend case-insensitively; same reason as above",
    ),
    Refusal("zero GPUs for tensor parallel", {"vllm.tensor_parallel_size": "0"}, {"--tensor-parallel-size": "0"}),
    Refusal("negative tensor parallel", {"vllm.tensor_parallel_size": "-2"}, {"--tensor-parallel-size": "-2"}),
    Refusal("fractional tensor parallel", {"vllm.tensor_parallel_size": "1.5"}, {"--tensor-parallel-size": "1.5"}),
    Refusal(
        "tensor parallel over 64",
        {"vllm.tensor_parallel_size": "65"},
        {"--tensor-parallel-size": "65"},
        "vLLM has no upper bound; a machine aigo-apply drives has at most a few GPUs, and the GPU ledger "
        "must be able to place the model on the listed GPUs",
    ),
    Refusal("zero sequences", {"vllm.max_num_seqs": "0"}, {"--max-num-seqs": "0"}),
    Refusal(
        "sequences over 65536",
        {"vllm.max_num_seqs": "65537"},
        {"--max-num-seqs": "65537"},
        "vLLM has no upper bound; 65536 concurrent sequences is far beyond one host, so a larger value is a typo",
    ),
    Refusal("zero memory fraction", {"vllm.gpu_memory_utilization": "0"}, {"--gpu-memory-utilization": "0"}),
    Refusal("negative memory fraction", {"vllm.gpu_memory_utilization": "-0.5"}, {"--gpu-memory-utilization": "-0.5"}),
    Refusal("memory fraction over one", {"vllm.gpu_memory_utilization": "1.5"}, {"--gpu-memory-utilization": "1.5"}),
    Refusal("NaN memory fraction", {"vllm.gpu_memory_utilization": ".nan"}, {"--gpu-memory-utilization": "nan"}),
    Refusal("infinite memory fraction", {"vllm.gpu_memory_utilization": ".inf"}, {"--gpu-memory-utilization": "inf"}),
    Refusal(
        "zero speculative tokens",
        {"vllm.speculative": "{method: mtp, num_speculative_tokens: 0}"},
        {SPEC: '{"method":"mtp","num_speculative_tokens":0}'},
    ),
    Refusal(
        "speculative tokens over 64",
        {"vllm.speculative": "{method: mtp, num_speculative_tokens: 65}"},
        {SPEC: '{"method":"mtp","num_speculative_tokens":65}'},
        "vLLM has no upper bound; drafts that long are never accepted, so the value is a typo",
    ),
    Refusal(
        "optimization level over 3",
        {"vllm.compilation": "{optimization_level: 4}"},
        {"--optimization-level": "4"},
    ),
    Refusal(
        "negative optimization level",
        {"vllm.compilation": "{optimization_level: -1}"},
        {"--optimization-level": "-1"},
    ),
    Refusal("unknown load format", {"vllm.load_format": "fast"}, {"--load-format": "fast"}),
    Refusal(
        "load format that needs a loader config",
        {"vllm.load_format": "tensorizer"},
        {"--load-format": "tensorizer"},
    ),
    Refusal(
        "load format in another spelling",
        {"vllm.load_format": "FastSafetensors"},
        {"--load-format": "FastSafetensors"},
        "vLLM lower-cases --load-format; aigo-apply takes the one spelling vLLM lists, as for --moe-backend",
    ),
    Refusal(
        "capture size zero",
        {"vllm.compilation": "{cudagraph_capture_sizes: [0]}"},
        {"--cudagraph-capture-sizes": "0"},
        "vLLM's checks before it reads the model take a size of 0; a batch holds at least one sequence",
    ),
    Refusal(
        "largest capture size zero",
        {"vllm.compilation": "{max_cudagraph_capture_size: 0}"},
        {"--max-cudagraph-capture-size": "0"},
        "vLLM asserts at least 1 only when it builds its engine config, after the container has started",
    ),
    Refusal(
        "capture size over 65536",
        {"vllm.compilation": "{cudagraph_capture_sizes: [65537]}"},
        {"--cudagraph-capture-sizes": "65537"},
        "vLLM has no upper bound; it drops sizes above max_num_batched_tokens, so a larger one is a typo",
    ),
    Refusal("negative context length", {"context_length": "-5"}, {"--max-model-len": "-5"}),
    Refusal("context length garbage", {"context_length": "32q"}, {"--max-model-len": "32q"}),
    Refusal(
        "context length auto",
        {"context_length": "auto"},
        {"--max-model-len": "auto"},
        "vLLM then picks the length from free GPU memory at start-up; the router, the fit check and the "
        "GPU ledger need the number before anything starts",
    ),
]

BASE_MODEL = {"source": "{repo: Qwen/Qwen3-8B}", "context_length": "8192", "gpus": "[0]"}


def config_text(refusal: Refusal | None) -> str:
    """A one-model aigo.yaml, with the refusal's values written in (YAML text, as a user would)."""
    edits = refusal.yaml if refusal else {}
    model = {**BASE_MODEL, **{k: v for k, v in edits.items() if not k.startswith("vllm.")}}
    vllm = {k[len("vllm.") :]: v for k, v in edits.items() if k.startswith("vllm.")}
    lines = ["version: 1", "project: contract", "models:", "  m:"]
    lines += [f"    {key}: {value}" for key, value in model.items()]
    if vllm:
        lines += ["    vllm:"] + [f"      {key}: {value}" for key, value in vllm.items()]
    return "\n".join(lines) + "\n"


def definitions(config: Path) -> dict[str, dict]:
    """alias -> the container definition aigo-apply renders for a config (as in the golden files)."""
    os.environ["AIGO_STATE_DIR"] = "/state"
    try:
        desired = build_desired(load_config(str(config)), host_context(Path("/store")))
    finally:
        del os.environ["AIGO_STATE_DIR"]
    return {alias: json.loads(json.dumps(m.container.definition())) for alias, m in desired.models.items()}


def rendered(config: Path) -> dict[str, list[str]]:
    """alias -> the `vllm serve` arguments aigo-apply renders for a config."""
    return {alias: d["command"] for alias, d in definitions(config).items()}


def with_flags(base: list[str], flags: dict[str, str]) -> list[str]:
    """The base command line with each flag's value replaced, or the flag added at its end."""
    argv = list(base)
    for flag, value in flags.items():
        if flag in argv:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value]
    return argv


@pytest.fixture(scope="module")
def base_command(tmp_path_factory) -> list[str]:
    """What aigo-apply renders for the refusals' base config (which is valid)."""
    path = tmp_path_factory.mktemp("base") / "aigo.yaml"
    path.write_text(config_text(None))
    return rendered(path)["m"]


@pytest.fixture(scope="module")
def verdicts(vllm_verdicts, base_command) -> dict[str, dict]:
    """vLLM's verdict on every command line of this module, from one vLLM start, by case id."""
    lines = {p.id: p.values[0] for p in golden_cases() if not p.marks}
    lines["(refusal base)"] = base_command
    lines |= {r.case: with_flags(base_command, r.flags) for r in REFUSALS}
    lines |= {f"(lora) {case}": argv for case, argv in lora_lines(base_command).items()}
    return dict(zip(lines, vllm_verdicts(list(lines.values())), strict=True))


@pytest.mark.parametrize("command", golden_cases())
def test_vllm_accepts_every_golden_command_line(request, command, verdicts):
    verdict = verdicts[request.node.callspec.id]
    assert verdict["accepted"], f"vLLM 0.31.0 refuses {command}: {verdict['stage']}: {verdict['error']}"


def test_vllm_accepts_the_refusals_base(verdicts):
    assert verdicts["(refusal base)"]["accepted"], verdicts["(refusal base)"]


@pytest.mark.parametrize("refusal", REFUSALS, ids=[r.case for r in REFUSALS])
def test_schema_refusal_is_vllms_or_documented_as_stricter(refusal, verdicts, tmp_path):
    path = tmp_path / "aigo.yaml"
    path.write_text(config_text(refusal))
    with pytest.raises(ConfigInvalid):
        load_config(str(path))
    verdict = verdicts[refusal.case]
    if refusal.stricter is None:
        assert not verdict["accepted"], f"vLLM 0.31.0 accepts {refusal.flags}; we refuse it without saying why"
    else:
        assert verdict["accepted"], f"vLLM 0.31.0 refuses {refusal.flags} too: {verdict['error']}"


def lora_lines(base: list[str]) -> dict[str, list[str]]:
    """The adapter flags as aigo-apply renders them, and the forms it must not write: a repeated
    --lora-modules (vLLM keeps the last one only) and values vLLM refuses."""
    lora = rendered(EVERY_SETTING)["lora"]
    at = lora.index("--enable-lora")
    flags = lora[at : lora.index("--uds")]
    return {
        "rendered": lora,
        "one adapter, rank and loras by default": base[:-2] + ["--enable-lora", "--lora-modules", "a=/adapters/a"],
        "repeated --lora-modules": base[:-2] + ["--enable-lora", "--lora-modules", "a=/a", "--lora-modules", "b=/b"],
        "rank not a choice": base[:-2] + flags[:-1] + ["24"],
        "zero loras": base[:-2] + [*flags[:-3], "0", *flags[-2:]],
    }


def test_vllm_parses_every_adapter_of_the_rendered_line(verdicts):
    """All adapters under one --lora-modules reach vLLM, each NAME=/adapters/NAME, with the room set."""
    verdict = verdicts["(lora) rendered"]
    assert verdict["accepted"], verdict
    assert verdict["lora_modules"] == [["local.v2", "/adapters/local.v2"], ["sql-helper", "/adapters/sql-helper"]]
    assert verdicts["(lora) one adapter, rank and loras by default"]["lora_modules"] == [["a", "/adapters/a"]]


def test_the_adapter_forms_aigo_apply_never_writes_lose_adapters_or_are_refused(verdicts):
    # vLLM's LoRAParserAction replaces the list at each --lora-modules: only the last adapter survives
    assert verdicts["(lora) repeated --lora-modules"]["lora_modules"] == [["b", "/b"]]
    rank = verdicts["(lora) rank not a choice"]
    assert not rank["accepted"] and rank["stage"] == "parse" and "--max-lora-rank" in rank["error"]
    zero = verdicts["(lora) zero loras"]
    assert not zero["accepted"] and zero["stage"] == "config" and "max_loras" in zero["error"]


def test_every_setting_config_renders_its_golden():
    """Command lines and mounts (the draft model's included) as pinned in tests/golden/every-vllm-setting.json."""
    golden = json.loads((GOLDEN / "every-vllm-setting.json").read_text().replace("<checkout>", str(ROOT)))
    for alias, actual in definitions(EVERY_SETTING).items():
        assert (actual["command"], actual["mounts"]) == (golden[alias]["command"], golden[alias]["mounts"]), alias


def test_every_setting_config_sets_every_vllm_setting():
    """Each `vllm:` property of the schema is set, booleans both ways, speculative with a draft and with MTP."""
    schema = json.loads((ROOT / "schemas" / "aigo.schema.json").read_text())["$defs"]["vllmSettings"]["properties"]
    models = yaml.safe_load(EVERY_SETTING.read_text())["models"].values()
    used = [m["vllm"] for m in models]
    assert set(schema) == set().union(*used)
    for key, prop in schema.items():
        if prop.get("type") == "boolean":
            assert {True, False} <= {u[key] for u in used if key in u}, key
    speculative = [u["speculative"] for u in used if "speculative" in u]
    assert set(schema["speculative"]["properties"]) == set().union(*speculative)
    assert {"draft_model", "mtp"} <= {s["method"] for s in speculative}
    compilation = [u["compilation"] for u in used if "compilation" in u]
    assert set(schema["compilation"]["properties"]) == set().union(*compilation)


def test_vllm_reads_every_start_setting_as_written(verdicts):
    """What the parser stored for each start flag of every-vllm-setting.yaml: the level and the sizes
    as numbers, the load format as its name."""
    parsed = {alias: verdicts[f"every-vllm-setting:{alias}"]["parsed"] for alias in ("drafted", "mtp", "plain", "lora")}
    assert parsed["mtp"]["--optimization-level"] == "1"  # a string here; VllmConfig takes it as OptimizationLevel 1
    assert parsed["mtp"]["--cudagraph-capture-sizes"] == [1, 2, 4, 8]
    assert parsed["mtp"]["--max-cudagraph-capture-size"] == 8
    assert parsed["plain"]["--optimization-level"] == "0" and parsed["plain"]["--load-format"] == "runai_streamer"
    assert parsed["drafted"]["--load-format"] == "fastsafetensors"
    assert parsed["lora"]["--max-cudagraph-capture-size"] == 32
