"""What a model's chat template and config.json say (observe/chat_format.py): the tool-call format of
each kind of template, the most specific first (Qwen3-Coder's and GLM-4.5's calls sit inside
<tool_call> too), the reasoning parser of a family that writes <think> blocks, and nothing where the
files do not say it without doubt. The templates are the parts of real models' templates that write
the calls (Qwen2.5/Qwen3, Qwen3-Coder, Llama 3.1, Mistral, ...)."""

from __future__ import annotations

import pytest

from aigo_apply.config.vllm_facts import known_releases, names
from aigo_apply.observe.chat_format import (
    OWN_MARKERS,
    THINKING_FAMILIES,
    TOOL_FORMATS,
    family,
    read_format,
    template_text,
)

HERMES = (
    "{%- if tools %}{{- '<|im_start|>system\\n' }}# Tools\\n\\nYou may call one or more functions to assist with the "
    "user query.\\n\\n<tools>{%- for tool in tools %}{{ tool | tojson }}{%- endfor %}</tools>\\n\\nFor each function "
    'call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{"name": '
    '<function-name>, "arguments": <args-json-object>}\\n</tool_call><|im_end|>{%- endif %}'
)
QWEN3_CODER = (
    "{%- if tools %}# Tools\\n<tools>{% for tool in tools %}<function><name>{{ tool.name }}</name></function>{% endfor %}"
    "</tools>\\nIf you choose to call a function ONLY reply in the following format:\\n<tool_call>\\n"
    "<function=example_function_name>\\n<parameter=example_parameter_1>\\nvalue_1\\n</parameter>\\n</function>\\n"
    "</tool_call>{%- endif %}"
)
LLAMA3 = (
    "{%- if tools is not none %}Given the following functions, please respond with a JSON for a function call with "
    'its proper arguments that best answers the given prompt.\\n\\nRespond in the format {"name": function name, '
    '"parameters": dictionary of argument name and its value}. Do not use variables.{%- endif %}'
    "{%- if builtin_tools is defined %}{{- '<|python_tag|>' + tool_call.name + '.call(' }}{%- endif %}"
)
MISTRAL = (
    "{%- if tools is not none %}[AVAILABLE_TOOLS]{{ tools|tojson }}[/AVAILABLE_TOOLS]{%- endif %}"
    '{%- for tool_call in message.tool_calls %}{{- "[TOOL_CALLS]" + tool_call|tojson }}{%- endfor %}'
)
GLM45 = "{% if tools %}<tools>{{ tools }}</tools>{% endif %}<tool_call>{{ tc.name }}\\n<arg_key>{{ k }}</arg_key>\\n<arg_value>{{ v }}</arg_value>"
MINIMAX = '{% if tools %}<tools>...</tools>{% endif %}<minimax:tool_call>\\n<invoke name="{{ tc.name }}">'
KIMI = "{% if tools %}{{ tools }}{% endif %}<|tool_calls_section_begin|><|tool_call_begin|>{{ id }}"
DEEPSEEK_V3 = "{% if tools %}{% endif %}<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>{{ name }}\\n```json\\n{{ args }}\\n```"
DEEPSEEK_V31 = "{% if tools %}{% endif %}<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>{{ name }}<｜tool▁sep｜>{{ args }}<｜tool▁call▁end｜>"
GPT_OSS = "{% if tools %}{% endif %}<|start|>assistant<|channel|>commentary to=functions.{{ name }} <|constrain|>json<|message|>"
SEED = "{% if tools %}{% endif %}<seed:tool_call>\n<function={{ name }}>\n<parameter={{ k }}>{{ v }}</parameter>"
FORMATS = [
    (HERMES, "hermes"),
    (QWEN3_CODER, "qwen3_coder"),
    (LLAMA3, "llama3_json"),
    (MISTRAL, "mistral"),
    (GLM45, "glm45"),
    (MINIMAX, "minimax_m2"),
    (KIMI, "kimi_k2"),
    (DEEPSEEK_V3, "deepseek_v3"),
    (DEEPSEEK_V31, "deepseek_v31"),
    (GPT_OSS, "openai"),
    (SEED, "seed_oss"),
]


@pytest.mark.parametrize("template,parser", FORMATS)
def test_each_tool_call_format_names_its_parser(template, parser):
    found = read_format({"model_type": "any"}, template)
    assert found.template and found.tools
    assert found.tool_parser is not None and found.tool_parser.names == (parser,)
    assert found.tool_parser.why.startswith("the chat template writes ")


def test_seed_oss_s_block_is_not_taken_for_the_qwen3_coder_xml_inside_it():
    assert read_format({}, SEED).tool_parser.names == ("seed_oss",)
    assert read_format({}, SEED.replace("seed:tool_call", "tool_call")).tool_parser.names == ("qwen3_coder",)


@pytest.mark.parametrize("template", ["{{ messages }}", "{% if tools %}{{ tools | tojson }}{% endif %}", "", None])
def test_a_template_without_a_known_call_format_names_no_parser(template):
    found = read_format({"model_type": "qwen3"}, template)
    assert found.tool_parser is None
    assert found.template is (template is not None)
    assert found.tools is bool(template and "tools" in template)


def test_every_name_the_rules_give_is_one_some_vllm_release_knows():
    """A misspelt name in the rules would never be proposed (model_proposal keeps the release's): caught here."""
    every_tool = {n for r in known_releases() for n in names("tool_call_parser", r)}
    every_reasoning = {n for r in known_releases() for n in names("reasoning_parser", r)}
    assert {n for _, parsers, _ in TOOL_FORMATS for n in parsers} <= every_tool
    assert {n for parsers in THINKING_FAMILIES.values() for n in parsers} <= every_reasoning
    assert {n for _, _, parsers in OWN_MARKERS for n in parsers} <= every_reasoning


@pytest.mark.parametrize(
    "kind,template,parser",
    [
        ("qwen3", HERMES + "{%- if enable_thinking is false %}<think>\\n\\n</think>{%- endif %}", "qwen3"),
        ("qwen3_moe", "<think>\\n", "qwen3"),
        ("qwen2", "{{ '<｜Assistant｜><think>\\n' }}", "deepseek_r1"),  # QwQ, an R1 distillation
        ("deepseek_v3", "<｜Assistant｜><think>", "deepseek_r1"),
        ("deepseek_v3", "{% if thinking %}<think>{% else %}</think>{% endif %}", "deepseek_v3"),
        ("glm4_moe", "<think></think>", "glm45"),
        ("nemotron_h", "<think>", "nemotron_v3"),
        ("minicpmv", "<think>", "minicpmv"),
        ("seed_oss", "<seed:think>", "seed_oss"),
        ("mistral3", "[THINK]", "mistral"),
        ("gpt_oss", GPT_OSS, "openai_gptoss"),
    ],
)
def test_a_thinking_family_names_its_reasoning_parser(kind, template, parser):
    found = read_format({"model_type": kind}, template)
    assert found.reasoning_parser is not None and found.reasoning_parser.names == (parser,)


def test_no_think_marker_or_an_unknown_family_names_no_reasoning_parser():
    assert read_format({"model_type": "qwen3"}, HERMES).reasoning_parser is None  # an instruct model
    unknown = read_format({"model_type": "my_arch"}, "<think>")
    assert unknown.reasoning_parser is None and unknown.think == "<think>" and unknown.family == "my_arch"
    assert read_format({"model_type": "llama"}, GPT_OSS).reasoning_parser is None  # harmony only for gpt-oss


def test_templates_are_read_from_every_file_that_holds_one():
    assert template_text({"chat_template": "A"}) == "A"
    assert (
        template_text({"chat_template": [{"name": "default", "template": "A"}, {"name": "tool_use", "template": "B"}]})
        == "A\nB"
    )
    assert template_text({}, "J", {"chat_template": "C"}) == "J\nC"
    assert template_text({"chat_template": 3}, None, []) is None
    assert template_text(None) is None


def test_the_family_is_config_json_s_model_type_or_its_text_model_s_or_architecture():
    assert family({"model_type": "qwen3"}) == "qwen3"
    assert family({"text_config": {"model_type": "qwen3_vl_text"}}) == "qwen3_vl_text"
    assert family({"architectures": ["LlamaForCausalLM"]}) == "LlamaForCausalLM"
    assert family({"model_type": "\x1b[2J"}) == "" and family([]) == ""
