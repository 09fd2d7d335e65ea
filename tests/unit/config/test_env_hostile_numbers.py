"""A number written as text (context_length: `32k`, `32K`) is read from the ASCII digits 0-9 and the
whole text only: Python's int() would also take other scripts' digits, spaces around the number and
`_` between digits (config/units.py)."""

from __future__ import annotations

import re

import pytest

from aigo_apply.config.units import parse_token_count
from aigo_apply.errors import ConfigInvalid
from aigo_apply.observe.config_file import load_config

HOSTILE = [
    ("４０９６", "U+FF14, a digit other than 0-9"),  # fullwidth
    ("٤٠٩٦", "U+0664, a digit other than 0-9"),  # Arabic-Indic
    ("۴۰۹۶", "U+06F4, a digit other than 0-9"),  # extended Arabic-Indic
    ("४०९६", "U+096A, a digit other than 0-9"),  # Devanagari
    ("4０96", "U+FF10, a digit other than 0-9"),  # one digit swapped
    ("32ｋ", "not a token count"),
    ("３２K", "U+FF13, a digit other than 0-9"),
    ("4096²", "U+00B2, a digit other than 0-9"),
    ("𝟒𝟎𝟗𝟔", "U+1D7D2, a digit other than 0-9"),  # mathematical bold digits
    ("4096 ", "remove the spaces around the number"),
    (" 4096", "remove the spaces around the number"),
    ("\t4096", "remove the spaces around the number"),
    ("32k ", "remove the spaces around the number"),
    ("4096\u00a0", "remove the spaces around the number"),
    ("4096\u3000", "remove the spaces around the number"),
    ("4_096", "not a token count"),
    ("+4096", "not a token count"),
    ("0x1000", "not a token count"),
    ("4e3", "not a token count"),
    ("32 k", "not a token count"),
    (" auto", "remove the spaces around the number"),
    ("9" * 31 + "k", "more than 30 digits"),
]


def problems(tmp_path, context_length: str) -> list[str]:
    path = tmp_path / "aigo.yaml"
    path.write_text(
        "version: 1\nproject: p\nmodels:\n"
        f'  m: {{source: {{path: /srv/models/m}}, context_length: "{context_length}", gpus: none}}\n',
        encoding="utf-8",
    )
    try:
        load_config(str(path))
    except ConfigInvalid as exc:
        return [p.format().replace(str(path), "F") for p in exc.problems]
    return []


@pytest.mark.parametrize("written, why", HOSTILE)
def test_a_token_count_is_ascii_digits_and_nothing_around_them(tmp_path, written, why):
    escaped = written.replace("\t", "\\t")
    found = problems(tmp_path, escaped)
    assert any(p.startswith("F:4:") and "models.m.context_length: " in p and why in p for p in found), found
    with pytest.raises(ValueError, match=re.escape(why)):
        parse_token_count(written)


@pytest.mark.parametrize(
    "written, tokens",
    [
        ("4096", 4096),
        ("32k", 32000),
        ("32K", 32768),
        ("25.6k", 25600),
        ("1.001k", 1001),
        ("0.5m", 500000),
        ("1M", 1048576),
    ],
)
def test_the_forms_vllm_reads_are_exact(tmp_path, written, tokens):
    assert parse_token_count(written) == tokens
    assert problems(tmp_path, written) == []


def test_a_fraction_of_a_token_is_refused_whatever_float_rounding_would_say():
    with pytest.raises(ValueError, match="not a whole number"):
        parse_token_count("1.0001k")
