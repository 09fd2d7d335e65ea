#!/usr/bin/env python3
"""Print every environment variable name the installed vLLM's `vllm/envs.py` reads, each with its
default as an environment value (JSON, sorted): the names of `vllm.envs.environment_variables` and
the names the module reads directly with os.getenv / os.environ. tests/fixtures/vllm-v0.31.0-env.json
is this output for v0.31.0 (tests/contract/test_vllm_env_names.py holds them equal), and
tests/unit/config/test_env_ordinary.py checks that aigo.yaml accepts each of them with its default, unless
aigo-apply refuses the name on purpose, with its own reason.

Runs inside the vLLM venv: `.venv-vllm/bin/python scripts/vllm_env_names.py [--write]`. The defaults
are read with every one of these names unset, HOME=/home/user and no XDG_* variable, so the output
does not depend on who runs it.
"""

from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "vllm-v0.31.0-env.json"
# Defaults made anew in every process (a random shared-memory name): written as "1".
VOLATILE = {"VLLM_OBJECT_STORAGE_SHM_BUFFER_NAME"}


def direct_reads(source: str) -> set[str]:
    """Names `envs.py` reads with os.getenv("X"), os.environ.get("X") or os.environ["X"]."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        call = node if isinstance(node, ast.Call) else None
        if call is not None and ast.unparse(call.func) in ("os.getenv", "os.environ.get") and call.args:
            first = call.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.add(first.value)
        if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                found.add(node.slice.value)
    return found


def as_value(default: object) -> str:
    """A default as the text an environment would hold (unset ones: "1", a switch turned on)."""
    if isinstance(default, bool):
        return "1" if default else "0"
    if default is None:
        return "1"
    if isinstance(default, (list, tuple, set)):
        return ",".join(str(v) for v in default) or "1"
    return str(default) or "1"


def same_twice(read: object) -> str:
    """The default `read()` gives, as a value; "1" when it has none here or differs each time (a random name)."""
    try:
        first, second = (as_value(read()) if callable(read) else "1" for _ in range(2))
    except Exception:  # a default computed from something absent here
        return "1"
    return first if first == second else "1"


def main() -> None:
    import vllm
    import vllm.envs as envs

    source = Path(envs.__file__).read_text(encoding="utf-8")
    names = sorted(set(envs.environment_variables) | direct_reads(source))
    for name in names + [n for n in os.environ if n.startswith("XDG_")]:
        os.environ.pop(name, None)
    os.environ["HOME"] = "/home/user"
    out = {name: "1" if name in VOLATILE else same_twice(envs.environment_variables.get(name)) for name in names}
    text = json.dumps({"vllm": vllm.__version__, "env": out}, indent=1, sort_keys=True) + "\n"
    if "--write" in sys.argv:
        OUT.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
