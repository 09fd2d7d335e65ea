"""The package is typed ("a typed spec"): the type checker runs strict over all of it, and
`Any` is kept under a ceiling that may only fall: at most half of the 918 counted when the typed spec
was asked for. `Any` is counted as it was counted then, the word anywhere in the package's files
(`grep -rwo Any aigo_apply`). What would lower the count without typing anything (a `# type: ignore`,
a `cast`) is held under its own ceiling, so that the count says what it seems to."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import aigo_apply

PACKAGE = Path(aigo_apply.__file__).parent
ROOT = PACKAGE.parent
ASKED = 918 // 2  # at most half of the count when the typed spec was asked for
CEILING = 42  # today's count; lower it as modules are typed, never raise it
IGNORES = 4  # `# type: ignore[...]`, each on a call into a library without types (PyYAML's resolver, httpx's kwargs)
CASTS = 2


def _count(pattern: str) -> int:
    return sum(len(re.findall(pattern, p.read_text(encoding="utf-8"))) for p in PACKAGE.rglob("*.py"))


def test_any_is_under_its_ceiling():
    assert _count(r"\bAny\b") <= CEILING


def test_the_ceiling_is_what_was_asked():
    assert CEILING <= ASKED, f"`Any` is at {CEILING}; the typed spec asks for at most {ASKED}"


def test_no_count_is_lowered_by_silencing_the_checker():
    assert _count(r"#\s*type:\s*ignore") <= IGNORES
    assert _count(r"\bcast\(") <= CASTS
    assert _count(r"no_type_check") == 0


def test_mypy_is_strict_over_the_whole_package():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert config.get("strict") is True
    for override in config.get("overrides", []):
        # only libraries without type information are let off, never a module of the package
        assert set(override) <= {"module", "ignore_missing_imports"}, override
        modules = override["module"] if isinstance(override["module"], list) else [override["module"]]
        assert not any(m.startswith("aigo_apply") for m in modules), override
