"""A tiny random-weight Llama with a real tokenizer, for the tests that run the real vLLM (CPU build)
and for `scripts/demo --real`: nothing is downloaded, and the test venv needs no torch.

The model is generated INSIDE the real-engine image (tests/images/build-vllm-cpu.sh), whose Python
has torch, transformers, tokenizers and safetensors: `make(folder)` runs this very file there with
the folder mounted. What it writes: a Llama of 2 layers, hidden 128, 2 attention heads and 1 KV head
(head_dim 64: vLLM's CPU attention refuses head_dim 16), MAX_POSITIONS positions, random weights
(seeded: the same bytes every time) saved as safetensors (well under 1 MB); a byte-level BPE
tokenizer trained on a few sentences, with a ChatML chat template that lists tools and the
`<tool_call>`/`</tool_call>` tokens vLLM's hermes tool parser looks up in the vocabulary.

Host side:       python tests/helpers/tiny_model.py --docker FOLDER [--image IMAGE]
In the image:    python /gen/tiny_model.py FOLDER
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

IMAGE = "aigo-vllm-cpu:v0.32.0-cpu"
MAX_POSITIONS = 1024  # the model's max_position_embeddings: a longer --max-model-len makes vLLM refuse
IMAGE_PYTHON = "/opt/vllm/bin/python"

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello! How can I help you today?",
    "The weather in Paris is sunny and warm.",
    "Rome is the capital of Italy, and Paris is the capital of France.",
    "Please call the function get_weather with the city name.",
    '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    "A tiny model answers with random words, and that is fine for a test.",
    "vLLM serves models over an OpenAI compatible API.",
    "The router sends each request to the engine that serves the model.",
    "One, two, three, four, five, six, seven, eight, nine, ten.",
    "user assistant system tool function arguments name content",
]
CHAT_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\nYou may call these functions: <tools>"
    "{%- for tool in tools %}{{ tool | tojson }}{%- endfor %}</tools>\n"
    'Answer a call as <tool_call>{"name": NAME, "arguments": ARGS}</tool_call><|im_end|>\n'
    "{%- endif %}"
    "{%- for message in messages %}<|im_start|>{{ message.role }}\n"
    "{%- if message.content is string %}{{ message.content }}{%- endif %}"
    "{%- for call in message.tool_calls or [] %}<tool_call>{{ call.function | tojson }}</tool_call>{%- endfor %}"
    "<|im_end|>\n{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)


def make(folder: Path, image: str = IMAGE, timeout: float = 300) -> Path:
    """Generate the model into `folder` by running this file in `image` (kept when it is already
    there). Returns the folder."""
    folder = Path(folder).resolve()
    if (folder / "config.json").is_file() and (folder / "model.safetensors").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    here = Path(__file__).resolve()
    command = [
        "docker", "run", "--rm", "--network", "none",
        "--user", f"{os.getuid()}:{os.getgid()}",
        "-e", "HF_HOME=/tmp/hf", "-e", "HOME=/tmp",
        "-v", f"{here}:/gen/tiny_model.py:ro",
        "-v", f"{folder}:/out",
        "--entrypoint", IMAGE_PYTHON,
        image, "/gen/tiny_model.py", "/out",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0 or not (folder / "config.json").is_file():
        raise RuntimeError(f"generating the tiny model in {image} failed:\n{result.stdout}{result.stderr}")
    return folder


def make_adapter(folder: Path, seed: int, rank: int = 8, base: str = "tiny") -> Path:
    """A LoRA adapter for the tiny model in peft's file layout (adapter_config.json and
    adapter_model.safetensors), made on the host with numpy: rank `rank` on every layer's q_proj and
    v_proj (q: 2 heads x 64 out, v: 1 KV head x 64 out, both 128 in), random weights from `seed`
    (different seeds, different answers). Returns the folder."""
    import json

    import numpy as np
    from safetensors.numpy import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    tensors = {}
    for layer in range(2):
        for proj, out_features in (("q_proj", 128), ("v_proj", 64)):
            prefix = f"base_model.model.model.layers.{layer}.self_attn.{proj}"
            tensors[f"{prefix}.lora_A.weight"] = rng.normal(0, 0.02, (rank, 128)).astype(np.float16)
            tensors[f"{prefix}.lora_B.weight"] = rng.normal(0, 0.02, (out_features, rank)).astype(np.float16)
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    os.chmod(folder / "adapter_model.safetensors", 0o644)  # as peft leaves it (save_file makes it 0600)
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": rank,
        "lora_alpha": 2 * rank,
        "lora_dropout": 0.0,
        "bias": "none",
        "target_modules": ["q_proj", "v_proj"],
        "base_model_name_or_path": base,
        "fan_in_fan_out": False,
        "modules_to_save": None,
    }
    (folder / "adapter_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return folder


def generate(out: Path) -> None:
    """Inside the image: write the tokenizer, config and weights into `out`."""
    import torch
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    special = ["<|begin|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(SENTENCES, trainer)
    # Hermes' markers are plain added tokens (as in Qwen's and Hermes' own tokenizers): kept in the text.
    tok.add_tokens([AddedToken("<tool_call>", special=False), AddedToken("</tool_call>", special=False)])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|begin|>", eos_token="<|im_end|>", pad_token="<|pad|>"
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.model_max_length = MAX_POSITIONS
    fast.save_pretrained(out)

    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.config.torch_dtype = torch.bfloat16
    model.save_pretrained(out, safe_serialization=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--docker"] and len(args) in (2, 4) and (len(args) == 2 or args[2] == "--image"):
        print(make(Path(args[1]), args[3] if len(args) == 4 else IMAGE))
    elif len(args) == 1 and not args[0].startswith("-"):
        generate(Path(args[0]))
    else:
        sys.exit("usage: tiny_model.py --docker FOLDER [--image IMAGE]  |  tiny_model.py FOLDER (in the image)")
