"""Numbers written the way vLLM reads them: `32k` is 32000 tokens, `32K` is 32768.

Only the ASCII digits 0-9, and the whole text: Python's int() and float() also take other scripts'
digits (fullwidth U+FF14, Arabic-Indic U+0664, ...), spaces around the number and `_` between
digits, none of which a reviewer would expect; the number of tokens is computed exactly (no float
rounding)."""

from __future__ import annotations

import re

_HUMAN = re.compile(r"(?P<num>[0-9]+(?:\.[0-9]+)?)(?P<unit>[kmgtKMGT]?)\Z", re.ASCII)
_POWERS = {"k": 1, "m": 2, "g": 3, "t": 4}
_MAX_DIGITS = 30  # far above any context length; keeps the arithmetic small


def parse_token_count(value: int | str) -> int:
    """Parse like vLLM's human_readable_int: k/m/g/t are powers of 1000 (decimals allowed),
    K/M/G/T powers of 1024 (integers only). Raises ValueError with a sentence for people."""
    if isinstance(value, bool):
        raise ValueError("must be a number of tokens, not true/false")
    if isinstance(value, int):
        return value
    if value.lower() in ("auto", "-1"):
        raise ValueError(
            f"'{value}' lets vLLM pick the length at start-up; aigo-apply needs the number (the router and the fit check use it), e.g. 32768 or 32K"
        )
    match = _HUMAN.match(value)
    if not match:
        raise ValueError(f"{_shown(value)} is not a token count; {_why_not(value)}")
    num, unit = match["num"], match["unit"]
    if len(num) > _MAX_DIGITS:
        raise ValueError(f"'{value[:20]}...' has more than {_MAX_DIGITS} digits; no context length is that long")
    if not unit:
        if "." in num:
            raise ValueError(f"'{value}' must be a whole number of tokens")
        return int(num)
    power = _POWERS[unit.lower()]
    if unit.isupper():
        if "." in num:
            raise ValueError(f"'{value}': decimals are only allowed with lowercase k/m/g/t (e.g. 25.6k)")
        scale: int = 1024**power  # typeshed types int ** int as Any (a negative power gives a float)
        return int(num) * scale
    from fractions import Fraction  # with decimal: only a decimal count such as 25.6k needs it

    result = Fraction(num) * 1000**power
    if result.denominator != 1:
        raise ValueError(f"'{value}' is not a whole number of tokens")
    return int(result)


def _shown(value: str) -> str:
    shown = value if len(value) <= 40 else value[:37] + "..."
    return repr(shown) if not shown.isascii() or not shown.isprintable() else f"'{shown}'"


def _why_not(value: str) -> str:
    """What to write instead, for the mistakes Python's int() would have let through."""
    other = next((c for c in value if not c.isascii()), None)
    if other is not None and other.isdigit():
        return f"it uses U+{ord(other):04X}, a digit other than 0-9: write the number with the ASCII digits 0-9"
    if value != value.strip():
        return "remove the spaces around the number"
    return "write an integer such as 32768, or 32k (=32000) / 32K (=32768)"
