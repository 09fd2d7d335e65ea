"""`aigo-apply add SOURCE` on model folders the tests make (one per tool-call shape) and on a repo of
the local Hub stand-in (over a real socket, through huggingface_hub): the entry it writes names the
parsers the model's own files call for, each setting with a comment saying why; only names the
file's vLLM release knows; a context length and memory fraction the planner's ledger finds "ok" on
the recorded GPUs; the file keeps every other line; nothing is written when the model fits nowhere
or the alias is taken."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from aigo_apply.app.add_model import AddRequest, GpuFacts, add_model, default_alias, parse_source
from aigo_apply.config.vllm_facts import known_releases, names
from aigo_apply.desired.build import build_desired
from aigo_apply.errors import AigoError, HubError, UsageProblem
from aigo_apply.observe.config_file import load_config
from aigo_apply.plan import gpu_ledger

from helpers.cli import run_cli
from helpers.configs import host_context
from helpers.hub import Hub
from helpers.model_cards import CONFIG, GIB, HERMES, THINK, TOOL_SHAPES, model_files, model_folder

FILE = """\
# the lab's models
version: 1
project: lab   # one project
models:
  chat:  # always on
    source: {repo: org/chat}
    context_length: 8192
    gpus: [0]
    vllm: {gpu_memory_utilization: 0.3}

# the router, last
router: {port: 8000}
"""


def gpus(*totals_gib: float, used_gib: float = 0.5) -> GpuFacts:
    listed = [
        {
            "index": i,
            "name": "NVIDIA L40S",
            "memory_total": int(t * GIB),
            "memory_used": int(used_gib * GIB),
            "processes": [],
        }
        for i, t in enumerate(totals_gib)
    ]
    return GpuFacts({"available": True, "gpus": listed})


NO_GPU = GpuFacts({"available": False, "problem": "NVML could not start: no driver", "gpus": []})


@pytest.fixture
def target(tmp_path, monkeypatch):
    monkeypatch.setenv("AIGO_STATE_DIR", str(tmp_path / "state"))
    path = tmp_path / "aigo.yaml"
    path.write_text(FILE)
    return path


def _add(target: Path, source: str, facts: GpuFacts = NO_GPU, **kwargs):
    return add_model(AddRequest(source=source, config_file=str(target), **kwargs), facts)


def _comment(text: str, key: str) -> str:
    (found,) = re.findall(rf"^ +{re.escape(key)}: [^#\n]*#(.*)$", text, re.M)
    return found.strip()


def _kept(before: str, after: str) -> None:
    """Every line of the file as it was is still there, in order (the entry is inserted, nothing else)."""
    lines = iter(after.splitlines())
    for line in before.splitlines():
        assert any(line == other for other in lines), line


@pytest.mark.parametrize("parser", sorted(TOOL_SHAPES))
def test_each_tool_call_shape_writes_its_parser_with_why(tmp_path, target, parser):
    folder = model_folder(tmp_path / f"my-{parser}", TOOL_SHAPES[parser])
    added = _add(target, str(folder), gpus(48))
    text = target.read_text()
    model = load_config(str(target)).data["models"][f"my-{parser}"]
    assert model["vllm"]["tool_call_parser"] == parser and "tool_calling" not in model["vllm"]
    assert _comment(text, "tool_call_parser").startswith("the chat template writes ")
    assert added.written and added.text.strip() in text
    _kept(FILE, text)


@pytest.mark.parametrize("where", ["chat_template.jinja", "chat_template.json"])
def test_the_template_is_read_from_its_own_file_too(tmp_path, target, where):
    folder = model_folder(tmp_path / "m", TOOL_SHAPES["qwen3_coder"], where=where)
    assert _add(target, str(folder)).proposal.entry["vllm"]["tool_call_parser"] == "qwen3_coder"


def test_every_written_setting_has_its_reason_and_the_file_validates(tmp_path, target):
    folder = model_folder(tmp_path / "Qwen3-8B", HERMES + THINK, generation={"temperature": 0.6, "top_p": 0.95})
    added = _add(target, str(folder), gpus(48))
    text = target.read_text()
    entry = load_config(str(target)).data["models"]["qwen3-8b"]
    assert entry == added.proposal.entry
    assert entry["vllm"]["reasoning_parser"] == "qwen3"
    assert _comment(text, "reasoning_parser") == "a qwen3 model (config.json) whose chat template writes <think> blocks"
    for key in ("context_length", "gpus", "tool_call_parser", "reasoning_parser", "gpu_memory_utilization"):
        assert _comment(text, key), key
    assert f"  # aigo-apply add: from {folder}; each setting says why\n  qwen3-8b:\n" in text
    assert any("generation_config.json sets temperature 0.6, top_p 0.95" in n for n in added.proposal.notes)
    _kept(FILE, text)


def test_the_fit_is_one_the_planner_finds_ok_on_the_same_gpus(tmp_path, target):
    folder = model_folder(tmp_path / "big", HERMES, weights=20 * GIB)
    facts = gpus(48)
    added = _add(target, str(folder), facts)
    entry = added.proposal.entry
    assert entry["gpus"] == [0] and entry["context_length"] == 40960
    assert entry["vllm"]["gpu_memory_utilization"] == pytest.approx(0.68)  # (47.5 - 0.3 x 48) / 48, rounded down
    assert "what chat leaves of GPU 0" in _comment(target.read_text(), "gpu_memory_utilization")
    desired = build_desired(load_config(str(target)), host_context(tmp_path / "store"))
    files = {"big": {"config": CONFIG, "weights": 20 * GIB}, "chat": {"config": CONFIG, "weights": 2 * GIB}}
    checks = gpu_ledger.checks(gpu_ledger.build(desired, facts.nvml, files, set()))
    assert [c.status for c in checks] == ["ok"] * len(checks), [c.message for c in checks]


def test_a_context_the_gpu_cannot_hold_is_lowered_and_says_so(tmp_path, target):
    config = {**CONFIG, "max_position_embeddings": 262144}
    folder = model_folder(tmp_path / "long", HERMES, config=config, weights=16 * GIB)
    added = _add(target, str(folder), gpus(48))
    assert added.proposal.entry["context_length"] < 262144
    assert "the longest that fits GPU 0: the model takes 262144 tokens" in _comment(
        target.read_text(), "context_length"
    )


def test_a_model_that_fits_nowhere_is_not_written_and_says_why(tmp_path, target):
    folder = model_folder(tmp_path / "huge", HERMES, weights=60 * GIB)
    with pytest.raises(AigoError) as info:
        _add(target, str(folder), gpus(48))
    assert "'huge' was not added to" in str(info.value) and "smaller or quantized checkpoint" in str(info.value)
    assert target.read_text() == FILE
    dry = _add(target, str(folder), gpus(48), write=False)  # the proposal is still shown
    assert not dry.proposal.placed and not dry.written
    (note,) = dry.proposal.notes  # the why, and nothing about a context length config.json does give
    assert note.startswith("it needs ~") and "on one GPU even at 4096 tokens" in note


def test_an_older_vllm_tag_never_gets_a_parser_it_does_not_know(tmp_path, target):
    """MiniCPM-V's reasoning parser came with vLLM v0.32.0: at v0.31.0 it is left out, with the tags that have it."""
    folder = model_folder(
        tmp_path / "vision", "<think>{{ messages }}</think>", config={**CONFIG, "model_type": "minicpmv"}
    )
    old = _add(target, str(folder), write=False)
    assert "reasoning_parser" not in old.proposal.entry["vllm"]
    (note,) = [n for n in old.proposal.notes if n.startswith("vllm.reasoning_parser")]
    assert "vLLM v0.31.0 has none; vLLM v0.32.0, v0.33.0, v0.34.0 have it: set engines.vllm.image_tag" in note
    target.write_text(FILE.replace("# the router, last", "engines: {vllm: {image_tag: v0.34.0}}\n# the router, last"))
    new = _add(target, str(folder))
    assert new.proposal.entry["vllm"]["reasoning_parser"] == "minicpmv"
    assert load_config(str(target)).data["models"]["vision"]["vllm"]["reasoning_parser"] == "minicpmv"


@pytest.mark.parametrize("release", known_releases())
@pytest.mark.parametrize("parser", sorted(TOOL_SHAPES))
def test_every_name_proposed_is_one_the_file_s_release_knows(tmp_path, target, release, parser):
    target.write_text(FILE + f"engines: {{vllm: {{image_tag: v{release}}}}}\n")
    folder = model_folder(tmp_path / "m", TOOL_SHAPES[parser] + THINK)
    vllm = _add(target, str(folder), write=False).proposal.entry["vllm"]
    for setting in ("tool_call_parser", "reasoning_parser"):
        if setting in vllm:
            assert vllm[setting] in names(setting, release)


def test_a_template_without_tools_turns_tool_calling_off_and_says_why(tmp_path, target):
    base = _add(target, str(model_folder(tmp_path / "base", None)), write=False)
    assert base.proposal.entry["vllm"] == {"tool_calling": False, "gpu_memory_utilization": 0.7}
    assert base.proposal.why["vllm.tool_calling"].startswith("the model has no chat template")
    odd = _add(target, str(model_folder(tmp_path / "odd", "{% if tools %}<<call>>{% endif %}")), write=False)
    assert odd.proposal.entry["vllm"]["tool_calling"] is False and "tool_call_parser" not in odd.proposal.entry["vllm"]
    (note,) = [n for n in odd.proposal.notes if n.startswith("vllm.tool_call_parser")]
    assert "choose the parser the model card names among vLLM v0.31.0's (apertus, " in note


def test_without_gpu_facts_gpus_is_left_to_the_user(tmp_path, target):
    added = _add(target, str(model_folder(tmp_path / "m", HERMES)), NO_GPU)
    assert "gpus" not in added.proposal.entry
    assert added.proposal.entry["vllm"]["gpu_memory_utilization"] == 0.7  # what chat (0.3) leaves
    assert any(
        n.startswith("no GPU facts on this machine (NVML could not start: no driver)") for n in added.proposal.notes
    )


def test_a_taken_alias_or_a_bad_source_is_refused_before_anything_is_read(tmp_path, target):
    with pytest.raises(UsageProblem, match="the alias 'Chat' is taken by model 'chat'"):
        _add(target, str(model_folder(tmp_path / "m", HERMES)), alias="Chat")
    with pytest.raises(UsageProblem, match="neither a folder here nor a Hugging Face repo"):
        _add(target, "not a repo")
    with pytest.raises(AigoError, match="has no config.json"):
        _add(target, str(tmp_path))
    assert target.read_text() == FILE


def test_crlf_line_ends_and_a_flow_models_mapping_are_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("AIGO_STATE_DIR", str(tmp_path / "state"))
    target = tmp_path / "aigo.yaml"
    target.write_bytes(b"version: 1\r\nproject: lab\r\nmodels: {}  # none yet\r\n")
    _add(target, str(model_folder(tmp_path / "m", HERMES)))
    raw = target.read_bytes()
    assert b"\n" not in raw.replace(b"\r\n", b"") and raw.startswith(
        b"version: 1\r\nproject: lab\r\nmodels:  # none yet\r\n"
    )
    assert load_config(str(target)).data["models"]["m"]["vllm"]["tool_call_parser"] == "hermes"


@pytest.mark.parametrize(
    "text,source",
    [
        ("Qwen/Qwen3-8B", {"repo": "Qwen/Qwen3-8B", "revision": "main"}),
        ("Qwen/Qwen3-8B@v1.0", {"repo": "Qwen/Qwen3-8B", "revision": "v1.0"}),
    ],
)
def test_a_repo_source_and_its_alias(text, source):
    assert parse_source(text) == source
    assert default_alias(source) == "qwen3-8b"
    assert default_alias({"path": "/srv/My Model!"}) == "my-model"


def test_a_folder_given_from_here_is_written_as_its_absolute_path(tmp_path, monkeypatch):
    model_folder(tmp_path / "models" / "m", HERMES)
    monkeypatch.chdir(tmp_path)
    assert parse_source("models/m") == {"path": str(tmp_path / "models" / "m")}  # a folder, not a repo id
    assert parse_source("./models/m") == {"path": str(tmp_path / "models" / "m")}
    with pytest.raises(UsageProblem, match="no such folder"):
        parse_source("./models/none")


# -- from the Hub ------------------------------------------------------------------------------------


@pytest.fixture
def hub(monkeypatch):
    with Hub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.setenv("HF_HOME", "/nonexistent-hf-home")  # no token file of this machine's
        monkeypatch.delenv("HF_TOKEN", raising=False)
        yield hub


def test_a_hub_repo_is_read_from_its_small_files_only(target, hub):
    files = model_files(TOOL_SHAPES["qwen3_coder"], where="chat_template.jinja", generation={"temperature": 0.7})
    files["model-00001-of-00002.safetensors"] = files.pop("model.safetensors")
    files["model-00002-of-00002.safetensors"] = b"\0" * 4096
    commit = hub.add("org/Coder-30B", files)
    added = _add(target, "org/Coder-30B", gpus(48))
    entry = load_config(str(target)).data["models"]["coder-30b"]
    assert entry["source"] == {"repo": "org/Coder-30B", "revision": "main"}
    assert entry["vllm"]["tool_call_parser"] == "qwen3_coder"
    assert (
        f"# aigo-apply add: from org/Coder-30B@main (commit {commit[:12]}); each setting says why" in target.read_text()
    )
    fetched = sorted(path.rsplit("/", 1)[1] for path, _ in hub.file_gets())
    assert fetched == [
        "chat_template.jinja",
        "config.json",
        "generation_config.json",
        "tokenizer_config.json",
    ]
    assert added.read == ("chat_template.jinja", "config.json", "generation_config.json", "tokenizer_config.json")


def test_a_gated_repo_is_read_with_this_machine_s_token(target, hub, monkeypatch):
    hub.add("org/Gated", model_files(HERMES), gated_token="hf_" + "a" * 34)
    with pytest.raises(HubError, match="the repo is gated and this machine's token has no access"):
        _add(target, "org/Gated")
    monkeypatch.setenv("HF_TOKEN", "hf_" + "a" * 34)
    assert _add(target, "org/Gated", write=False).proposal.entry["vllm"]["tool_call_parser"] == "hermes"


def test_offline_a_repo_is_not_asked_for(target, hub, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(AigoError, match="HF_HUB_OFFLINE is set"):
        _add(target, "org/Any")
    assert hub.requests == []


# -- the command line ------------------------------------------------------------------------------


def test_the_command_prints_or_writes_the_entry(tmp_path, target):
    folder = model_folder(tmp_path / "m", TOOL_SHAPES["mistral"])
    env = {"AIGO_STATE_DIR": str(tmp_path / "state")}
    dry = run_cli("add", str(folder), "-f", str(target), "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("models:\n  # aigo-apply add: from ") and "tool_call_parser: mistral  # " in dry.stdout
    assert target.read_text() == FILE
    out = run_cli("add", str(folder), "-f", str(target), "--alias", "mistral-small", "-o", "json", env=env)
    assert out.returncode == 0, out.stderr
    document = json.loads(out.stdout)
    assert document["written"] is True and document["alias"] == "mistral-small"
    assert document["entry"]["vllm"]["tool_call_parser"] == "mistral"
    assert document["why"]["vllm.tool_call_parser"] == "the chat template writes [TOOL_CALLS] JSON"
    assert yaml.safe_load(target.read_text())["models"]["mistral-small"] == document["entry"]
    bad = run_cli("add", str(folder), "-f", str(target), "--alias", "-x", env=env)
    assert bad.returncode == 64 and "is not a model alias" in bad.stderr


FORMATTED = """\
version: 1
project: lab
models:
  chat:
    source: {repo: org/chat}
    context_length: 8192
    gpus: [0]
    vllm: {gpu_memory_utilization: 0.1}
  a:
    source: {repo: org/a}
    swap_group: turns
    context_length: 8192
    gpus: [1]
    vllm: {gpu_memory_utilization: 0.8}
"""


BUSY_GPU_0 = GpuFacts(
    {**gpus(48, 48).nvml, "gpus": [{**gpus(48).nvml["gpus"][0], "memory_used": 40 * GIB}, gpus(48, 48).nvml["gpus"][1]]}
)


@pytest.mark.parametrize(
    "facts,weights,placed",
    [
        (gpus(48, 48), 16 * GIB, {"gpus": [0]}),
        (BUSY_GPU_0, 16 * GIB, {"swap_group": "turns", "gpus": [1]}),
        (gpus(48, 48, 48, 48), 70 * GIB, {"gpus": [2, 3]}),
        (NO_GPU, 16 * GIB, {}),
    ],
)
def test_a_formatted_file_stays_formatted(tmp_path, monkeypatch, facts, weights, placed):
    from aigo_apply.edit.fmt import format_file

    monkeypatch.setenv("AIGO_STATE_DIR", str(tmp_path / "state"))
    target = tmp_path / "aigo.yaml"
    target.write_text(FORMATTED)
    assert not format_file(str(target), write=False).changed
    entry = _add(target, str(model_folder(tmp_path / "new", HERMES, weights=weights)), facts).proposal.entry
    assert {k: entry.get(k) for k in placed} == placed
    formatted = format_file(str(target), write=False)
    assert not formatted.changed, formatted.diff()
