"""A canary gate that can pass: each of its requests (`prompt_tokens` + `max_tokens`, the model's own
over `defaults.canary` over the built-in values, key by key as desired/canary.py merges them) must fit
the model's `context_length` (an integer or vLLM's `32K`/`32k` forms). The engine refuses a longer
request, so a gate that asks for more could never pass and every parallel replace of the model would
stop at it; validate says so first. Like the other rules, it skips what failed the schema."""

from __future__ import annotations

from aigo_apply.config.defaults import CANARY_MAX_TOKENS, CANARY_PROMPT_TOKENS
from aigo_apply.config.finder import Finder
from aigo_apply.config.units import parse_token_count
from aigo_apply.config.yaml_source import Path_
from aigo_apply.json_types import JsonMap, JsonValue, obj

_BUILT_IN = {"prompt_tokens": CANARY_PROMPT_TOKENS, "max_tokens": CANARY_MAX_TOKENS}


def _count(value: JsonValue) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def check(data: JsonMap, models: JsonMap, f: Finder) -> None:
    common = obj(data.get("defaults")).get("canary")
    for alias, model in models.items():
        written = model.get("context_length") if isinstance(model, dict) else None
        if not isinstance(model, dict) or not isinstance(written, (int, str)):
            continue
        own = model.get("canary")
        if not isinstance(own if own is not None else common, dict):
            continue  # no gate (`false`, none declared, or what the schema refuses)
        try:
            context = parse_token_count(written)
        except ValueError:
            continue  # the context-length rule says why
        parts: dict[str, tuple[JsonValue, str]] = {}
        for key in ("prompt_tokens", "max_tokens"):
            for where, block in ((f"models.{alias}.canary", obj(own)), ("defaults.canary", obj(common))):
                if key in block:
                    parts[key] = (block[key], where)
                    break
            else:
                parts[key] = (_BUILT_IN[key], "built-in")
        prompt, output = _count(parts["prompt_tokens"][0]), _count(parts["max_tokens"][0])
        if prompt is None or output is None or context < 1 or prompt + output <= context:
            continue
        counts = {"prompt_tokens": (prompt, parts["prompt_tokens"][1]), "max_tokens": (output, parts["max_tokens"][1])}
        f.at_key(_place(alias, obj(own)), _message(alias, written, context, counts))


def _place(alias: str, own: JsonMap) -> Path_:
    """The model's own setting that asks for the most, else its `canary:`, else the model (the gate
    comes from defaults.canary, but the context it must fit is this model's)."""
    written = [k for k in ("prompt_tokens", "max_tokens") if k in own]
    if written:
        return ("models", alias, "canary", max(written, key=lambda k: _count(own[k]) or 0))
    return ("models", alias, "canary")


def _message(alias: str, written: int | str, context: int, parts: dict[str, tuple[int, str]]) -> str:
    (prompt, prompt_from), (output, output_from) = parts["prompt_tokens"], parts["max_tokens"]
    shown = f"{written} ({context} tokens)" if isinstance(written, str) else str(context)
    own = f"models.{alias}.canary"
    return (
        f"the canary's requests take {prompt + output} tokens each (prompt_tokens {prompt} {_from(prompt_from)} + "
        f"max_tokens {output} {_from(output_from)}), more than context_length {shown} holds, so the engine would "
        f"refuse them and no replace of this model could pass its gate; lower prompt_tokens or max_tokens in {own} "
        f"so that they add up to at most {context}, or raise context_length"
    )


def _from(where: str) -> str:
    return "by default" if where == "built-in" else f"from {where}"
