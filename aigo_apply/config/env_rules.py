"""Rules for a model's environment: secrets are passed by reference, never in clear, and the
Hugging Face token never reaches an engine container."""

from __future__ import annotations

import re
from typing import Any

from aigo_apply.config.finder import Finder

HUB_TOKEN_NAMES = frozenset({"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_HUB_TOKEN", "HF_API_TOKEN"})
SECRET_NAME_RE = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY|PRIVATE_KEY)", re.I)


def check_env(data: dict[str, Any], models: dict[str, Any], f: Finder) -> None:
    for alias, model in models.items():
        env = model.get("env") if isinstance(model, dict) else None
        if not isinstance(env, dict):
            continue
        for name, value in env.items():
            if name in HUB_TOKEN_NAMES:
                f.at_key(
                    ("models", alias, "env", name),
                    "engine containers never get a Hugging Face token: aigo-apply downloads models on this host "
                    "(with HF_TOKEN from its environment or `hf auth login`) and the engine runs offline "
                    "(HF_HUB_OFFLINE=1); remove this entry",
                )
            elif isinstance(value, str) and value and SECRET_NAME_RE.search(name):
                f.at_value(
                    ("models", alias, "env", name),
                    f"{name} looks like a secret written in clear; pass it by reference, e.g. {name}: {{from_env: {name}}}",
                )
