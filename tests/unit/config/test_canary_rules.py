"""A canary gate that can pass (config/canary_rules.py): prompt_tokens + max_tokens, however each is
given (the model's canary, defaults.canary, the built-in 256 + 64), must fit context_length, however
it is written (an integer, 32K, 32k); and every canary setting the schema refuses names its field and
its bound instead of "not valid under any of the given schemas"."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aigo_apply.config import canary_rules
from aigo_apply.config.finder import Finder
from aigo_apply.config.yaml_source import load_text
from aigo_apply.errors import ConfigInvalid
from aigo_apply.observe.config_file import load_config

from helpers.configs import write_config

HEAD = "version: 1\nproject: lab\n"


def _model(context: str, canary: str = "") -> str:
    return f"  a:\n    source: {{repo: org/m}}\n    context_length: {context}\n    gpus: none\n" + (
        f"    canary: {canary}\n" if canary else ""
    )


def _problems(tmp_path, text: str) -> list[str]:
    path = write_config(tmp_path, text)
    try:
        load_config(str(path))
    except ConfigInvalid as exc:
        return [p.format().replace(str(path), "F") for p in exc.problems]
    return []


def _canary_problems(text: str) -> list[str]:
    source = load_text(text, "F")
    finder = Finder(source)
    canary_rules.check(source.data, source.data.get("models", {}), finder)
    return [p.format() for p in finder.problems]


@pytest.mark.parametrize(
    "context, tokens",
    [("300", 300), ("'300'", 300), ("1K", 1024), ("1k", 1000), ("2K", 2048), ("0.5k", 500)],
    ids=["int", "quoted", "1K", "1k", "2K", "0.5k"],
)
def test_a_canary_longer_than_the_context_is_refused_for_every_way_of_writing_context_length(tmp_path, context, tokens):
    need = tokens + 1
    text = HEAD + "models:\n" + _model(context, f"{{prompt_tokens: {need - 64}}}")
    found = _problems(tmp_path, text)
    assert len(found) == 1, found
    line = found[0]
    assert line.startswith("F:8:14: models.a.canary.prompt_tokens: the canary's requests take ")
    assert (
        f"take {need} tokens each (prompt_tokens {need - 64} from models.a.canary + max_tokens 64 by default)" in line
    )
    assert f"more than context_length {context.strip(chr(39))}" in line
    assert f"add up to at most {tokens}, or raise context_length" in line
    # exactly the context: it fits
    fits = HEAD + "models:\n" + _model(context, f"{{prompt_tokens: {tokens - 64}}}")
    assert _problems(tmp_path, fits) == []


def test_the_built_in_request_counts_against_a_short_context(tmp_path):
    found = _problems(tmp_path, HEAD + "models:\n" + _model("319", "{}"))
    assert found == [
        "F:8:5: models.a.canary: the canary's requests take 320 tokens each (prompt_tokens 256 by default + "
        "max_tokens 64 by default), more than context_length 319 holds, so the engine would refuse them and no "
        "replace of this model could pass its gate; lower prompt_tokens or max_tokens in models.a.canary so that "
        "they add up to at most 319, or raise context_length"
    ]
    assert _problems(tmp_path, HEAD + "models:\n" + _model("320", "{}")) == []


def test_a_gate_from_defaults_is_checked_against_each_models_own_context(tmp_path):
    text = (
        HEAD
        + "defaults:\n  canary: {prompt_tokens: 1000, max_tokens: 100}\nmodels:\n"
        + _model("1100")
        + _model("1099").replace("  a:", "  b:")
        + _model("1099", "false").replace("  a:", "  c:")
        + _model("1099", "{max_tokens: 99}").replace("  a:", "  d:")
    )
    found = _problems(tmp_path, text)
    assert len(found) == 1, found
    assert found[0].startswith("F:10:3: models.b.canary: the canary's requests take 1100 tokens each ")
    assert "(prompt_tokens 1000 from defaults.canary + max_tokens 100 from defaults.canary)" in found[0]
    assert "at most 1099" in found[0]


def test_a_model_gate_over_a_default_false_is_still_checked(tmp_path):
    text = HEAD + "defaults:\n  canary: false\nmodels:\n" + _model("100", "{max_tokens: 8}")
    found = _problems(tmp_path, text)
    assert len(found) == 1 and "models.a.canary.max_tokens: the canary's requests take 264 tokens" in found[0]


@pytest.mark.parametrize("context", ["auto", "-1", "4x", "0"])
def test_a_context_length_that_is_not_a_count_gets_its_own_error_only(tmp_path, context):
    found = _problems(tmp_path, HEAD + "models:\n" + _model(context, "{}"))
    assert found and not any("canary" in line for line in found), found


@settings(max_examples=200, deadline=None)
@given(
    context=st.integers(1, 300_000),
    prompt=st.one_of(st.none(), st.integers(1, 131072)),
    output=st.one_of(st.none(), st.integers(1, 16384)),
    default_prompt=st.one_of(st.none(), st.integers(1, 131072)),
    unit=st.sampled_from(["", "K"]),
)
def test_refused_exactly_when_the_merged_request_does_not_fit(context, prompt, output, default_prompt, unit):
    written = f"{max(1, context // 1024)}K" if unit else str(context)
    tokens = max(1, context // 1024) * 1024 if unit else context
    own = {k: v for k, v in (("prompt_tokens", prompt), ("max_tokens", output)) if v is not None}
    common = f"defaults:\n  canary: {{prompt_tokens: {default_prompt}}}\n" if default_prompt else ""
    canary = "{" + ", ".join(f"{k}: {v}" for k, v in own.items()) + "}"
    found = _canary_problems(HEAD + common + "models:\n" + _model(written, canary))
    need = (prompt or default_prompt or 256) + (output or 64)
    assert bool(found) == (need > tokens), (need, tokens, found)
    if found:
        assert f"take {need} tokens each" in found[0] and f"at most {tokens}," in found[0]


@pytest.mark.parametrize(
    "setting, value, message",
    [
        ("max_slowdown", "1", "must be less than 1, not 1"),
        ("max_slowdown", "-0.1", "must be at least 0, not -0.1"),
        ("requests", "0", "must be at least 1, not 0"),
        ("requests", "1025", "must be at most 1024, not 1025"),
        ("concurrency", "0", "must be at least 1, not 0"),
        ("concurrency", "257", "must be at most 256, not 257"),
        ("prompt_tokens", "0", "must be at least 1, not 0"),
        ("prompt_tokens", "131073", "must be at most 131072, not 131073"),
        ("max_tokens", "0", "must be at least 1, not 0"),
        ("max_tokens", "16385", "must be at most 16384, not 16385"),
        ("seed", "-1", "must be at least 0, not -1"),
        ("seed", "4294967296", "must be at most 4294967295, not 4294967296"),
        ("requests", "x", "must be an integer, not 'x'"),
        ("compare_output", "3", "must be true or false, not 3"),
    ],
)
@pytest.mark.parametrize("where", ["model", "defaults"])
def test_every_canary_setting_out_of_bounds_names_its_field_and_bound(tmp_path, setting, value, message, where):
    block = f"{{{setting}: {value}}}"
    if where == "model":
        text, path, line = HEAD + "models:\n" + _model("200000", block), "models.a.canary", 8
    else:
        text, path, line = HEAD + f"defaults:\n  canary: {block}\nmodels:\n" + _model("200000"), "defaults.canary", 4
    found = [p for p in _problems(tmp_path, text) if f"{path}." in p]
    assert len(found) == 1 and found[0].startswith(f"F:{line}:"), found
    assert found[0].split(": ", 1)[1] == f"{path}.{setting}: {message}"


@pytest.mark.parametrize("value, got", [("true", "true (true/false)"), ("'no'", "'no'"), ("[1]", "a list")])
def test_a_canary_that_is_neither_a_mapping_nor_false_says_what_it_takes(tmp_path, value, got):
    found = _problems(tmp_path, HEAD + "models:\n" + _model("4096", value))
    assert found == [
        "F:8:13: models.a.canary: must be a mapping of canary settings (`{}` for the defaults) or false "
        f"(no gate for this model) (got {got})"
    ]


def test_an_unknown_canary_key_is_named_with_the_keys_allowed(tmp_path):
    found = _problems(tmp_path, HEAD + "models:\n" + _model("4096", "{max_token: 8}"))
    assert found == ["F:8:14: models.a.canary.max_token: unknown key 'max_token' (did you mean 'max_tokens'?)"]
