"""Characters that hide text: none may appear in any key or value of aigo.yaml.

Every text of the config reaches a place where a person reads it (the plan, labels, logs, the
terminal) and most reach a container (names, paths, environment values). Some code points show
nothing, or move the text around them, so that what is read is not what runs:
- bidirectional controls (U+202A-U+202E, U+2066-U+2069, U+200E/U+200F, U+061C) reverse or isolate
  the text after them ("Trojan Source");
- line and paragraph separators (U+2028, U+2029) and C1 controls such as NEL (U+0085) break a line
  in some viewers and not in others; C0 controls (but tab) and DEL drive terminals;
- every other format character (category Cf: zero-width spaces and joiners, U+FEFF, the tag
  characters U+E0000-U+E007F...) and the other default-ignorable code points (variation
  selectors, Hangul fillers, U+034F...) render as nothing;
- surrogates, private-use and unassigned code points have no meaning anyone can review.
A value that needs none of these is unaffected; one that holds any is refused with the code point
(`U+202E (RIGHT-TO-LEFT OVERRIDE)`), so it can be found and removed in any editor.
"""

from __future__ import annotations

import functools
import re
import unicodedata

_ASCII = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # the ASCII ones: controls but tab, and DEL
_CATEGORIES = {
    "Cc": "a control character",
    "Cf": "a format character",
    "Cs": "a surrogate",
    "Co": "a private-use character",
    "Cn": "an unassigned code point",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
}
# Default_Ignorable_Code_Point (Unicode DerivedCoreProperties) outside the categories above.
_IGNORABLE = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xE0100, 0xE01EF),
)


def _why(char: str) -> str | None:
    if char == "\t":
        return None
    what = _CATEGORIES.get(unicodedata.category(char))
    if what is None and any(low <= ord(char) <= high for low, high in _IGNORABLE):
        what = "a character that is not displayed"
    return what


@functools.lru_cache(maxsize=1024)  # YAML aliases repeat one text many times
def hidden_character(text: str) -> str | None:
    """The first character of `text` that hides or moves text, described for a message
    (`U+202E (RIGHT-TO-LEFT OVERRIDE), a format character`), or None."""
    if text.isascii():
        found = _ASCII.search(text)
        bad = found.group() if found else None
    else:
        hidden = {char for char in set(text) if _why(char)}
        bad = next((char for char in text if char in hidden), None)
    if bad is None:
        return None
    name = unicodedata.name(bad, "")
    return f"U+{ord(bad):04X}{f' ({name})' if name else ''}, {_why(bad)}"


def problem(text: str, what: str = "the value") -> str | None:
    """A sentence for a located error when `text` holds a character that hides text, else None."""
    found = hidden_character(text)
    if found is None:
        return None
    return (
        f"{what} holds {found}: it shows nothing or moves the text around it, so plans, logs and "
        "terminals would not show what runs; remove it (retype the text if you cannot see it)"
    )


# Anywhere in the file, comments included: YAML breaks a line at NEL, U+2028, U+2029 and a lone CR
# where many editors and diff views do not (so text shown inside a comment is read as a key), and
# bidirectional controls make a line show in another order than the one YAML reads.
_IN_FILE = re.compile("[\x85\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]|\r(?!\n)")


def in_file(text: str) -> tuple[int, int, str] | None:
    """Line, column and a sentence for the first character of the whole file (comments included)
    that breaks a line only for YAML or reorders it on screen, or None (for yaml_source.read_text)."""
    found = _IN_FILE.search(text)
    if found is None:
        return None
    start = found.start()
    line = text.count("\n", 0, start) + 1
    column = start - (text.rfind("\n", 0, start) + 1) + 1
    char = found.group()
    name = unicodedata.name(char, {"\r": "CARRIAGE RETURN", "\x85": "NEXT LINE"}.get(char, ""))
    why = (
        "YAML reads it as a line break where many editors and diff views show none (text that looks like part "
        "of a comment is read as a key)"
        if char in "\x85\u2028\u2029\r"
        else "it shows the line in another order than the one YAML reads"
    )
    return line, column, f"holds U+{ord(char):04X} ({name}): {why}; remove it, even in a comment"
