"""Checks a loaded aigo.yaml against schemas/aigo.schema.json and words each failure for people.

jsonschema finds every failure; this module rewrites each one into a path-first sentence at the
right line ("unknown key 'tool_call_parsr' (did you mean 'tool_call_parser'?)"), using the
schema's own `x-error` texts where a generic message would confuse.
"""

from __future__ import annotations

import copy
import difflib
import math
from functools import cache
from typing import TYPE_CHECKING, Any

from aigo_apply.config.defaults import ROUTER_DEFAULT_TAG
from aigo_apply.config.doc_path import dotted
from aigo_apply.config.engine_choice import engine_of
from aigo_apply.config.engine_kinds import ENGINES, VLLM
from aigo_apply.config.other_tools import free_form, written_as_text
from aigo_apply.config.secret_values import credential_kind
from aigo_apply.config.vllm_facts import (
    COMPILATION_FLAGS,
    ENUM_SETTINGS,
    VLLM_VERSION,
    config_release,
    methods_needing_draft,
    names,
    needs_loader_config,
    optimization_levels,
    speculative_methods,
    unknown_compilation,
)
from aigo_apply.config.vllm_flags import renamed
from aigo_apply.config.yaml_source import Path_, Source
from aigo_apply.errors import Problem
from aigo_apply.json_types import JsonObject, JsonValue, obj
from aigo_apply.resources import schema_data

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

SCHEMA_FILE = "aigo.schema.json"

_TYPE_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a finite number",
    "boolean": "true or false",
    "null": "empty",
}


@cache
def schema() -> dict[str, Any]:
    """The config schema as this tool applies it: every `pattern` anchored at the very end of the
    string (`\\Z`; Python's `$` also matches before a final newline, so `"m1\\n"` would pass)."""
    data = _whole_string(copy.deepcopy(schema_data(SCHEMA_FILE)))
    assert isinstance(data, dict), "the schema is a JSON object"
    return data


def _whole_string(node: JsonValue) -> JsonValue:
    if isinstance(node, dict):
        out: JsonObject = {}
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                out[key] = _anchor_end(value)
            elif key == "patternProperties" and isinstance(value, dict):
                out[key] = {_anchor_end(k): _whole_string(v) for k, v in value.items()}
            else:
                out[key] = _whole_string(value)
        return out
    if isinstance(node, list):
        return [_whole_string(v) for v in node]
    return node


def _anchor_end(pattern: str) -> str:
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        return pattern[:-1] + "\\Z"
    return pattern


def release_schema(release: str) -> dict[str, Any]:
    """The schema with the name lists of another vLLM release (its facts file) in place of v0.31.0's;
    a start-up setting the release has no flag for is refused there, naming the release."""
    if release == VLLM_VERSION:
        return schema()
    data = copy.deepcopy(schema())  # schema() is shared (cached): never edited in place
    settings = data["$defs"]["vllmSettings"]["properties"]
    for setting in ENUM_SETTINGS:
        settings[setting]["enum"] = names(setting, release)
    speculative = settings["speculative"]
    speculative["properties"]["method"]["enum"] = speculative_methods(release)
    speculative["if"]["properties"]["method"]["enum"] = methods_needing_draft(release)
    compilation = settings["compilation"]["properties"]
    compilation["optimization_level"]["enum"] = optimization_levels(release)
    for key in COMPILATION_FLAGS:
        why = unknown_compilation(key, release)
        if why:
            compilation[key] = {"not": {}, "x-error": why}
    return data


@cache
def _validator(release: str = VLLM_VERSION) -> Draft202012Validator:
    # imported only when a file must really be validated
    from jsonschema import Draft202012Validator, validators

    def is_integer(_: object, value: object) -> bool:  # 19100.0 is not an integer here (jsonschema says it is)
        return isinstance(value, int) and not isinstance(value, bool)

    def is_number(_: object, value: object) -> bool:  # .nan and .inf are refused wherever a number goes
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

    checker = Draft202012Validator.TYPE_CHECKER.redefine_many({"integer": is_integer, "number": is_number})
    strict = validators.extend(Draft202012Validator, type_checker=checker)
    validator: Draft202012Validator = strict(release_schema(release))
    return validator


def validate(source: Source) -> list[Problem]:
    """Every schema failure of `source.data`, one Problem each, without duplicates."""
    problems: list[Problem] = []
    release = config_release(source.data)
    errors = [e for found in _validator(release).iter_errors(source.data) for e in _in_branch(found)]
    paths_with_specific = {tuple(e.absolute_path) for e in errors if e.validator not in ("oneOf", "anyOf")}
    for error in errors:
        path = tuple(error.absolute_path)
        if error.validator in ("oneOf", "anyOf") and path in paths_with_specific:
            continue  # a more precise message about the same place is already there
        problems.extend(_explain(error, path, source, release))
    return sorted(set(problems))


def _in_branch(error: ValidationError) -> list[ValidationError]:
    """A mapping that fails a choice of branches (`canary: false` or `{...}`) where exactly one branch
    takes a mapping: that branch's own failures, each at its key and with its bound
    (`models.a.canary.requests: must be at least 1, not 0`), instead of "not valid under any of the
    given schemas"."""
    branches = error.validator_value if error.validator in ("oneOf", "anyOf") else None
    if not isinstance(error.instance, dict) or not isinstance(branches, list):
        return [error]
    taking = [n for n, b in enumerate(branches) if isinstance(b, dict) and b.get("type") == "object"]
    inner = [e for e in error.context or [] if len(taking) == 1 and e.relative_schema_path[0] == taking[0]]
    return inner or [error]


def _explain(error: ValidationError, path: Path_, source: Source, release: str = VLLM_VERSION) -> list[Problem]:
    marks, file = source.marks, source.file
    kind, value = error.validator, error.instance

    def at_value(message: str, where: Path_ = path) -> Problem:
        line, col = marks.of_value(where)
        if where in marks.written and kind not in _NUMBER_BOUNDS and _wants_text(error.schema, marks.written[where]):
            message += _quote_hint(marks.written[where], value)
        return Problem(line, col, dotted(where), message, file)

    if kind == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        out = []
        for key in sorted(k for k in value if k not in allowed):
            line, col = marks.of_key(path + (key,))
            message = (
                _in_vllm_words(path, key, source.data) or free_form(path, key, allowed) or _unknown_key(key, allowed)
            )
            out.append(Problem(line, col, dotted(path + (key,)), message, file))
        return out
    if kind == "required":
        missing = [k for k in error.validator_value if k not in value]
        line, col = marks.of_key(path) if path else (1, 1)
        why = _draft_needed(value) if "then" in error.schema_path and missing == ["draft"] else ""
        return [Problem(line, col, dotted(path), f"missing required key '{k}'{why}", file) for k in missing]
    if kind == "pattern" and "propertyNames" in error.schema_path:
        line, col = marks.of_key(path + (value,))
        return [
            Problem(
                line,
                col,
                dotted(path + (value,)),
                f"{value!r} is not a valid environment variable name (letters, digits and '_', not starting with a digit)",
                file,
            )
        ]
    custom = error.schema.get("x-error") if isinstance(error.schema, dict) else None
    if kind == "type" and not custom:
        return [at_value(f"must be {_expected(error.validator_value)}, not {_describe(value)}")]
    if kind == "enum":
        return [at_value(_enum_message(path, value, list(error.validator_value), release))]
    if kind in _NUMBER_BOUNDS:
        return [at_value(f"must be {_NUMBER_BOUNDS[kind]} {error.validator_value}, not {value!r}")]
    if kind == "maxProperties":
        return [at_value(f"has {len(value)} entries; at most {error.validator_value} are allowed here")]
    if path[-1:] == ("image_tag",) and value in (None, ""):
        line, col = marks.of_value(path)
        return [Problem(line, col, dotted(path), _empty_tag(path), file)]
    if kind == "pattern" and path[-1] in ("image", "image_tag") and "@sha256:" in str(value):
        return [at_value(_DIGEST)]
    if kind == "pattern" and path[-3:] == ("engines", "vllm", "image_tag") and ":" in str(value):
        tag = str(value).rsplit(":", 1)[1]
        return [at_value(f"write only the tag here, e.g. image_tag: {tag} (the repository goes in engines.vllm.image)")]
    if custom and (hint := written_as_text(path, value, _describe(value))):
        return [at_value(hint)]
    if custom:
        return [at_value(f"{custom} (got {_describe(value)})" if kind != "const" else custom)]
    return [at_value(error.message)]


_DIGEST = (
    "an image digest (@sha256:...) is not written in the file: image takes a repository and image_tag a tag; "
    "aigo.lock records the image id each tag installed, and `aigo-apply apply --locked` installs exactly it"
)


def _draft_needed(speculative: object) -> str:
    """Why a speculative method needs `draft` (the schema's if/then, from vLLM's own check)."""
    method = speculative.get("method") if isinstance(speculative, dict) else None
    return (
        f": method '{method}' decodes with a separate draft checkpoint, and vLLM refuses it without one;"
        " add draft: {repo: ORG/NAME} or {path: /folder}, or pick a method that needs none (mtp, ngram)"
    )


def _empty_tag(path: Path_) -> str:
    """An `image_tag:` written with no value: the fix is to remove the line, or to name a tag."""
    engine = "router" if path[:1] == ("router",) else str(path[-2])
    kind = ENGINES.get(engine)
    default = ROUTER_DEFAULT_TAG if engine == "router" else kind.default_tag if kind else None
    if default:
        return f"is empty: remove the line to use {default} (or write a tag)"
    example = kind.tag_example if kind else "a tag"
    return f"is empty: {engine} has no built-in tag, so write one (such as {example}), or remove the line if no model runs on {engine}"


_NUMBER_BOUNDS = {
    "minimum": "at least",
    "maximum": "at most",
    "exclusiveMinimum": "greater than",
    "exclusiveMaximum": "less than",
}


def _wants_text(schema: object, written: str) -> bool:
    """Whether the place takes text that YAML read as something else: only then is "quote it" the fix
    (a port written 19100.0 wants 19100, not "19100.0"; `gpu_layers: -1` wants 'all' or a count,
    and quoting -1 would not help). A choice of branches wants text when one branch takes it."""
    if not isinstance(schema, dict):
        return True
    branches = schema.get("oneOf") or schema.get("anyOf")
    if isinstance(branches, list):
        return any(_wants_text(branch, written) for branch in branches)
    if "const" in schema:
        return bool(schema["const"] == written)
    if "enum" in schema:
        return written in schema["enum"]
    kinds = schema.get("type")
    kinds = set(kinds) if isinstance(kinds, list) else {kinds} if kinds else set()
    if kinds and "string" not in kinds:  # a mapping, a list, true/false: quoting gives none of them
        return False
    return not (kinds & {"integer", "number"}) and not (kinds == {"boolean"})


def _quote_hint(written: str, value: object) -> str:
    """YAML turned the text written into a number, boolean or null: say so, and how to keep the text."""
    if not written:
        return "; nothing is written here (YAML reads it as empty): write a value"
    quoted = '"' + written.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"; YAML reads {written} as {_describe(value)}: quote it ({quoted}) to mean the text"


def _unknown_key(key: str, allowed: list[str]) -> str:
    hint = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    if hint:
        return f"unknown key '{key}' (did you mean '{hint[0]}'?)"
    return f"unknown key '{key}'; allowed here: {', '.join(allowed)}"


def _in_vllm_words(path: Path_, key: str, data: JsonValue) -> str | None:
    """An unknown key written as vLLM's flag or setting name (config/vllm_flags.py), with the key of
    this file that writes it: "unknown key 'max_model_len' (did you mean 'context_length'? ...)". An
    engine setting goes to the model's engine's block when that has it (sglang.gpu_memory_utilization)."""
    found = renamed(path, key)
    if found is None:
        return None
    target, flag = found
    if not target:
        return f"unknown key '{key}': aigo-apply writes vLLM's {flag} itself (" + (
            "the model's alias, its key under models:)" if flag == "--served-model-name" else "the engine's socket)"
        )
    setting = target.removeprefix("vllm.")
    if setting != target:
        document = obj(data)  # the unknown key is in it: a mapping
        model = obj(document.get("models")).get(str(path[1])) if len(path) == 2 else {}
        engine = engine_of(model, document.get("defaults")) if len(path) == 2 else VLLM.name
        if engine != VLLM.name:  # the hint table is vLLM's flags (config/vllm_flags.py)
            block = ENGINES[engine].settings_def
            if setting not in schema()["$defs"][block]["properties"]:
                return None
            return f"unknown key '{key}' (did you mean '{engine}.{setting}'? the model runs on {engine})"
    where = setting if len(path) == 3 and setting != target else target
    if len(path) == 3 and setting == target:
        where = f"{target}' at the model's level, not under 'vllm"
    return f"unknown key '{key}' (did you mean '{where}'? vLLM's {flag} is {target} in aigo.yaml)"


def _enum_message(path: Path_, value: object, choices: list[JsonValue], release: str = VLLM_VERSION) -> str:
    setting = path[-1] if path and path[-1] in ENUM_SETTINGS and "vllm" in path else None
    if path[-2:] == ("speculative", "method"):
        setting = "speculative method"
    if path[-2:] == ("compilation", "optimization_level"):
        return f"{_describe(value)} is not an optimization level vLLM v{release} has: one of {', '.join(map(str, choices))}"
    if setting == "load_format" and value in needs_loader_config(release):
        return (
            f"vLLM v{release} cannot load with {value!r} unless --model-loader-extra-config gives its loader's "
            f"settings, which aigo.yaml does not write; choose another: {', '.join(map(str, choices))}"
        )
    what = f"a {setting} that vLLM v{release} knows" if setting else "one of " + ", ".join(map(str, choices))
    message = f"{_describe(value)} is not {what}"
    if isinstance(value, str):
        normal = value.strip().lower().replace("-", "_")
        strings = [c for c in choices if isinstance(c, str)]
        exact = [c for c in strings if c.lower().replace("-", "_") == normal]
        hint = exact[:1] or difflib.get_close_matches(normal, strings, n=1, cutoff=0.6)
        if hint:
            return f"{message} (did you mean '{hint[0]}'?)"
    if setting:
        return f"{message}; run `aigo-apply validate` after choosing one of: {', '.join(map(str, choices))}"
    return message


def _expected(types: str | list[str]) -> str:
    """The words for a `type` of the schema: one name, or a list of them."""
    names = [types] if isinstance(types, str) else list(types)
    return " or ".join(_TYPE_WORDS.get(t, t) for t in names)


def _describe(value: object) -> str:
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return f"{str(value).lower()} (true/false)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str) and (kind := credential_kind(value)):
        return f"<{kind}, not shown>"
    if isinstance(value, str):
        shown = value if len(value) <= 60 else value[:57] + "..."
        return f"'{shown}'" if shown.isprintable() else repr(shown)
    return repr(value)
