"""No key or value of aigo.yaml may hold a character that hides text or moves it around (bidi
controls, line separators, format characters, controls, other invisible code points): each is
refused where it is written, naming the code point (config/invisible.py), and an engine's
environment is checked again where its container is made."""

from __future__ import annotations

import re

import pytest

from aigo_apply.config import invisible
from aigo_apply.desired.engines import common
from aigo_apply.errors import ConfigFileError, ConfigInvalid, UnsafeSetting
from aigo_apply.observe.config_file import load_config

HIDDEN = [
    ("\u202e", "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
    ("\u202a", "U+202A (LEFT-TO-RIGHT EMBEDDING)"),
    ("\u202b", "U+202B"),
    ("\u202c", "U+202C (POP DIRECTIONAL FORMATTING)"),
    ("\u202d", "U+202D"),
    ("\u2066", "U+2066 (LEFT-TO-RIGHT ISOLATE)"),
    ("\u2067", "U+2067"),
    ("\u2068", "U+2068"),
    ("\u2069", "U+2069 (POP DIRECTIONAL ISOLATE)"),
    ("\u200e", "U+200E (LEFT-TO-RIGHT MARK)"),
    ("\u200f", "U+200F (RIGHT-TO-LEFT MARK)"),
    ("\u061c", "U+061C (ARABIC LETTER MARK)"),
    ("\u2028", "U+2028 (LINE SEPARATOR)"),
    ("\u2029", "U+2029 (PARAGRAPH SEPARATOR)"),
    ("\ufeff", "U+FEFF (ZERO WIDTH NO-BREAK SPACE)"),
    ("\u200b", "U+200B (ZERO WIDTH SPACE)"),
    ("\u200d", "U+200D (ZERO WIDTH JOINER)"),
    ("\u2060", "U+2060 (WORD JOINER)"),
    ("\u00ad", "U+00AD (SOFT HYPHEN)"),
    ("\U000e0041", "U+E0041 (TAG LATIN CAPITAL LETTER A)"),
    ("\u0085", "U+0085, a control character"),
    ("\u009b", "U+009B, a control character"),
    ("\x1b", "U+001B, a control character"),
    ("\x00", "U+0000, a control character"),
    ("\x7f", "U+007F, a control character"),
    ("\x0b", "U+000B, a control character"),
    ("\u3164", "U+3164 (HANGUL FILLER)"),
    ("\ufe0f", "U+FE0F (VARIATION SELECTOR-16)"),
    ("\u034f", "U+034F (COMBINING GRAPHEME JOINER)"),
    ("\ue000", "U+E000, a private-use character"),
    ("\U000f0000", "U+F0000, a private-use character"),
    ("\uffff", "U+FFFF, an unassigned code point"),
]
WHERE = {
    "env value": (
        'models:\n  m: {source: {path: /srv/models/m}, context_length: 4096, gpus: none, env: {A: "a%sb"}}\n',
        "models.m.env.A",
    ),
    "path": (
        'models:\n  m: {source: {path: "/srv/models/m%s"}, context_length: 4096, gpus: none}\n',
        "models.m.source.path",
    ),
    "secret file": (
        'models:\n  m: {source: {path: /srv/m}, context_length: 4096, gpus: none, env: {A: {from_file: "/srv/s%s"}}}\n',
        "models.m.env.A.from_file",
    ),
    "repo": (
        'models:\n  m: {source: {repo: "org/na%sme"}, context_length: 4096, gpus: none}\n',
        "models.m.source.repo",
    ),
    "image tag": ('engines:\n  vllm: {image_tag: "v0%s"}\nmodels: {}\n', "engines.vllm.image_tag"),
}


def problems(tmp_path, body: str, project: str = "p") -> list[str]:
    path = tmp_path / "aigo.yaml"
    path.write_text(f'version: 1\nproject: "{project}"\n' + body, encoding="utf-8")
    try:
        load_config(str(path))
    except ConfigInvalid as exc:
        return [p.format().replace(str(path), "F") for p in exc.problems]
    return []


def escaped(char: str) -> str:
    """The character as a YAML double-quoted escape: a file can carry any of them this way."""
    return f"\\U{ord(char):08x}"


@pytest.mark.parametrize("char, named", HIDDEN)
@pytest.mark.parametrize("where", sorted(WHERE))
def test_a_hidden_character_is_refused_in_any_value_naming_the_code_point(tmp_path, where, char, named):
    body, path = WHERE[where]
    found = [p for p in problems(tmp_path, body % escaped(char)) if "shows nothing or moves the text" in p]
    assert len(found) == 1, found
    assert found[0].startswith("F:") and f"{path}: the value holds {named}" in found[0]
    assert char not in found[0]  # the message shows the code point, never the character itself


@pytest.mark.parametrize("char, named", HIDDEN)
def test_a_hidden_character_is_refused_in_an_alias_and_an_env_name(tmp_path, char, named):
    model = "{source: {path: /srv/models/m}, context_length: 4096, gpus: none}"
    found = problems(tmp_path, f'models:\n  "m{escaped(char)}": {model}\n')
    assert any(f"this name holds {named}" in p and p.startswith("F:4:3:") for p in found), found
    env = f'{{source: {{path: /srv/models/m}}, context_length: 4096, gpus: none, env: {{"A{escaped(char)}": x}}}}'
    assert any(f"this name holds {named}" in p for p in problems(tmp_path, f"models:\n  m: {env}\n"))


# As themselves (not escaped): all but the line breaks (YAML breaks the value there, and refuses a
# value written over several lines); YAML's own reader refuses some others before any check.
@pytest.mark.parametrize("char, named", [(c, n) for c, n in HIDDEN if c not in "\u2028\u2029\x85"])
def test_a_hidden_character_written_as_itself_is_refused_too(tmp_path, char, named):
    body = 'models:\n  m: {source: {path: /srv/models/m}, context_length: 4096, gpus: none, env: {A: "a%sb"}}\n'
    try:
        found = problems(tmp_path, body % char)
    except ConfigFileError as exc:
        # YAML's reader, or the whole-file check (characters that reorder or break lines, even in comments)
        assert f"unacceptable character #x{ord(char):04x}" in str(exc) or f"holds {named.split(' ')[0]}" in str(exc)
        return
    assert any(f"models.m.env.A: the value holds {named}" in p for p in found), found


@pytest.mark.parametrize("text", ["café", "模型", "Ελληνικά", "emoji 🙂", "tab\tinside", "a b", "ﬁ ligature", "مرحبا"])
def test_visible_text_in_any_script_passes(tmp_path, text):
    body = 'models:\n  m: {source: {path: /srv/models/m}, context_length: 4096, gpus: none, env: {A: "%s"}}\n'
    assert problems(tmp_path, body % text.replace("\t", "\\t")) == []
    assert invisible.hidden_character(text) is None


@pytest.mark.parametrize("char, named", HIDDEN)
def test_an_engine_never_gets_a_hidden_character_if_validation_was_bypassed(char, named):
    spec = {"gpus": "none", "image": "vllm/vllm-openai:v0.31.0", "port": 20000, "env": {"A": f"x{char}y"}}
    expected = re.escape(f"refusing to give the engine A: the value holds {named.split(' ')[0]}")
    with pytest.raises(UnsafeSetting, match=expected):
        common.engine_container("p", "m", spec, ["x"], [], 8000)


def test_the_first_hidden_character_is_the_one_named():
    assert invisible.hidden_character("ok\u200b then \u202e") == "U+200B (ZERO WIDTH SPACE), a format character"
    assert invisible.problem("plain") is None


# For yaml_source.read_text (another module's change): the whole file, comments included.
@pytest.mark.parametrize(
    "text, where, named",
    [
        ("version: 1\n# note\u2028project: x\n", (2, 7), "U+2028 (LINE SEPARATOR)"),
        ("version: 1\n# note\u2029project: x\n", (2, 7), "U+2029 (PARAGRAPH SEPARATOR)"),
        ("version: 1\n# note\x85project: x\n", (2, 7), "U+0085 (NEXT LINE)"),
        ("version: 1\n# note\rproject: x\n", (2, 7), "U+000D (CARRIAGE RETURN)"),
        ("version: 1 # \u202eelif\n", (1, 14), "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
        ("a: 1\nb: 2  # \u2067x\u2069\n", (2, 9), "U+2067 (RIGHT-TO-LEFT ISOLATE)"),
    ],
)
def test_a_line_break_only_yaml_sees_or_a_reordering_is_found_anywhere_in_the_file(text, where, named):
    found = invisible.in_file(text)
    assert found is not None and found[:2] == where and f"holds {named}" in found[2]


def test_ordinary_files_have_none():
    assert invisible.in_file("version: 1\r\nproject: x  # café 模型 🙂\r\n") is None
