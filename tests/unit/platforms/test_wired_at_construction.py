"""The drivers' executors and steps are wired at construction: no code in platforms/ (nor a test of
them) sets an attribute of a collaborator from its owner (`self.models.on_ready = ...`), of an
executor or steps object from outside (`executor.models.call = ...`, `executor.router.start_timeout
= ...`, `steps.evidence = ...`); a collaborator is an argument of the constructor instead. (Results
and the tests' fakes are data, set freely.)"""

from __future__ import annotations

import ast
from pathlib import Path

import aigo_apply

PACKAGE = Path(aigo_apply.__file__).parent
TESTS = Path(__file__).resolve().parents[2]


STEPS = {"executor", "steps", "models", "router", "swaps"}  # an executor and the steps it holds


def _chain(node: ast.expr) -> list[str]:
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    return [node.id if isinstance(node, ast.Name) else "?"] + names[::-1]


def _set_from_outside(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign | ast.AugAssign)
            else []
        )
        for target in targets:
            chain = _chain(target) if isinstance(target, ast.Attribute) else []
            owners = chain[:-1]
            if (owners[:1] == ["self"] and len(owners) > 1) or (owners and owners[0] != "self" and STEPS & set(owners)):
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(target)}")
    return found


def test_no_collaborator_is_set_after_construction():
    files = sorted((PACKAGE / "platforms").rglob("*.py")) + sorted((TESTS / "unit" / "platforms").rglob("test_*.py"))
    assert [hit for path in files for hit in _set_from_outside(path)] == []
