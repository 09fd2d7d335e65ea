"""No reference to a file that does not exist: every path the docs (*.md) and the code's docstrings and
comments name (`aigo_apply/plan/types.py`, `app/show.py`, `platforms/docker/executor.py`,
`router/haproxy.render_files`, `scripts/setup`, `tests/unit/...`, `docs/x.md`, `bench/plan.py`) is a
file or folder of this repository. A file moved or removed leaves no sentence pointing at it."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "aigo_apply"
PACKAGES = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()) + ["apply"]  # apply/: gone
SKIP = {".git", ".venv", ".venv-vllm", ".venv-sglang", "corpus", "golden", "fixtures", "node_modules", "build"}
_START = r"(?<![\w/.@:-])"  # the whole path, not the tail of a URL or of a longer path
# a module of the package, by file (`plan/types.py`) or by a name in it (`plan/types.build`)
MODULE = re.compile(_START + r"(?:aigo_apply/)?((?:" + "|".join(PACKAGES) + r")/[\w/]*?\w)(\.py\b|\.[a-z_]\w*)")
# a file or folder of the repository, from its root
# an example's name: vllm-vX.Y.Z.json, tests/unit/test_x.py, docs/x.md
PLACEHOLDER = re.compile(r"X\.Y\.Z|/(?:test_)?x\.\w+$")
ROOTED = re.compile(_START + r"((?:scripts|tests|bench|docs|examples|schemas|templates)/[\w./-]*[\w/])")


def _repository_files() -> list[Path]:
    """The repository's own files: what git tracks or would (not what it ignores: the virtual
    environments scripts/setup makes, whose packages name their own files); without git, every file."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        return sorted(ROOT.rglob("*"))
    return sorted(ROOT / name for name in listed.split("\0") if name)


def _texts() -> list[tuple[Path, str]]:
    """Each Markdown file whole, and the docstrings and comments of each Python file."""
    out = []
    for path in _repository_files():
        rel = path.relative_to(ROOT)
        if SKIP & set(rel.parts) or not path.is_file():
            continue
        if path.suffix == ".md":
            out.append((rel, path.read_text(encoding="utf-8")))
        elif path.suffix == ".py":
            source = path.read_text(encoding="utf-8")
            parts = [
                doc
                for node in ast.walk(ast.parse(source))
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and (doc := ast.get_docstring(node, clean=False))
            ]
            parts += [
                t.string for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT
            ]
            out.append((rel, "\n".join(parts)))
    return out


def _references() -> list[tuple[Path, str, bool]]:
    """(where, the path named, whether it exists)."""
    found = []
    for where, text in _texts():
        for m in MODULE.finditer(text):
            name = m.group(1)
            exists = (PACKAGE / f"{name}.py").is_file() or (PACKAGE / name).is_dir()
            found.append((where, f"{name}{m.group(2) if m.group(2) == '.py' else ''}", exists))
        for m in ROOTED.finditer(text):
            name = m.group(1).rstrip(".")
            if any(c in name for c in "*<{") or PLACEHOLDER.search(name):
                continue  # a pattern or an example, not a path
            module = ROOT / re.sub(r"\.[a-z_]\w*$", ".py", name)  # tests/helpers/tiny_model.make_adapter
            found.append((where, name, (ROOT / name).exists() or module.is_file()))
    return found


REFERENCES = _references()


def test_the_scan_finds_the_references_there_are():
    """It cannot pass by finding nothing: the docs and docstrings name hundreds of files."""
    assert len(REFERENCES) > 500, len(REFERENCES)
    assert len({name for _, name, _ in REFERENCES}) > 150
    assert any(name == "plan/planner.py" for _, name, _ in REFERENCES)
    assert any(name.startswith("tests/unit/") for _, name, _ in REFERENCES)


def test_every_file_named_exists():
    missing = sorted({f"{where}: {name}" for where, name, exists in REFERENCES if not exists})
    assert not missing, "\n".join(missing)
