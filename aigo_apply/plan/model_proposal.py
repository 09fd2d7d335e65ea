"""The `models:` entry `aigo-apply add` proposes for a model, from what its own files say
(observe/chat_format.py: the tool-call format and thinking markers of its chat template, its family)
and where it fits (plan/fit.py), with the reason for each setting it writes (the entry's comments)
and a note for each it leaves to the user. Every parser it names is one the file's vLLM release knows
(its facts file, config/vllm_facts.py): a format whose parser that release lacks is left out, with
the releases that have one. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aigo_apply.config.engine_choice import engine_of
from aigo_apply.config.vllm_facts import known_releases, names
from aigo_apply.observe.chat_format import ChatFormat, Choice
from aigo_apply.plan.fit import Fit

SAMPLING = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")


@dataclass(frozen=True)
class Proposal:
    alias: str
    entry: dict[str, object]  # in the order `fmt` writes a model's keys (a config file's entry: written as it is)
    why: dict[str, str]  # dotted key below the entry -> the reason, written as the key's comment
    notes: tuple[str, ...]  # what is left to the user, and what else the files say
    placed: bool  # False: the model fits nowhere on these GPUs (Fit.notes say why); nothing is written


def propose(
    alias: str,
    source: dict[str, str],
    chat: ChatFormat,
    fit: Fit,
    release: str,
    longest: int | None,
    defaults: object = None,
    config: object = None,
    generation: object = None,
) -> Proposal:
    """The entry for `alias` (see the module's docstring). `release`: the vLLM release the file's
    names are checked against; `longest`: the context length config.json gives (None: not said);
    `defaults`: the file's `defaults:`; `config`, `generation`: config.json, generation_config.json."""
    entry: dict[str, object] = {"source": dict(source)}
    why = dict(fit.why)
    notes = list(fit.notes)
    chosen = engine_of(entry, defaults)
    if chosen != "vllm":
        entry["engine"] = "vllm"
        why["engine"] = f"add proposes vLLM's settings; defaults.engine_by_format would choose {chosen}"
    if fit.swap_group:
        entry["swap_group"] = fit.swap_group
    if longest is not None and fit.context_length is not None:
        entry["context_length"] = fit.context_length
    elif longest is None:
        notes.append(
            "context_length: config.json gives no maximum length (max_position_embeddings): write the model "
            "card's, as a number of tokens"
        )
    if fit.gpus is not None:
        entry["gpus"] = fit.gpus
    vllm: dict[str, object] = {}
    _tools(chat, release, vllm, why, notes)
    _reasoning(chat, release, vllm, why, notes)
    if fit.tensor_parallel_size > 1:
        vllm["tensor_parallel_size"] = fit.tensor_parallel_size
    if fit.fraction is not None:
        vllm["gpu_memory_utilization"] = fit.fraction
    entry["vllm"] = vllm
    notes += _other_facts(source, config, generation)
    return Proposal(alias, entry, {k: v for k, v in why.items() if _has(entry, k)}, tuple(notes), fit.placed)


def _has(entry: Mapping[str, object], dotted: str) -> bool:
    head, _, rest = dotted.partition(".")
    if head not in entry:
        return False
    value = entry[head]
    return not rest or (isinstance(value, dict) and rest in value)


def _known(choice: Choice, setting: str, release: str) -> str | None:
    return next((n for n in choice.names if n in names(setting, release)), None)


def _elsewhere(choice: Choice, setting: str, release: str) -> str:
    """Which releases with facts here know one of `choice`'s names (the tag to move to), in words."""
    having = [r for r in known_releases() if r != release and any(n in names(setting, r) for n in choice.names)]
    name = choice.names[0]
    if not having:
        return f"no vLLM release aigo-apply has facts for has a {name} {setting}"
    return f"vLLM {', '.join('v' + r for r in having)} {'has' if len(having) == 1 else 'have'} it: set engines.vllm.image_tag to one of those to use {setting} {name}"


def _tools(chat: ChatFormat, release: str, vllm: dict[str, object], why: dict[str, str], notes: list[str]) -> None:
    if chat.tool_parser is not None:
        name = _known(chat.tool_parser, "tool_call_parser", release)
        if name is not None:
            vllm["tool_call_parser"] = name
            why["vllm.tool_call_parser"] = chat.tool_parser.why
            return
        vllm["tool_calling"] = False
        why["vllm.tool_calling"] = (
            f"{chat.tool_parser.why}, which vLLM reads with its {chat.tool_parser.names[0]} parser, and "
            f"vLLM v{release} (engines.vllm.image_tag) has none"
        )
        notes.append(
            f"vllm.tool_call_parser: vLLM v{release} has no {chat.tool_parser.names[0]} tool-call parser; "
            + _elsewhere(chat.tool_parser, "tool_call_parser", release)
            + ", and remove tool_calling: false"
        )
        return
    vllm["tool_calling"] = False
    if not chat.template:
        why["vllm.tool_calling"] = "the model has no chat template (a base model?): nothing writes tool calls"
    elif not chat.tools:
        why["vllm.tool_calling"] = "its chat template takes no tools"
    else:
        why["vllm.tool_calling"] = "its chat template takes tools in a format add does not recognise"
        notes.append(
            "vllm.tool_call_parser: the chat template takes tools in a format add does not recognise: choose "
            f"the parser the model card names among vLLM v{release}'s ({', '.join(names('tool_call_parser', release))}) "
            "and remove tool_calling: false"
        )


def _reasoning(chat: ChatFormat, release: str, vllm: dict[str, object], why: dict[str, str], notes: list[str]) -> None:
    if chat.reasoning_parser is not None:
        name = _known(chat.reasoning_parser, "reasoning_parser", release)
        if name is not None:
            vllm["reasoning_parser"] = name
            why["vllm.reasoning_parser"] = chat.reasoning_parser.why
        else:
            notes.append(
                f"vllm.reasoning_parser: {chat.reasoning_parser.why}, which vLLM reads with its "
                f"{chat.reasoning_parser.names[0]} parser, and vLLM v{release} has none; "
                + _elsewhere(chat.reasoning_parser, "reasoning_parser", release)
            )
    elif chat.think is not None:
        what = f"config.json's model type {chat.family}" if chat.family else "config.json, which names no model type,"
        notes.append(
            f"vllm.reasoning_parser: the chat template writes {chat.think} blocks, but {what} is not a family add "
            f"knows the reasoning parser of: choose the one the model card names among vLLM v{release}'s "
            "(deepseek_r1 reads plain <think>...</think>)"
        )


def _other_facts(source: dict[str, str], config: object, generation: object) -> list[str]:
    notes = []
    if isinstance(config, dict) and isinstance(config.get("auto_map"), dict):
        where = source.get("repo") or "the folder"
        notes.append(
            f"vllm.trust_remote_code: config.json names code of its own (auto_map); vLLM runs it only with "
            f"vllm.trust_remote_code: true, which runs {where}'s Python in the engine: set it only if vLLM "
            "does not support the architecture itself and you trust the code"
        )
    sampling = {k: generation[k] for k in SAMPLING if isinstance(generation, dict) and _number(generation.get(k))}
    if sampling:
        said = ", ".join(f"{k} {v:g}" for k, v in sampling.items())
        notes.append(
            f"generation_config.json sets {said}: vLLM uses {'them' if len(sampling) > 1 else 'it'} as the default of requests that set none"
        )
    return notes


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < 1e6
