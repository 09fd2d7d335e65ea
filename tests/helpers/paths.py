"""Where things are: the checkout, its examples, and the test data folders (kept beside the tests,
found from here so a test file can live in any folder)."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
ROOT = TESTS.parent
EXAMPLES = ROOT / "examples"
CORPUS = TESTS / "corpus"  # hostile aigo.yaml files and what refusing each must say (expected.json)
GOLDEN = TESTS / "golden"  # the container definitions every example must render to
FIXTURES = TESTS / "fixtures"  # recorded Docker API answers and host facts (fixtures/hosts)
