"""What a model's own files say about how it calls tools and how it thinks, read for `aigo-apply add`
(app/add_model.py): its chat template (in tokenizer_config.json, chat_template.jinja or
chat_template.json) writes tool calls in one format, and vLLM needs the tool-call parser that reads
that format; a model of a family that thinks in `<think>` blocks (config.json's model_type) needs the
reasoning parser of that family. Only formats recognised without doubt are named, each with the words
that say why; the parser names are vLLM's, and plan/model_proposal.py keeps only those the file's
vLLM release knows. Pure: the files' parsed contents in, a ChatFormat out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aigo_apply.json_types import JsonValue


@dataclass(frozen=True)
class Choice:
    """vLLM parser names for one recognised format, preferred first, and why (for the entry's comment)."""

    names: tuple[str, ...]
    why: str


@dataclass(frozen=True)
class ChatFormat:
    template: bool  # the model has a chat template
    tools: bool  # its chat template takes `tools`
    tool_parser: Choice | None  # the tool-call format, when recognised
    think: str | None  # the thinking marker the template writes (`<think>`, `[THINK]`...), if any
    reasoning_parser: Choice | None
    family: str  # config.json's model_type (else its first architecture), "" when it names neither


def _all(*words: str) -> Callable[[str], bool]:
    return lambda text: all(w in text for w in words)


_DEEPSEEK_CALLS = "<｜tool▁calls▁begin｜>"
# (test of the template's text, parser names, what the template writes), the most specific first:
# Seed-OSS writes Qwen3-Coder's XML inside its own block, and Qwen3-Coder's and GLM-4.5's calls are
# written inside <tool_call>, Hermes' marker.
TOOL_FORMATS: tuple[tuple[Callable[[str], bool], tuple[str, ...], str], ...] = (
    (_all("<seed:tool_call>"), ("seed_oss",), "<seed:tool_call> blocks"),
    (_all("<minimax:tool_call>"), ("minimax_m2",), "<minimax:tool_call> blocks"),
    (_all("<function=", "<parameter="), ("qwen3_coder",), "<function=NAME> calls with <parameter=NAME> XML"),
    (_all("<arg_key>", "<arg_value>"), ("glm45",), "<tool_call> with <arg_key>/<arg_value> pairs"),
    (_all("<|tool_calls_section_begin|>"), ("kimi_k2",), "<|tool_calls_section_begin|> sections"),
    (_all(_DEEPSEEK_CALLS, "```json"), ("deepseek_v3",), f"{_DEEPSEEK_CALLS} with ```json arguments"),
    (_all(_DEEPSEEK_CALLS), ("deepseek_v31",), f"{_DEEPSEEK_CALLS} with plain JSON arguments"),
    (_all("<|channel|>", "to=functions."), ("openai",), "harmony channels calling to=functions.NAME"),
    (_all("<start_function_call>"), ("functiongemma",), "<start_function_call> calls"),
    (_all("<|action_start|>", "<|plugin|>"), ("internlm",), "<|action_start|><|plugin|> calls"),
    (_all("<|tool_call|>"), ("granite",), "<|tool_call|> followed by JSON"),
    (_all("<tool_call>"), ("hermes",), "<tool_call> JSON"),
    (_all("<|python_tag|>", '"parameters"'), ("llama3_json",), "JSON {name, parameters} calls (<|python_tag|>)"),
    (_all("[TOOL_CALLS]"), ("mistral",), "[TOOL_CALLS] JSON"),
)
# model_type -> reasoning parser names, for a template that writes <think> blocks.
THINKING_FAMILIES = {
    "qwen3": ("qwen3",),
    "qwen3_moe": ("qwen3",),
    "qwen3_next": ("qwen3",),
    "qwen3_vl": ("qwen3",),
    "qwen3_vl_moe": ("qwen3",),
    "qwen2": ("deepseek_r1",),  # QwQ and DeepSeek-R1's distillations into Qwen2.5
    "llama": ("deepseek_r1",),  # DeepSeek-R1's distillations into Llama
    "deepseek_v3": ("deepseek_r1",),  # DeepSeek-R1 (V3.1's switchable thinking: below)
    "glm4_moe": ("glm45",),
    "minimax_m2": ("minimax_m2",),
    "kimi_k2": ("kimi_k2",),
    "nemotron_h": ("nemotron_v3",),
    "olmo3": ("olmo3",),
    "minicpmv": ("minicpmv",),
}
# Thinking markers of their own: (marker, model_type or "" for any, names).
OWN_MARKERS = (
    ("<seed:think>", "", ("seed_oss",)),
    ("[THINK]", "", ("mistral",)),
    ("<|channel|>", "gpt_oss", ("openai_gptoss",)),
)


def template_text(tokenizer_config: JsonValue, jinja: str | None = None, template_json: JsonValue = None) -> str | None:
    """Every chat template the files hold, joined (a repo may keep a default and a `tool_use` one), or
    None when there is none: chat_template.jinja, chat_template.json's `chat_template`, and
    tokenizer_config.json's `chat_template` (a text, or a list of {name, template})."""
    parts = [jinja] if isinstance(jinja, str) else []
    for holder in (template_json, tokenizer_config):
        found = holder.get("chat_template") if isinstance(holder, dict) else None
        if isinstance(found, str):
            parts.append(found)
        elif isinstance(found, list):
            parts += [written for t in found if isinstance(t, dict) and isinstance(written := t.get("template"), str)]
    return "\n".join(parts) if parts else None


def family(config: JsonValue) -> str:
    """config.json's model_type, else its text model's, else its first architecture ("" for none)."""
    config = config if isinstance(config, dict) else {}
    for holder in (config, config.get("text_config"), config.get("llm_config")):
        kind = holder.get("model_type") if isinstance(holder, dict) else None
        if isinstance(kind, str) and kind.isprintable() and len(kind) <= 64:
            return kind
    arch = config.get("architectures")
    first = arch[0] if isinstance(arch, list) and arch else None
    return first if isinstance(first, str) and first.isprintable() and len(first) <= 64 else ""


def read_format(config: JsonValue, template: str | None) -> ChatFormat:
    """What the template and config.json say (see the module's docstring)."""
    kind = family(config)
    text = template or ""
    tools = "tools" in text
    tool = next(
        (Choice(names, f"the chat template writes {what}") for test, names, what in TOOL_FORMATS if test(text)), None
    )
    think, reasoning = _thinking(kind, text)
    return ChatFormat(template is not None, tools, tool, think, reasoning, kind)


def _thinking(kind: str, text: str) -> tuple[str | None, Choice | None]:
    for marker, only, own in OWN_MARKERS:
        if marker in text and (not only or only == kind):
            return marker, Choice(own, f"the chat template writes {marker} blocks")
    if "<think>" not in text:
        return None, None
    names: tuple[str, ...] | None = THINKING_FAMILIES.get(kind)
    if kind == "deepseek_v3" and "thinking" in text.replace("<think>", "").replace("</think>", ""):
        names = ("deepseek_v3",)  # V3.1 and later: thinking switched by the request (`thinking`)
    if names is None:
        return "<think>", None
    return "<think>", Choice(names, f"a {kind} model (config.json) whose chat template writes <think> blocks")
