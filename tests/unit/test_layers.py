r"""The package's layers, held by its imports (module level and inside functions alike):

    __main__ -> cli -> app -> edit                                   (the config-file editors)
                          \-> platforms.docker | platforms.kubernetes (the two drivers, never each other)
                                  \-> platforms (the seam, and what both drivers share) -> adapters
                          \-> plan -> observe -> desired -> config    (the pure core, with router and
                                                                       kube: rendering only)

One table (ALLOWED) says what each layer may import; there is no other rule and no exception. No import
cycles; the pure layers import no adapter, no I/O library and no click; only `adapters/` imports docker,
huggingface_hub, pynvml and lightkube; only `cli/` imports click and rich. An import inside a function is
allowed only where start-up time needs it, and each such place is listed below with the reason."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import aigo_apply

PACKAGE = Path(aigo_apply.__file__).parent

PURE = ("config", "desired", "observe", "router", "kube", "plan")
_CORE = set(PURE)
# What each layer may import from the package (besides itself and the top-level modules: errors,
# resources, safe_read, safe_write, json_types). A layer is a subpackage, or for platforms/ a driver of it.
ALLOWED = {
    "config": set(),
    "desired": {"config"},
    "observe": {"config", "desired"},
    "router": {"config", "desired"},  # HAProxy's files rendered
    "kube": {"config", "desired", "observe", "router"},  # Kubernetes objects rendered
    "plan": {"config", "desired", "observe", "router"},
    "adapters": {"config", "desired", "observe"},  # core types only
    "platforms": _CORE | {"adapters"},  # the seam, and what both drivers share
    "platforms.docker": _CORE | {"adapters", "platforms"},
    "platforms.kubernetes": _CORE | {"adapters", "platforms"},
    "edit": _CORE,  # the config-file editors: round-trip YAML
    "app": _CORE | {"adapters", "platforms", "platforms.docker", "platforms.kubernetes", "edit"},
    "cli": _CORE | {"adapters", "platforms", "platforms.docker", "platforms.kubernetes", "edit", "app"},
    "__main__": {"cli"},  # `python -m aigo_apply` runs the command line
    "": set(),  # aigo_apply/__init__, errors, resources, safe_read, safe_write, json_types
}
IO_LIBRARIES = {"docker", "requests", "httpx", "httpx2", "huggingface_hub", "pynvml", "lightkube", "click", "rich"}
IO_LIBRARIES |= {"subprocess", "socket"}
ADAPTER_ONLY = {"docker", "requests", "huggingface_hub", "pynvml", "lightkube", "httpx2"}
CLI_ONLY = {"click", "rich"}
# observe reads model files (headers of safetensors and GGUF files): the one I/O a pure layer's
# neighbour may do, and only with the standard library.

# Imports inside functions, each with why it is not at the top of its module.
LAZY_LIBRARIES = {
    "jinja2": "about 30 ms: only `init` and router rendering need it",
    "concurrent": "about 3 ms (with logging): only a plan that asks the Hub runs its questions in parallel",
    "jsonschema": "about 60 ms: only a file not validated before needs it (config/load.py caches validity)",
    "deepdiff": "about 40 ms: only a plan with a changed spec needs it",
    "httpx": "about 60 ms: only readiness probes, status and router reloads talk HTTP",
    "docker": "about 150 ms (requests, urllib3): validate never talks to Docker",
    "requests": "comes with docker: its exceptions are mapped where the SDK is called",
    "huggingface_hub": "about 200 ms: only models from the Hub need it",
    "tqdm": "huggingface_hub's progress hook, only while downloading",
    "pynvml": "only host checks of a file that wants a GPU read NVML",
    "rich": "only a terminal's progress bars need it",
    "lightkube": "about 130 ms (httpx2): only the Kubernetes path talks to a cluster (adapters/kube_client.py)",
    "httpx2": "lightkube's HTTP client: its exceptions are mapped where lightkube is called",
    "msgspec": "lightkube's decoder: its exceptions are mapped where lightkube is called",
    "traceback": "with linecache and tokenize: only an internal error prints one (cli/main.py)",
    "fractions": "with decimal: only a decimal token count such as 25.6k needs exact arithmetic",
    "random": "about 2 ms (hashlib, bisect): only a canary gate or `bench` draws its seeded prompts",
}
LAZY_INTERNAL = {
    # importer prefix -> why it imports the package lazily
    "aigo_apply.cli": "each command loads only the code it runs (`--version` starts in under 0.1 s)",
    "aigo_apply.__main__": "a Ctrl-C while the CLI loads exits quietly: its handler is set before the import",
    "aigo_apply.platforms.docker.platform": "the executor with its steps and waits (about 10 ms): only a plan with changes runs it; status's probes only status; logs' readers only logs",
    "aigo_apply.app.choose_platform": "the Kubernetes platform with lightkube's client: only a file for a cluster needs it",
    "aigo_apply.platforms.docker.planning": "huggingface_hub's adapter: only a lock pinning a branch asks the Hub",
    "aigo_apply.platforms.hub_facts": "huggingface_hub's adapter: only a plan with a download missing asks the Hub",
    "aigo_apply.app.bench": "the canary gate's runner (httpx, its threads): only `bench` needs it, not the commands beside it",
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(path: Path, module: str) -> list[tuple[str, bool, int]]:
    """(imported module, at top level?, line) for every import in a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(node) for node in tree.body}
    for node in tree.body:  # `if TYPE_CHECKING:` imports are for the type checker: never run, never lazy
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            top |= {id(inner) for inner in node.body}
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, id(node) in top, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            if base == "__future__":
                continue
            for alias in node.names:  # `from pkg import module` imports pkg.module
                found.append(
                    (
                        f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base,
                        id(node) in top,
                        node.lineno,
                    )
                )
    return found


MODULES = _modules()
GRAPH = {m: _imports(p, m) for m, p in MODULES.items()}


def _layer(module: str) -> str:
    """The layer of a module: its subpackage, or its driver's for platforms/ (the longest name ALLOWED has)."""
    parts = module.removeprefix("aigo_apply").lstrip(".").split(".")
    for n in (2, 1):
        if ".".join(parts[:n]) in ALLOWED:
            return ".".join(parts[:n])
    return ""


def _internal(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def test_the_package_has_the_layers_and_few_top_level_modules():
    assert {m.split(".")[1] for m in MODULES if m.count(".") >= 1} >= {k for k in ALLOWED if k and "." not in k}
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 7, top  # __init__, __main__, errors, json_types, resources, safe_read, safe_write


def test_no_module_is_over_400_lines():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > 400}
    assert not long, long


def test_every_module_says_what_it_is_for():
    missing = [m for m, p in MODULES.items() if not ast.get_docstring(ast.parse(p.read_text()))]
    assert not missing, missing


def test_layers_import_only_the_layers_below_them():
    wrong = []
    for module, imports in GRAPH.items():
        layer = _layer(module)
        for name, _, line in imports:
            if not name.startswith("aigo_apply"):
                continue
            target = _layer(_internal(name) or name)
            if target not in {layer, ""} | ALLOWED[layer]:
                wrong.append(f"{module}:{line} imports {name} ({layer or 'top'} -> {target or 'top'})")
    assert not wrong, "\n".join(wrong)


def test_the_table_names_every_layer_and_only_layers_that_exist():
    layers = {_layer(m) for m in MODULES}
    assert layers == set(ALLOWED), layers ^ set(ALLOWED)
    assert all(set(allowed) <= set(ALLOWED) for allowed in ALLOWED.values())


def test_the_drivers_never_import_each_other():
    assert "platforms.kubernetes" not in ALLOWED["platforms.docker"]
    assert "platforms.docker" not in ALLOWED["platforms.kubernetes"]
    assert not {"platforms.docker", "platforms.kubernetes"} & ALLOWED["platforms"]


def test_libraries_stay_in_their_layer():
    wrong = []
    for module, imports in GRAPH.items():
        layer = _layer(module)
        for name, _, line in imports:
            root = name.split(".")[0]
            if (
                layer in PURE
                and root in IO_LIBRARIES
                and not (layer == "observe" and root not in ADAPTER_ONLY | CLI_ONLY)
            ):
                wrong.append(f"{module}:{line} imports {name}: the {layer} layer is pure")
            if root in ADAPTER_ONLY and layer != "adapters":
                wrong.append(f"{module}:{line} imports {name}: only adapters/ may")
            if root in CLI_ONLY and layer != "cli":
                wrong.append(f"{module}:{line} imports {name}: only cli/ may")
    assert not wrong, "\n".join(wrong)


def test_no_import_cycles():
    edges = defaultdict(set)
    for module, imports in GRAPH.items():
        for name, _, _ in imports:
            target = _internal(name) if name.startswith("aigo_apply") else None
            if target and target != module:
                edges[module].add(target)
    cycles, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(edges[node]):
            if state.get(nxt) == "open":
                cycles.append(
                    " -> ".join(stack[stack.index(nxt) :] + [node, nxt]) if nxt in stack else f"{node} -> {nxt}"
                )
            elif nxt not in state:
                visit(nxt, stack + [node])
        state[node] = "done"

    for module in sorted(MODULES):
        if module not in state:
            visit(module, [])
    assert not cycles, "\n".join(cycles)


def test_imports_inside_functions_are_listed_with_their_reason():
    unlisted = []
    for module, imports in GRAPH.items():
        for name, at_top, line in imports:
            if at_top:
                continue
            root = name.split(".")[0]
            if root == "aigo_apply":
                if not any(module.startswith(prefix) for prefix in LAZY_INTERNAL):
                    unlisted.append(f"{module}:{line} imports {name} inside a function")
            elif not LAZY_LIBRARIES.get(root):
                unlisted.append(f"{module}:{line} imports {name} inside a function (no start-up reason listed)")
    assert not unlisted, "\n".join(unlisted)


def test_every_lazy_importer_listed_still_imports_the_package_lazily():
    lazy = {
        m for m, imports in GRAPH.items() for name, at_top, _ in imports if not at_top and name.startswith("aigo_apply")
    }
    stale = [prefix for prefix in LAZY_INTERNAL if not any(m == prefix or m.startswith(prefix + ".") for m in lazy)]
    assert not stale, f"listed but no longer importing lazily (or renamed): {stale}"


def test_test_modules_have_unique_basenames():
    """pytest imports test modules by basename (rootdir-relative packages are not used here): a
    tests/docker/test_x.py beside a tests/unit/test_x.py stops the whole run at collection."""
    tests = Path(__file__).resolve().parents[1]
    seen: dict[str, list[str]] = {}
    for path in tests.glob("**/test_*.py"):
        seen.setdefault(path.name, []).append(str(path.relative_to(tests)))
    assert not {name: where for name, where in seen.items() if len(where) > 1}


# -- purity that the test holds, not only for imports ----------------------------------
# What reads files, folders, the account database or the environment (and the readers of
# observe/host_paths.py): none of it may be called in a pure layer, except where listed here.
READ_CALLS = {
    "open", "read_text", "read_bytes", "write_text", "write_bytes", "resolve", "is_file", "is_dir", "exists",
    "glob", "rglob", "iterdir", "stat", "lstat", "listdir", "scandir", "readlink", "realpath", "expanduser",
    "home", "cwd", "getcwd", "getpwall", "getpwnam", "getpwuid", "getgrall", "getgrnam", "getuid", "getgid",
    "mkdir", "touch", "unlink", "rename", "is_symlink", "samefile", "access",
    # observe/host_paths.py's readers of the host
    "resolve_or_why", "try_resolve", "listed_homes", "known_homes", "usable_homes", "own_homes", "env_protected",
    "others_can_write", "file_facts", "host_facts", "hf_home", "state_root_of", "models_dir_of",
    # aigo_apply/safe_read.py's openers, imported by name
    "judged", "opened",
}  # fmt: skip
READ_MODULES = {"pwd", "grp", "safe_write", "safe_read", "shutil", "tempfile"}  # any use of these
# Each module of a pure layer that still reads, and why. Package data (the wheel's schemas and
# templates) is the same on every host; the config file is the input itself; observe's readers read
# model files and the host's paths by design (its parsers and the policies stay pure). The mount,
# secret-file and model-store policies (config/host_paths, mount_rules, env_rules, rules;
# desired/build, model_store) take what the host says of each path as data (config/path_facts.HostPaths),
# gathered once by observe/host_paths.py: they read nothing.
READS_ALLOWED = {
    "aigo_apply.config.file_read": "the config file itself, bounded, never through a FIFO: the input, not a host fact",
    "aigo_apply.config.load": "the config file named by -f or AIGO_FILE, and the cache of valid files' digests",
    "aigo_apply.config.yaml_source": "the config file, through file_read (its bytes read once)",
    "aigo_apply.config.vllm_facts": "package data: the vLLM facts files shipped in schemas/",
    "aigo_apply.router.render_key": "package data: the render key digests the templates and the router's own code",
    "aigo_apply.observe.gguf": "observe's reader: a GGUF file's header",
    "aigo_apply.observe.model_files": "observe's reader: safetensors headers and config.json of a model folder",
    "aigo_apply.observe.local_sources": "observe's reader: whether a local model source is a regular file or folder",
    "aigo_apply.observe.markers": "observe's reader: the model store's download markers, and links where it lays out folders",
    "aigo_apply.observe.adapter_files": "observe's reader: a LoRA adapter folder's adapter_config.json and file names",
    "aigo_apply.observe.host_paths": "observe's reader: the host's path facts (each path a file names resolved or "
    "why not, a store's owner and mode, your home, every account's, the environment's folders), gathered once a run",
}


def _reads(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if name in READ_CALLS:
                found.append(f"{name}() at line {node.lineno}")
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in READ_MODULES or (node.value.id == "os" and node.attr in ("environ", "getenv")):
                found.append(f"{node.value.id}.{node.attr} at line {node.lineno}")
    return found


def test_pure_layers_read_no_file_account_or_environment_unless_listed():
    reading = {m: r for m, p in MODULES.items() if _layer(m) in PURE and (r := _reads(p))}
    unlisted = {m: r for m, r in reading.items() if m not in READS_ALLOWED}
    assert not unlisted, unlisted
    assert not set(READS_ALLOWED) - set(reading), "listed but no longer reading: take them off the list"
    assert not any(m.startswith("aigo_apply.plan") for m in reading), "plan/ reads nothing"
