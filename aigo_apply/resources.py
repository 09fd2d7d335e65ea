"""Finds the data files that ship with aigo-apply (schemas/, templates/).

In a built wheel they live inside the package under `_data/`; in a source checkout or an editable
install they are the top-level folders of the repository. Callers never need to know which.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

_PACKAGE = Path(__file__).resolve().parent


@cache
def data_dir(name: str) -> Path:
    """Return the folder `schemas` or `templates`, wherever this installation keeps it."""
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"aigo-apply is installed without its {name}/ folder; reinstall it")


@cache
def schema_data(name: str) -> dict[str, Any]:
    """A JSON document under schemas/ (the config schema, the plan schema, the vLLM facts), read once."""
    data: dict[str, Any] = json.loads((data_dir("schemas") / name).read_text(encoding="utf-8"))
    return data
