"""Numbers written the way vLLM reads them: `32k` is 32000 tokens, `32K` is 32768."""

from __future__ import annotations

import re

_HUMAN = re.compile(r"^(?P<num>\d+(?:\.\d+)?)(?P<unit>[kmgtKMGT]?)\Z")
_POWERS = {"k": 1, "m": 2, "g": 3, "t": 4}


def parse_token_count(value: int | str) -> int:
    """Parse like vLLM's human_readable_int: k/m/g/t are powers of 1000 (decimals allowed),
    K/M/G/T powers of 1024 (integers only). Raises ValueError with a sentence for people."""
    if isinstance(value, bool):
        raise ValueError("must be a number of tokens, not true/false")
    if isinstance(value, int):
        return value
    text = value.strip()
    if text.lower() in ("auto", "-1"):
        raise ValueError(
            f"'{value}' lets vLLM pick the length at start-up; aigo-apply needs the number (the router and the fit check use it), e.g. 32768 or 32K"
        )
    match = _HUMAN.match(text)
    if not match:
        raise ValueError(
            f"'{value}' is not a token count; write an integer such as 32768, or 32k (=32000) / 32K (=32768)"
        )
    num, unit = match["num"], match["unit"]
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
    result = float(num) * 1000**power
    if result != int(result):
        raise ValueError(f"'{value}' is not a whole number of tokens")
    return int(result)
