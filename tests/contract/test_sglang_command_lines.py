"""The `python3 -m sglang.launch_server` command lines aigo-apply renders, checked by SGLang 0.5.6's own
server-argument code: its parser, ServerArgs.__post_init__ and check_server_args (scripts/sglang_contract.py
says how, and which steps need the NVIDIA driver and so are deferred here). Every SGLang model of every
example and of every-sglang-setting.yaml must be accepted; each kind of value the schema refuses must be
refused by SGLang too, unless the table below says we are stricter on purpose (and then SGLang must still
accept it, so the README's list of where we are stricter stays true). One SGLang start checks every line."""

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
EVERY_SETTING = HERE / "every-sglang-setting.yaml"  # not an example: each `sglang:` setting
ENTRYPOINT = ["python3", "-m", "sglang.launch_server"]  # the module whose parser scripts/sglang_contract.py runs
# The steps of SGLang 0.5.6 that import sgl_kernel, whose import needs the NVIDIA driver: deferred here.
DEFERRED_STEPS = {"_handle_model_specific_adjustments", "_handle_attention_backend_compatibility", "check_server_args"}


def definitions(config: Path) -> dict[str, dict]:
    """alias -> the container definition aigo-apply renders for a config (as in the golden files)."""
    os.environ["AIGO_STATE_DIR"] = "/state"
    try:
        desired = build_desired(load_config(str(config)), host_context(Path("/store")))
    finally:
        del os.environ["AIGO_STATE_DIR"]
    return {alias: json.loads(json.dumps(m.container.definition())) for alias, m in desired.models.items()}


def accepted_cases() -> dict[str, dict]:
    """case id -> container definition, for each SGLang model of every golden file and of EVERY_SETTING."""
    cases = {}
    for golden in sorted(GOLDEN.glob("*.json")):
        example = EXAMPLES / f"{golden.stem}.yaml"
        if not example.exists():  # a golden file of a config kept beside the tests (every-vllm-setting)
            continue
        data = yaml.safe_load(example.read_text())
        for alias, container in json.loads(golden.read_text()).items():
            if alias != "(router)" and engine_of(data["models"][alias], data.get("defaults")) == "sglang":
                cases[f"{golden.stem}:{alias}"] = container
    cases |= {f"every-sglang-setting:{alias}": d for alias, d in definitions(EVERY_SETTING).items()}
    return cases


CASES = accepted_cases()


class Refusal(NamedTuple):
    """A kind of value the schema refuses: as written in aigo.yaml, and as the flags it would become."""

    case: str
    yaml: dict[str, str]  # model-level key -> YAML text; `sglang.KEY` for a key under sglang:; `alias` renames it
    flags: dict[str, str]  # flag -> value, replacing the base command line's or added to it
    stricter: str | None = None  # why we refuse what SGLang 0.5.6 accepts; None: SGLang refuses it too


TP, FRACTION, CONTEXT = "--tp-size", "--mem-fraction-static", "--context-length"
UNCHECKED = "SGLang 0.5.6 takes any {kind} for {flag} and checks none before it loads the model; "
TP_WHY = UNCHECKED.format(kind="int", flag=TP) + "the GPU ledger needs a GPU count it can place on the listed GPUs"
FRACTION_WHY = UNCHECKED.format(kind="float", flag=FRACTION) + "the GPU ledger adds up fractions of one GPU"


def named(alias: str) -> dict[str, str]:
    """The flags that carry the alias: --served-model-name, and the folder the model is mounted at."""
    return {"--model-path": f"/models/{alias}", "--served-model-name": alias}


REFUSALS = [
    Refusal("zero GPUs for tensor parallel", {"sglang.tensor_parallel_size": "0"}, {TP: "0"}, TP_WHY),
    Refusal("negative tensor parallel", {"sglang.tensor_parallel_size": "-2"}, {TP: "-2"}, TP_WHY),
    Refusal("fractional tensor parallel", {"sglang.tensor_parallel_size": "1.5"}, {TP: "1.5"}),
    Refusal(
        "tensor parallel over 64",
        {"sglang.tensor_parallel_size": "65"},
        {TP: "65"},
        "SGLang has no upper bound; a machine aigo-apply drives has at most a few GPUs, and the GPU ledger "
        "must be able to place the model on the listed GPUs",
    ),
    Refusal("zero memory fraction", {"sglang.gpu_memory_utilization": "0"}, {FRACTION: "0"}, FRACTION_WHY),
    Refusal("negative memory fraction", {"sglang.gpu_memory_utilization": "-0.5"}, {FRACTION: "-0.5"}, FRACTION_WHY),
    Refusal("memory fraction over one", {"sglang.gpu_memory_utilization": "1.5"}, {FRACTION: "1.5"}, FRACTION_WHY),
    Refusal("NaN memory fraction", {"sglang.gpu_memory_utilization": ".nan"}, {FRACTION: "nan"}, FRACTION_WHY),
    Refusal("infinite memory fraction", {"sglang.gpu_memory_utilization": ".inf"}, {FRACTION: "inf"}, FRACTION_WHY),
    Refusal("memory fraction as words", {"sglang.gpu_memory_utilization": "most"}, {FRACTION: "most"}),
    Refusal(
        "negative context length",
        {"context_length": "-5"},
        {CONTEXT: "-5"},
        UNCHECKED.format(kind="int", flag=CONTEXT) + "a context length is a positive number of tokens, and "
        "the router and the fit check use it before anything starts",
    ),
    Refusal("context length garbage", {"context_length": "32q"}, {CONTEXT: "32q"}),
    Refusal("context length auto", {"context_length": "auto"}, {CONTEXT: "auto"}),
    Refusal("alias with a colon", {"alias": "chat:v2"}, named("chat:v2")),
    Refusal("alias starting with a dash", {"alias": "-chat"}, named("-chat")),
    Refusal(
        "alias with a space",
        {"alias": "'my chat'"},
        named("my chat"),
        "SGLang takes any served model name without a colon; the alias also names the container and the "
        "router's backend, which allow letters, digits, '.', '_' and '-' only",
    ),
    Refusal(
        "alias over 64 characters",
        {"alias": "a" * 65},
        named("a" * 65),
        "SGLang has no length limit; the alias also names the container, its volume and the router's backend",
    ),
]
# Not here: trust_remote_code is a flag without a value (a non-boolean has no command line to show SGLang),
# and an unknown `sglang:` key is never rendered into a flag.

BASE_MODEL = {"engine": "sglang", "source": "{repo: Qwen/Qwen3-8B}", "context_length": "8192", "gpus": "[0]"}


def config_text(refusal: Refusal | None) -> str:
    """A one-model aigo.yaml, with the refusal's values written in (YAML text, as a user would)."""
    edits = dict(refusal.yaml) if refusal else {}
    alias = edits.pop("alias", "m")
    model = {**BASE_MODEL, **{k: v for k, v in edits.items() if not k.startswith("sglang.")}}
    sglang = {k[len("sglang.") :]: v for k, v in edits.items() if k.startswith("sglang.")}
    lines = ["version: 1", "project: contract", "engines:", "  sglang: {image_tag: v0.5.6-cu129}", "models:"]
    lines += [f"  {alias}:"] + [f"    {key}: {value}" for key, value in model.items()]
    if sglang:
        lines += ["    sglang:"] + [f"      {key}: {value}" for key, value in sglang.items()]
    return "\n".join(lines) + "\n"


def with_flags(base: list[str], flags: dict[str, str]) -> list[str]:
    """The base command line with each flag's value replaced, or the flag added before --host."""
    argv = list(base)
    for flag, value in flags.items():
        if flag in argv:
            argv[argv.index(flag) + 1] = value
        else:
            at = argv.index("--host")
            argv[at:at] = [flag, value]
    return argv


@pytest.fixture(scope="module")
def base_command(tmp_path_factory) -> list[str]:
    """What aigo-apply renders for the refusals' base config (which is valid)."""
    path = tmp_path_factory.mktemp("base") / "aigo.yaml"
    path.write_text(config_text(None))
    return definitions(path)["m"]["command"]


@pytest.fixture(scope="module")
def verdicts(sglang_verdicts, base_command) -> dict[str, dict]:
    """SGLang's verdict on every command line of this module, from one SGLang start, by case id."""
    lines = {case: d["command"] for case, d in CASES.items()}
    lines["(refusal base)"] = base_command
    lines |= {r.case: with_flags(base_command, r.flags) for r in REFUSALS}
    return dict(zip(lines, sglang_verdicts(list(lines.values())), strict=True))


def test_the_examples_and_the_every_setting_config_have_sglang_models():
    assert any(case.startswith("three-engines:") for case in CASES), sorted(CASES)
    assert len([c for c in CASES if c.startswith("every-sglang-setting:")]) == 3


@pytest.mark.parametrize("case", sorted(CASES))
def test_sglang_accepts_every_rendered_command_line(case, verdicts):
    verdict = verdicts[case]
    assert CASES[case]["entrypoint"] == ENTRYPOINT
    assert verdict["accepted"], f"SGLang 0.5.6 refuses {CASES[case]['command']}: {verdict['stage']}: {verdict['error']}"
    deferred = {entry.split(":")[0] for entry in verdict["deferred"]}
    assert deferred <= DEFERRED_STEPS, f"more steps than the README names are not run: {verdict['deferred']}"


def test_sglang_accepts_the_refusals_base(verdicts):
    assert verdicts["(refusal base)"]["accepted"], verdicts["(refusal base)"]


@pytest.mark.parametrize("refusal", REFUSALS, ids=[r.case for r in REFUSALS])
def test_schema_refusal_is_sglangs_or_documented_as_stricter(refusal, verdicts, tmp_path):
    path = tmp_path / "aigo.yaml"
    path.write_text(config_text(refusal))
    with pytest.raises(ConfigInvalid):
        load_config(str(path))
    verdict = verdicts[refusal.case]
    if refusal.stricter is None:
        assert not verdict["accepted"], f"SGLang 0.5.6 accepts {refusal.flags}; we refuse it without saying why"
    else:
        assert verdict["accepted"], f"SGLang 0.5.6 refuses {refusal.flags} too: {verdict['error']}"


def test_every_setting_config_sets_every_sglang_setting():
    """Each `sglang:` property of the schema is set, booleans both ways."""
    schema = json.loads((ROOT / "schemas" / "aigo.schema.json").read_text())
    properties = schema["$defs"]["sglangSettings"]["properties"]
    used = [m.get("sglang", {}) for m in yaml.safe_load(EVERY_SETTING.read_text())["models"].values()]
    assert set(properties) == set().union(*used)
    for key, prop in properties.items():
        if prop.get("type") == "boolean":
            assert {True, False} <= {u[key] for u in used if key in u}, key


def test_the_adapter_refusals_premise_holds_in_sglang(sglang_verdicts, base_command):
    """Why `adapters:` on an SGLang model is refused (config/adapter_rules.py): SGLang 0.5.6's parser
    takes the flags, but its OpenAI API picks an adapter only from a `model` of the form BASE:NAME, so
    a request naming the adapter's alias alone (what the router forwards) would get the base."""
    import ast

    from aigo_apply.config.adapter_rules import ENGINE_REASONS

    (verdict,) = sglang_verdicts([base_command + ["--enable-lora", "--lora-paths", "sql=/adapters/sql"]])
    assert verdict["accepted"], verdict
    source = next(
        (ROOT / ".venv-sglang" / "lib").glob("python3*/site-packages/sglang/srt/entrypoints/openai/serving_base.py")
    )
    tree = ast.parse(source.read_text())
    (function,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_parse_model_parameter"]
    function.returns = None  # its annotations name typing's names: not needed to run it
    for arg in function.args.args:
        arg.annotation = None
    namespace: dict = {}
    exec(compile(ast.fix_missing_locations(ast.Module([function], [])), str(source), "exec"), {}, namespace)
    parse = namespace["_parse_model_parameter"]
    assert parse(None, "sql") == ("sql", None)  # the alias alone names no adapter
    assert parse(None, "base:sql") == ("base", "sql")
    assert "'BASE:NAME' (serving_base._parse_model_parameter)" in ENGINE_REASONS["sglang"]
