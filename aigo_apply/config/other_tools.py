"""Keys and values written the way other tools take them, answered with the fix in aigo.yaml's
words (config/schema.py asks here before its generic sentence): free-form flag fields (compose's
`command:`, charts' `extraArgs`) are refused with why and where the settings are; `gpus: 0` or
`gpus: "0,1"` (CUDA_VISIBLE_DEVICES' spelling) gets the list, `source: Qwen/Qwen3-8B` (vllm serve's
spelling) or `source: /srv/models/x` the mapping. Pure."""

from __future__ import annotations

import re

from aigo_apply.config.yaml_source import Path_

# Keys users write to pass an engine flags of their own (compose's `command:`, charts' `extraArgs`).
_FREE_FORM_WORDS = {"args", "arg", "argv", "arguments", "flags", "flag", "cmd", "command", "cmdline", "entrypoint"}
_FREE_FORM_KEYS = {"extra", "extras", "options", "opts", "kwargs", "engine_kwargs", "extra_options", "server_options"}


def free_form(path: Path_, key: object, allowed: list[str]) -> str | None:
    """A key meant to carry free-form engine flags (`extra_args`, `args`, `command`, `cli_args`...),
    where a model, an engine or the defaults are set: refused with why, and where the settings are."""
    if not isinstance(key, str) or not path or path[0] not in ("models", "engines", "defaults"):
        return None
    words = key.strip().lstrip("-").lower().replace("-", "_")
    spaced = "".join(f"_{c.lower()}" if c.isupper() else c for c in key.strip().lstrip("-")).lower().replace("-", "_")
    if not (
        _FREE_FORM_WORDS & set(words.split("_") + spaced.split("_"))
        or words in _FREE_FORM_KEYS
        or spaced.strip("_") in _FREE_FORM_KEYS
    ):
        return None
    return (
        f"unknown key '{key}': aigo-apply passes an engine no free-form flags; every flag it passes is a "
        "setting checked against the engine's release (names, choices, ranges), and a free-form field would "
        f"bypass that. Use the settings, each its own key (allowed here: {', '.join(allowed)}); every "
        "setting is in docs/configuration.md and `aigo-apply schema`"
    )


def written_as_text(path: Path_, value: object, shown: str) -> str | None:
    """The fix for a value written the way another tool takes it: `gpus: 0` or `gpus: "0,1"` (a GPU
    list), `source: Qwen/Qwen3-8B` or `source: /srv/models/x` (a source mapping); None for others."""
    if len(path) == 3 and path[0] == "models" and path[2] == "gpus":
        return _gpus_fix(value, shown)
    source = (len(path) >= 3 and path[0] == "models" and path[-1] == "source") or path[-2:] == ("speculative", "draft")
    if not source or not isinstance(value, str):
        return None
    text, key = value.strip(), str(path[-1])
    for prefix in ("https://huggingface.co/", "http://huggingface.co/", "huggingface.co/", "hf://"):
        text = text.removeprefix(prefix)
    plain = re.fullmatch(r"[\w.~/+-]{1,200}", text) is not None
    what = f"takes a mapping, not text (got {shown}): write {key}: "
    if plain and (text.startswith(("/", "./", "../", "~")) or text in (".", "..")):
        return what + f"{{path: {text}}} for a folder on this host"
    if plain and re.fullmatch(r"[\w.-]+/[\w.-]+", text):
        return what + f"{{repo: {text}}} for a Hugging Face repo, or {{path: /folder}} for a folder on this host"
    return what + "{repo: ORG/NAME} for a Hugging Face repo, or {path: /folder} for a folder on this host"


def _gpus_fix(value: object, shown: str) -> str | None:
    """`gpus: 0`, `"0"`, `"0,1"`, `"[0, 1]"`, `All`: the list or word meant."""
    if isinstance(value, str) and value.strip().lower() in ("all", "none"):
        return f"is written {shown}: write gpus: {value.strip().lower()}"
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    indices = str(value).strip().strip("[]").replace(",", " ").split()
    if not indices or not all(i.isascii() and i.isdigit() and len(i) <= 3 for i in indices):
        return None
    listed = [str(int(i)) for i in indices]
    which = f"GPU {listed[0]}" if len(listed) == 1 else f"GPUs {', '.join(listed[:-1])} and {listed[-1]}"
    return (
        f"must be 'all', 'none' or a list of GPU indices (got {shown}): "
        f"write gpus: [{', '.join(listed)}] for {which}, or gpus: all / none"
    )
