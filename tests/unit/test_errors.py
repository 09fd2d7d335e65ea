"""Every error a user can meet lives in aigo_apply/errors.py, and each maps to one documented exit code."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import aigo_apply
from aigo_apply import errors
from aigo_apply.errors import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_USAGE, AigoError

PACKAGE = Path(aigo_apply.__file__).parent


def _error_classes() -> list[type[AigoError]]:
    return [c for c in vars(errors).values() if inspect.isclass(c) and issubclass(c, AigoError)]


def test_no_error_class_is_defined_outside_errors_py():
    names = {c.__name__ for c in _error_classes()}
    elsewhere = []
    for path in PACKAGE.rglob("*.py"):
        module = str(path.relative_to(PACKAGE))
        if module == "errors.py":
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                bases = {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
                if bases & (names | {"Exception"}):
                    elsewhere.append(f"{module}.{node.name}")
    assert not elsewhere, elsewhere


def test_every_error_has_a_documented_exit_code_that_an_instance_keeps():
    for cls in _error_classes():
        try:
            params = [p for p in inspect.signature(cls).parameters.values() if p.default is p.empty]
        except ValueError:  # Exception's own __init__: one message
            params = []
        args = ["x"] * len(params) if params else ["x"]
        if cls is errors.ConfigInvalid:
            args = ["f.yaml", []]
        instance = cls(*args)
        assert instance.exit_code in (EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED), cls
        assert instance.exit_code == cls.exit_code, f"{cls.__name__} instances shadow exit_code"
        assert cls.__doc__, f"{cls.__name__} says nothing about when it is raised"


def test_a_not_ready_engine_keeps_the_cli_exit_code_apart_from_the_containers():
    exc = errors.NotReady("exited", ["last line"], 137)
    assert exc.exit_code == EXIT_ERROR and exc.container_exit_code == 137
