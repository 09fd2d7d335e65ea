"""Every file the package reads goes through the one bounded reader (aigo_apply/safe_read.py), or is
listed here with why not. The package's source is scanned (AST) for every call that
opens or reads a file by its path: open(), io.open(), os.open() (for reading), Path.open(),
read_text(), read_bytes(), json.load(), shutil.copy*(); each must be in safe_read.py or in READS below,
keyed by module and function, with a reason. A new read of a file, anywhere, fails this test until it
goes through the reader or says here why it need not. (Writes go through safe_write.py: its own test.)"""

from __future__ import annotations

import ast
from pathlib import Path

import aigo_apply

PACKAGE = Path(aigo_apply.__file__).parent
NOT_READING = ("O_WRONLY", "O_PATH", "O_DIRECTORY")  # os.open flags of a write, a socket's path, a folder's sync

PROC = "a file of /proc: the kernel's own answer, never a file from outside (bounded by the kernel)"
PACKAGE_DATA = "the package's own data (schemas, templates, its source), shipped in the wheel"
READS = {
    ("aigo_apply.safe_read", "judged"): "the one bounded reader itself",
    ("aigo_apply.config.file_read", "_read_stream"): (
        "the config file when it is a pipe (-f /dev/stdin, -f <(...)): bounded in bytes and in time (10 s), "
        "never a terminal; a regular config file goes through safe_read"
    ),
    ("aigo_apply.adapters.host", "read"): PROC + " (a GPU process's comm and cgroup)",
    ("aigo_apply.adapters.host", "host_memory"): PROC + " (meminfo)",
    ("aigo_apply.adapters.listeners", "proc_listening"): PROC + " (net/tcp and tcp6, read at most 64 MiB)",
    ("aigo_apply.adapters.listeners", "_comm"): PROC + " (a listening process's comm, 64 characters)",
    ("aigo_apply.platforms.router_keys", "unprivileged_port_start"): PROC
    + " (sys/net/ipv4/ip_unprivileged_port_start)",
    ("aigo_apply.platforms.project_lock", "__enter__"): (
        "the project's lock file in its state folder (O_RDWR | O_CREAT, mode 0600): only aigo-apply writes it"
    ),
    ("aigo_apply.platforms.docker.live_router", "read_live"): (
        "the router's live files in the project's state folder, which only aigo-apply writes (0700)"
    ),
    (
        "aigo_apply.platforms.docker.live_router",
        "live_routes",
    ): "the router's route table in the project's state folder (as above)",
    (
        "aigo_apply.platforms.docker.live_router",
        "live_key",
    ): "the router's render key in the project's state folder (as above)",
    ("aigo_apply.platforms.docker.hold_lease", "clear_lapsed"): (
        "the router's hold files in the project's state folder (256 bytes of each regular file, no link)"
    ),
    ("aigo_apply.resources", "schema_data"): PACKAGE_DATA,
    ("aigo_apply.edit.starter", "schema_text"): PACKAGE_DATA,
    ("aigo_apply.config.load", "_validated_key"): PACKAGE_DATA + " (the validity cache's key)",
    ("aigo_apply.router.render_key", "code_digest"): PACKAGE_DATA + " (the render key)",
}


def _flags(node: ast.expr, constants: dict[str, str]) -> str:
    """os.open's flags as written, module-level names replaced by what they are set to."""
    text = ast.unparse(node)
    for name, value in constants.items():
        text = text.replace(name, value)
    return text


def _mode(call: ast.Call, position: int) -> str:
    given = next((kw.value for kw in call.keywords if kw.arg == "mode"), None)
    given = given or (call.args[position] if len(call.args) > position else None)
    return given.value if isinstance(given, ast.Constant) and isinstance(given.value, str) else "r"


def _reading(call: ast.Call, constants: dict[str, str]) -> str | None:
    """What the call reads, in words, or None when it opens or reads no file by its path."""
    f = call.func
    if isinstance(f, ast.Name) and f.id == "open":
        mode = _mode(call, 1)
        return "open()" if "r" in mode or "+" in mode else None
    if not isinstance(f, ast.Attribute):
        return None
    base = ast.unparse(f.value)
    if f.attr in ("read_text", "read_bytes"):
        return f"{base}.{f.attr}()"
    if f.attr == "open" and base == "os":
        flags = _flags(call.args[1], constants) if len(call.args) > 1 else ""
        return None if any(word in flags for word in NOT_READING) and "O_RDWR" not in flags else "os.open()"
    if f.attr == "open":  # Path.open, io.open, tarfile.open, gzip.open...
        mode = _mode(call, 1 if base in ("io", "codecs", "gzip", "bz2", "lzma", "tarfile") else 0)
        return f"{base}.open()" if "r" in mode or "+" in mode else None
    if base == "json" and f.attr == "load":
        return "json.load()"
    if base == "shutil" and f.attr.startswith("copy"):
        return f"shutil.{f.attr}()"
    return None


def _reads() -> dict[tuple[str, str], list[str]]:
    """(module, function) -> each read there, `what at line N`."""
    found: dict[tuple[str, str], list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = {
            t.id: ast.unparse(node.value)
            for node in tree.body
            if isinstance(node, ast.Assign)
            for t in node.targets
            if isinstance(t, ast.Name)
        }
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or (what := _reading(node, constants)) is None:
                continue
            scope = node
            while scope in parents and not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
                scope = parents[scope]
            name = scope.name if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) else "<module>"
            found.setdefault((module, name), []).append(f"{what} at line {node.lineno}")
    return found


def test_every_file_read_goes_through_the_reader_or_says_why_not():
    found = _reads()
    unlisted = {f"{m}.{fn}": where for (m, fn), where in found.items() if (m, fn) not in READS}
    assert not unlisted, (
        "read these through aigo_apply/safe_read.py (safe_read.read with a Kind, or safe_read.opened), or "
        f"list them in READS with why they need not: {unlisted}"
    )
    stale = sorted(f"{m}.{fn}" for m, fn in set(READS) - set(found))
    assert not stale, f"listed but no longer reading a file: take them off READS: {stale}"


def test_the_scan_finds_each_kind_of_read():
    """The scanner itself: each form a read takes is found, and writes are not."""
    source = """
import json, os, shutil, io
from pathlib import Path
_W = os.O_WRONLY | os.O_CREAT
def f(p):
    open(p); open(p, "rb"); open(p, mode="r+"); Path(p).read_text(); p.read_bytes(); Path(p).open()
    io.open(p); os.open(p, os.O_RDONLY); os.open(p, os.O_RDWR | os.O_CREAT); json.load(p); shutil.copyfile(p, p)
def g(p):
    open(p, "w"); open(p, "a"); Path(p).open("w"); os.open(p, _W); os.open(p, os.O_PATH); os.fdopen(3)
"""
    tree = ast.parse(source)
    constants = {"_W": "os.O_WRONLY | os.O_CREAT"}
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    in_f = [_reading(c, constants) for c in calls if c.lineno == 6 or c.lineno == 7]
    in_g = [_reading(c, constants) for c in calls if c.lineno == 9]
    assert sum(1 for w in in_f if w) == 11, in_f
    assert not any(in_g), in_g


def test_the_readers_of_files_from_outside_use_it():
    """The files from outside that ended in a hang, a traceback or a huge read, each read by a module that
    uses the reader."""
    for module in (
        "platforms/lock_file.py",  # aigo.lock
        "app/saved_plan.py",  # apply PLANFILE
        "edit/portable.py",  # import FILE.baimodel
        "adapters/kubeconfig.py",  # the kubeconfig and its tokenFile, certificates and CA files
        "platforms/secrets.py",  # from_file, the Hugging Face token files
        "observe/markers.py",  # the model store's download markers
        "observe/model_files.py",  # config.json, the safetensors index and headers (safe_read.judged)
        "config/file_read.py",  # aigo.yaml
    ):
        text = (PACKAGE / module).read_text(encoding="utf-8")
        assert "safe_read" in text, module
