"""Model folders for `aigo-apply add`'s tests: a config.json, a tokenizer_config.json holding a chat
template of one tool-call shape (the parts of real models' templates that write the calls), and a
safetensors file whose header declares the weights' size (without the weights themselves)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

GIB = 1024**3

HERMES = (  # Qwen2.5 / Qwen3 / Hermes: <tool_call> JSON
    "{%- if tools %}{{- '<|im_start|>system\\n' }}# Tools\\n\\n<tools>{%- for tool in tools %}{{ tool | tojson }}"
    "{%- endfor %}</tools>\\n\\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\\n<tool_call>\\n{"name": <function-name>, "arguments": <args-json-object>}'
    "\\n</tool_call><|im_end|>{%- endif %}"
)
QWEN3_CODER = (  # Qwen3-Coder: XML calls inside <tool_call>
    "{%- if tools %}# Tools\\n<tools>{% for tool in tools %}<function><name>{{ tool.name }}</name></function>"
    "{% endfor %}</tools>\\nIf you choose to call a function ONLY reply in the following format:\\n<tool_call>\\n"
    "<function=example_function_name>\\n<parameter=example_parameter_1>\\nvalue_1\\n</parameter>\\n</function>\\n"
    "</tool_call>{%- endif %}"
)
LLAMA3 = (  # Llama 3.1: JSON {name, parameters}, built-in tools after <|python_tag|>
    "{%- if tools is not none %}Given the following functions, please respond with a JSON for a function call with "
    'its proper arguments that best answers the given prompt.\\n\\nRespond in the format {"name": function name, '
    '"parameters": dictionary of argument name and its value}. Do not use variables.{%- endif %}'
    "{%- if builtin_tools is defined %}{{- '<|python_tag|>' + tool_call.name + '.call(' }}{%- endif %}"
)
MISTRAL = (  # Mistral: [TOOL_CALLS]
    "{%- if tools is not none %}[AVAILABLE_TOOLS]{{ tools|tojson }}[/AVAILABLE_TOOLS]{%- endif %}"
    '{%- for tool_call in message.tool_calls %}{{- "[TOOL_CALLS]" + tool_call|tojson }}{%- endfor %}'
)
THINK = "{%- if enable_thinking is defined and enable_thinking is false %}<think>\\n\\n</think>\\n\\n{%- endif %}"
TOOL_SHAPES = {"hermes": HERMES, "qwen3_coder": QWEN3_CODER, "llama3_json": LLAMA3, "mistral": MISTRAL}

# An 8B model like Qwen3-8B: 36 layers, 8 KV heads of 128 (144 KiB of KV cache per token in bfloat16).
CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "hidden_size": 4096,
    "max_position_embeddings": 40960,
    "torch_dtype": "bfloat16",
}


def safetensors_header(weights: int) -> bytes:
    """A safetensors file's first bytes: a header declaring one tensor of `weights` bytes."""
    header = json.dumps({"w": {"dtype": "BF16", "shape": [weights // 2], "data_offsets": [0, weights]}}).encode()
    return struct.pack("<Q", len(header)) + header


def model_files(
    template: str | None,
    config: dict | None = None,
    weights: int | None = 16 * GIB,
    where: str = "tokenizer_config.json",
    generation: dict | None = None,
) -> dict[str, bytes]:
    """A model's files: `template` in tokenizer_config.json (or in chat_template.jinja / .json)."""
    files = {"config.json": json.dumps(config or CONFIG).encode()}
    tokenizer: dict = {"model_max_length": 131072, "eos_token": "<|im_end|>"}
    if template is not None and where == "tokenizer_config.json":
        tokenizer["chat_template"] = template
    elif template is not None and where == "chat_template.jinja":
        files[where] = template.encode()
    elif template is not None:
        files[where] = json.dumps({"chat_template": template}).encode()
    files["tokenizer_config.json"] = json.dumps(tokenizer).encode()
    if generation is not None:
        files["generation_config.json"] = json.dumps(generation).encode()
    if weights is not None:
        files["model.safetensors"] = safetensors_header(weights)
    return files


def model_folder(path: Path, template: str | None, **kwargs) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name, data in model_files(template, **kwargs).items():
        (path / name).write_bytes(data)
    return path
