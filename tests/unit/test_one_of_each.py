"""One of each: one state root, read once per run; one lock protocol, which the
Docker platform, the watcher and the Kubernetes platform all take; one atomic write; one route naming."""

from __future__ import annotations

import ast
from pathlib import Path

import aigo_apply
from aigo_apply.desired.types import Route
from aigo_apply.platforms.docker.platform import DockerPlatform

PACKAGE = Path(aigo_apply.__file__).parent


def _calls(name: str) -> dict[str, int]:
    """module path -> how many calls of `name` (a function or an attribute) it makes."""
    found: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                f = node.func
                if (isinstance(f, ast.Name) and f.id == name) or (isinstance(f, ast.Attribute) and f.attr == name):
                    rel = str(path.relative_to(PACKAGE))
                    found[rel] = found.get(rel, 0) + 1
    return found


def test_one_lock_protocol():
    assert set(_calls("flock")) == {"platforms/project_lock.py"}
    assert set(_calls("ProjectLock")) == {
        "platforms/docker/platform.py",
        "platforms/kubernetes/platform.py",
        "app/watch.py",
    }


def test_one_state_root_read_once_per_run():
    """The rule is observe/host_paths.state_root_of, resolved by platforms/state_dir.state_root; a run
    reads it once, into its HostContext, and hands that root on."""
    assert set(_calls("state_root_of")) == {"platforms/state_dir.py", "observe/host_paths.py"}
    assert set(_calls("state_root")) == {"platforms/host_context.py", "platforms/state_dir.py"}


def test_a_platform_keeps_the_state_root_it_was_given(tmp_path, monkeypatch):
    monkeypatch.setenv("AIGO_STATE_DIR", str(tmp_path / "elsewhere"))
    platform = DockerPlatform("lab", "aigo.yaml", None, runtime=object(), state_root=tmp_path / "run")
    assert platform.state == tmp_path / "run" / "lab"
    with platform.lock("apply", 0.0):
        assert (tmp_path / "run" / "lab" / "apply.lock").exists()
    assert not (tmp_path / "elsewhere").exists()


def test_one_route_naming():
    assert set(_calls("route_of")) == set()  # desired/types.Route.of is the one
    assert Route.of("a", {"socket": "/s/a", "context_length": 8, "engine": "vllm"}).port is None


# What replaces a name in one step, and why each use other than safe_write's is not a file's write.
RENAMES_ALLOWED = {
    "safe_write.py": "the one atomic write: a temporary file beside the target, then link() or rename()",
    "platforms/docker/router_deploy.py": "switches the router's `live` link to a new generation folder (a link, not a file's contents)",
    "adapters/hub.py": "swaps a verified download folder in whole for the one it replaces",
    "platforms/docker/hold_lease.py": "puts a hold file (one line the router's Lua reads) in place whole, so it never reads half",
    "platforms/docker/sleep_replace.py": "swaps a link in for a removed engine's socket path (a link, not a file's contents)",
}
MOVES = {("os", "replace"), ("os", "rename"), ("os", "renames"), ("shutil", "move")} | {
    ("tempfile", name) for name in ("mkstemp", "mkdtemp", "NamedTemporaryFile", "TemporaryDirectory")
}


def test_one_atomic_write():
    """Every file aigo-apply writes in place goes through aigo_apply/safe_write.py: no other module
    renames, replaces or makes temporary files, except where listed (none of them writes a file)."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            hit = ""
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if (node.value.id, node.attr) in MOVES:
                    hit = f"{node.value.id}.{node.attr}"
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "rename":
                receiver = node.func.value
                name = receiver.attr if isinstance(receiver, ast.Attribute) else getattr(receiver, "id", "")
                if name not in ("os", "runtime", "api"):  # a container's rename is Docker's, not a file's
                    hit = "Path.rename"
            if hit:
                found.setdefault(str(path.relative_to(PACKAGE)), []).append(f"{hit} at line {node.lineno}")
    assert set(found) == set(RENAMES_ALLOWED), found
