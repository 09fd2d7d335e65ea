"""The documentation is tested: README.md, CONTRIBUTING.md and every page of docs/.

- Every fenced ```yaml block says on its first line what it is: `# aigo.yaml` (a whole file: it must
  validate as `aigo-apply validate` validates it), `# aigo.yaml: part` (a part of one: it is completed
  into a minimal file, a project and a source for each model that names none, and must validate),
  `# aigo.yaml: reference` (the configuration reference: every key at once, so it must pass the JSON
  Schema, and together the reference blocks must name every key the schema defines), or
  `# not aigo.yaml: WHAT` (another file: it must still be YAML, and a `.pre-commit-config.yaml` may
  name only the hooks of this repository's .pre-commit-hooks.yaml). An unmarked block fails.
- Every `aigo-apply ...` line in a shell block (```sh, ```bash, ```console) parses with the real
  command line: click's own parser for that subcommand, so an unknown option, a bad choice or a missing
  argument fails. Every inline `aigo-apply ...` code span names a real command, and every option it shows
  is one of that command's.
- Every relative link resolves to a file of the checkout, and its `#anchor` to a heading of that page.
- The README stays short (at most 300 lines), and no file of the repository names an issue number of a
  tracker (references to other projects' bugs are cited by URL)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from aigo_apply.config import schema as config_schema
from aigo_apply.config.yaml_source import load_text
from aigo_apply.errors import ConfigInvalid
from aigo_apply.observe.config_file import load_config
from aigo_apply.resources import schema_data

from helpers.cli import run_cli
from helpers.doc_blocks import (
    DOCS,
    FENCE,
    NOT_RUN_MARK,
    PAGES,
    ROUTER_URL,
    RUN_MARK,
    SHELL,
    Block,
    all_blocks,
    blocks,
    command_lines,
    is_request,
    models_named,
    parse,
    quick_start_file,
    runnable,
)
from helpers.paths import ROOT


def prose(page: Path) -> str:
    """The page without its fenced blocks (kept as blank lines, so line numbers stay)."""
    text = page.read_text(encoding="utf-8")
    return FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


ALL_BLOCKS = all_blocks()
YAML_BLOCKS = [b for b in ALL_BLOCKS if b.lang in ("yaml", "yml")]
SHELL_BLOCKS = [b for b in ALL_BLOCKS if b.lang in SHELL]


def test_the_pages_exist_and_each_has_blocks_to_test():
    names = {p.name for p in DOCS}
    for name in ["README.md", "configuration.md", "plan-and-state.md", "router-and-security.md", "swap-groups.md",
                 "kubernetes.md", "models-and-hub.md", "troubleshooting.md", "performance.md",
                 "coming-from.md"]:  # fmt: skip
        assert name in names, f"docs/{name} is missing"
    assert YAML_BLOCKS and SHELL_BLOCKS


def test_the_readme_is_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; the manual belongs in docs/"


# -- YAML examples ------------------------------------------------------------------------------------------


def kind(block: Block) -> str:
    first = block.body.split("\n", 1)[0].strip()
    if first in ("# aigo.yaml", "# aigo.yaml: part", "# aigo.yaml: reference"):
        return first.removeprefix("# aigo.yaml").removeprefix(": ") or "file"
    if re.fullmatch(r"# not aigo\.yaml: \S.*", first):
        return "other"
    return "unmarked"


def complete(part: dict[str, Any]) -> dict[str, Any]:
    """A part of an aigo.yaml made a whole one: version and project, and a source and a context length
    for each model that names none (a model `m` when the part has no models)."""
    data = {"version": 1, "project": "docs", **part}
    models = data.setdefault("models", {"m": {}})
    for alias, model in models.items():
        model.setdefault("source", {"repo": f"org/{alias}"})
        model.setdefault("context_length", 4096)
    return data


@pytest.mark.parametrize("block", YAML_BLOCKS, ids=lambda b: b.where)
def test_every_yaml_block_is_marked_and_each_aigo_yaml_validates(block, tmp_path, monkeypatch):
    which = kind(block)
    assert which != "unmarked", (
        f"{block.where}: say what this YAML is on its first line: `# aigo.yaml`, `# aigo.yaml: part`, "
        "`# aigo.yaml: reference` or `# not aigo.yaml: WHAT`"
    )
    if which == "other":
        data = yaml.safe_load(block.body)  # still YAML
        if ".pre-commit-config.yaml" in block.body.split("\n", 1)[0]:  # the hooks it names are ours
            ours = {hook["id"] for hook in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
            named = {hook["id"] for repo in data["repos"] for hook in repo["hooks"]}
            assert named <= ours, f"{block.where}: no such hook: {sorted(named - ours)}"
        return
    if which == "reference":
        whole = yaml.safe_dump(complete(yaml.safe_load(block.body)), sort_keys=False)
        problems = config_schema.validate(load_text(whole, block.where))
        assert not problems, "\n".join(str(p) for p in problems)
        return
    text = block.body
    if which == "part":
        text = yaml.safe_dump(complete(yaml.safe_load(text)), sort_keys=False)
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "aigo.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        load_config(str(path))
    except ConfigInvalid as exc:
        pytest.fail(f"{block.where}: the example does not validate:\n" + "\n".join(exc.lines()))


def _schema_paths(node: Any, defs: dict[str, Any], path: tuple[str, ...], out: set[tuple[str, ...]]) -> None:
    """Every key path the schema names: `*` for a mapping's own names (aliases, variables)."""
    if "$ref" in node:
        node = defs[node["$ref"].split("/")[-1]]
    for alt in node.get("oneOf", []) + node.get("anyOf", []) + node.get("allOf", []):
        _schema_paths(alt, defs, path, out)
    for key, sub in node.get("properties", {}).items():
        out.add(path + (key,))
        _schema_paths(sub, defs, path + (key,), out)
    extra = [node.get("additionalProperties"), *node.get("patternProperties", {}).values()]
    for sub in extra:
        if isinstance(sub, dict):
            _schema_paths(sub, defs, path + ("*",), out)


def _doc_paths(node: Any, path: tuple[str, ...], out: set[tuple[str, ...]]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            step = "*" if path in (("models",), ("models", "*", "adapters"), ("models", "*", "env")) else str(key)
            out.add(path + (step,))
            _doc_paths(value, path + (step,), out)
    elif isinstance(node, list):
        for item in node:
            _doc_paths(item, path + ("*",), out)


def test_the_configuration_reference_names_every_key_of_the_schema():
    """Each key the schema defines is set in a reference block, or named in its comments beside its
    parent (an alternative such as `source: {path: ...}`); a key the schema drops fails the schema
    check of the block above."""
    schema = schema_data("aigo.schema.json")
    wanted: set[tuple[str, ...]] = set()
    _schema_paths(schema, schema["$defs"], (), wanted)
    references = [b for b in YAML_BLOCKS if kind(b) == "reference"]
    assert any(b.page.name == "configuration.md" for b in references)
    shown: set[tuple[str, ...]] = set()
    for b in references:
        _doc_paths(yaml.safe_load(b.body), (), shown)
    words = set(re.findall(r"[\w.]+", " ".join(b.body for b in references)))

    def named(path: tuple[str, ...]) -> bool:
        if path in shown:
            return True
        return path[-1] in words and (len(path) == 1 or named(path[:-1]))

    missing = sorted(".".join(p) for p in wanted if not named(p))
    assert not missing, f"keys of schemas/aigo.schema.json that no reference block in docs/ names: {missing}"


def test_the_reference_shows_the_code_s_defaults():
    """Where the reference sets a key to its default (its comment says so), the value is the code's."""
    from aigo_apply.config import defaults as d
    from aigo_apply.config.engine_kinds import LLAMACPP, SGLANG, VLLM
    from aigo_apply.desired.canary import CanarySettings

    block = next(b for b in YAML_BLOCKS if kind(b) == "reference" and b.page.name == "configuration.md")
    data = yaml.safe_load(block.body)
    router, engines = data["router"], data["engines"]
    model = next(iter(data["models"].values()))
    assert data["defaults"]["gpu_memory_utilization"] == d.DEFAULT_GPU_MEMORY_UTILIZATION
    assert (router["port"], router["bind"]) == (d.DEFAULT_ROUTER_PORT, d.DEFAULT_ROUTER_BIND)
    assert (router["image"], router["image_tag"]) == (d.ROUTER_IMAGE, d.ROUTER_DEFAULT_TAG)
    assert (router["max_body_mb"], router["timeout"]) == (d.ROUTER_MAX_BODY_MB, d.ROUTER_TIMEOUT)
    assert (router["hold_seconds"], router["stall_seconds"]) == (d.ROUTER_HOLD_SECONDS, d.ROUTER_STALL_SECONDS)
    assert (engines["vllm"]["image"], engines["vllm"]["image_tag"]) == (VLLM.image, VLLM.default_tag)
    assert (engines["sglang"]["image"], engines["llama.cpp"]["image"]) == (SGLANG.image, LLAMACPP.image)
    assert model["ready_timeout"] == d.DEFAULT_READY_TIMEOUT
    assert model["canary"] == CanarySettings().to_dict()
    assert data["defaults"]["logs"] == {"max_size": d.LOG_MAX_SIZE, "max_files": d.LOG_MAX_FILES}


def test_the_plan_page_names_every_action_kind_and_change_effect():
    from aigo_apply.plan.plan_file import EFFECTS, KINDS

    page = (ROOT / "docs" / "plan-and-state.md").read_text(encoding="utf-8")
    for word in [*KINDS, *EFFECTS]:
        assert f"`{word}`" in page, f"docs/plan-and-state.md does not name `{word}`"


def test_the_readiness_page_names_every_check_id():
    from aigo_apply.plan.plan_file import READINESS_CHECK_IDS

    page = (ROOT / "docs" / "readiness.md").read_text(encoding="utf-8")
    missing = [check for check in READINESS_CHECK_IDS if f"`{check}`" not in page]
    assert not missing, f"docs/readiness.md does not name these checks: {missing}"


# -- command lines ------------------------------------------------------------------------------------------


def cli() -> click.Group:
    from aigo_apply.cli.main import cli as group  # importing main registers every command

    return group


SHELL_LINES = [(b, n, args) for b in SHELL_BLOCKS for n, args in command_lines(b)]


@pytest.mark.parametrize(("block", "line", "args"), SHELL_LINES, ids=[f"{b.page.name}:{n}" for b, n, _ in SHELL_LINES])
def test_every_command_line_shown_parses(block, line, args):
    try:
        parse(args)
    except click.exceptions.Exit:
        pass  # --help, --version
    except click.ClickException as exc:
        pytest.fail(f"{block.page.relative_to(ROOT)}:{line}: aigo-apply {shlex.join(args)}: {exc.format_message()}")


INLINE = re.compile(r"(?<!`)`(aigo-apply(?: [^`]*)?)`(?!`)")


def inline_commands() -> Iterator[tuple[str, str]]:
    for page in PAGES:
        text = prose(page)
        for m in INLINE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            yield f"{page.relative_to(ROOT)}:{line}", " ".join(m[1].split())


@pytest.mark.parametrize(("where", "span"), list(inline_commands()), ids=lambda x: x)
def test_every_inline_command_names_a_command_and_its_options(where, span):
    """`aigo-apply plan [-f FILE] [--out PLANFILE]`: a synopsis, so only its command and options are
    checked: the words up to the first that is no subcommand name the command, and each `-x`/`--xyz`
    shown must be one of its options."""
    words = span.replace("\\|", " | ").replace("|", " | ").replace("[", " ").replace("]", " ").split()[1:]
    command: click.Command = cli()
    while isinstance(command, click.Group) and words and words[0] in command.commands:
        command = command.commands[words.pop(0)]
    if isinstance(command, click.Group):
        assert not words or not re.fullmatch(r"[a-z][a-z.-]*", words[0]), f"{where}: `{span}`: no such command"
    options = {opt for p in command.params for opt in [*p.opts, *p.secondary_opts]} | {"--help", "-h"}
    for word in words:
        option = re.match(r"-{1,2}[A-Za-z][\w-]*", word.split("=", 1)[0])
        if option and word.startswith("-"):
            assert option[0] in options, f"{where}: `{span}`: {command.name} has no option {option[0]}"


# -- requests: the examples a user sends to the router ----------------------------------------------------

REQUEST_BLOCKS = [b for b in ALL_BLOCKS if is_request(b)]


@pytest.mark.parametrize("block", REQUEST_BLOCKS, ids=lambda b: b.where)
def test_every_request_shown_is_marked_run_or_not(block):
    """A curl to this host or a Python snippet is either run by tests/docker/test_docs_at_docker.py
    against a real router (`# through the router: WHAT`) or says why not (`# not run: WHY`)."""
    assert block.first_line.startswith((RUN_MARK, NOT_RUN_MARK)), (
        f"{block.where}: say on its first line `{RUN_MARK} WHAT` (tests/docker/test_docs_at_docker.py runs it "
        f"against the router) or `{NOT_RUN_MARK} WHY`"
    )


@pytest.mark.parametrize("block", runnable(ALL_BLOCKS), ids=lambda b: b.where)
def test_each_request_run_goes_to_the_quick_start_router_and_its_models(block):
    """The Docker test points `http://127.0.0.1:8000` at its router and serves the quick start's models:
    a request block that names another address or model would not be what it runs."""
    assert ROUTER_URL in block.body, f"{block.where}: a request run against the router must use {ROUTER_URL}"
    served = set(yaml.safe_load(quick_start_file().body)["models"])
    assert models_named(block) <= served, (
        f"{block.where}: names {sorted(models_named(block) - served)}, not models of the README's quick start "
        f"({sorted(served)})"
    )
    if block.lang == "python":
        compile(block.body, block.where, "exec")


def test_the_readme_s_quick_start_ends_in_requests_with_curl_and_the_openai_sdk():
    shown = runnable(blocks(ROOT / "README.md"))
    assert any(b.lang in SHELL and "curl " in b.body for b in shown), "README.md: no curl to the router"
    assert any(b.lang == "python" and "from openai import OpenAI" in b.body for b in shown), (
        "README.md: no OpenAI SDK call to the router"
    )


def test_the_readme_s_quick_start_file_is_what_init_writes(tmp_path):
    """The README's file and `init`'s starter serve the same models, with the same settings (alias,
    parser), behind the same router: what a reader sees is what init wrote."""
    assert run_cli("init", "--project", "lab", cwd=tmp_path).returncode == 0
    written = yaml.safe_load((tmp_path / "aigo.yaml").read_text(encoding="utf-8"))
    shown = yaml.safe_load(quick_start_file().body)
    assert shown["models"] == written["models"], f"{quick_start_file().where}: not init's models"
    assert shown["router"] == written["router"] and shown["project"] == written["project"]


# -- the k3s walkthrough ----------------------------------------------------------------------------------

K3S_CONTEXT = "default"  # the one context of the kubeconfig k3s writes, /etc/rancher/k3s/k3s.yaml


def _walkthrough_files() -> Iterator[tuple[str, dict[str, Any]]]:
    """Each file an `aigo-apply` line acts on in a shell block that uses k3s's kubeconfig: its `-f FILE`,
    else the page's last whole `aigo.yaml` block before it."""
    for page in PAGES:
        shown: Block | None = None
        for block in blocks(page):
            if block.lang == "yaml" and block.first_line == "# aigo.yaml":
                shown = block
            if block.lang not in SHELL or "/etc/rancher/k3s/k3s.yaml" not in block.body:
                continue
            for line, args in command_lines(block):
                where = f"{page.relative_to(ROOT)}:{line}"
                named = next((args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-f", "--file")), None)
                if named is not None:
                    yield where, yaml.safe_load((ROOT / named).read_text(encoding="utf-8"))
                else:
                    assert shown is not None, f"{where}: no -f and no aigo.yaml shown before it"
                    yield where, yaml.safe_load(shown.body)


def test_the_k3s_walkthrough_acts_on_a_file_for_k3s():
    found = list(_walkthrough_files())
    assert found, "docs/kubernetes.md: the k3s walkthrough is gone"
    for where, data in found:
        kube = data.get("kubernetes") or {}
        assert kube.get("context", K3S_CONTEXT) == K3S_CONTEXT, (
            f"{where}: the file pins the context {kube.get('context')!r}; k3s's kubeconfig has only {K3S_CONTEXT!r}"
        )
        assert kube.get("storage", {}).get("storage_class", "local-path") == "local-path", where
        assert "node_selector" not in kube, f"{where}: a node selector k3s's node does not carry"
        assert data.get("platform") == "kubernetes", where


# -- performance figures: one page, each table with its provenance ------------------------------------------

# a table's header (the line above its |---|) that names figures measured: latencies, rates, durations
FIGURES_TABLE = re.compile(r"^\|.*(\bp50\b|\bp99\b|req/s|\(ms\)|\(s\)).*\|[ \t]*\n\|[ :|-]+\|[ \t]*$", re.M)
PERFORMANCE = ROOT / "docs" / "performance.md"


def test_benchmark_tables_are_on_the_performance_page_only():
    """A table of measured figures elsewhere goes stale beside the performance page's (they differed):
    other pages link to it."""
    found = [
        f"{page.relative_to(ROOT)}:{prose(page).count(chr(10), 0, m.start()) + 1}"
        for page in PAGES
        if page != PERFORMANCE
        for m in FIGURES_TABLE.finditer(prose(page))
    ]
    assert not found, f"a table of measured figures outside docs/performance.md: {found}"


def test_the_performance_page_says_first_what_was_measured_where():
    """It opens with a summary that says no figure was measured on a GPU, and every section holding a table
    of figures has a row in the index of where each comes from (date, commit, machine)."""
    text = prose(PERFORMANCE)
    sections = re.split(r"^## +", text, flags=re.M)
    assert sections[1].startswith("In short") and "No figure on this page was measured on a GPU" in sections[1]
    index = next(s for s in sections if s.startswith("Where each table comes from"))
    page_anchors = anchors(PERFORMANCE)
    linked = set(re.findall(r"\]\(#([\w-]+)\)", index))
    assert linked <= page_anchors, sorted(linked - page_anchors)
    with_tables = [s.split("\n", 1)[0] for s in sections[1:] if "|---" in s or "<!-- bench:start -->" in s]
    bench = PERFORMANCE.read_text(encoding="utf-8").split("<!-- bench:start -->", 1)[1]
    assert "|---" in bench  # the full run's tables are between the markers, in the section before them
    for heading in with_tables:
        if heading.startswith(("Where each table comes from", "In short")):
            continue
        assert slug(heading) in linked, f"docs/performance.md: '## {heading}' has a table but no row in the index"
    for row in re.findall(r"^\|.*\|\s*$", index, re.M)[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert re.search(r"\d{4}-\d{2}-\d{2}", cells[1]) and re.search(r"[0-9a-f]{7}", cells[2]) and cells[3], row


# -- links --------------------------------------------------------------------------------------------------

LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces as hyphens."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for m in re.finditer(r"^#{1,6} +(.+?) *#*$", prose(page), re.M):
        base = slug(m[1])
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links() -> Iterator[tuple[str, Path, str]]:
    for page in PAGES:
        text = re.sub(r"`[^`\n]*`", "", prose(page))  # code spans are not links
        for n, line in enumerate(text.splitlines(), 1):
            for m in LINK.finditer(line):
                target = m[1]
                if not re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                    yield f"{page.relative_to(ROOT)}:{n}", page, target


@pytest.mark.parametrize(("where", "page", "target"), list(links()), ids=lambda x: x if isinstance(x, str) else "")
def test_every_relative_link_and_anchor_resolves(where, page, target):
    path, _, anchor = target.partition("#")
    file = (page.parent / path).resolve() if path else page
    assert file.exists(), f"{where}: {target}: no such file"
    assert file.is_relative_to(ROOT), f"{where}: {target} leaves the checkout"
    if anchor:
        assert file.suffix == ".md", f"{where}: {target}: an anchor into a file that is not a page"
        assert anchor in anchors(file), f"{where}: {target}: no heading with that anchor in {file.name}"


# -- no tracker references ----------------------------------------------------------------------------------

TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".sh", ".j2", ".lua", ".json", ".cfg", ".txt", ""}
SKIP_DIRS = {".git", "node_modules", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis"}
# the pattern is built in parts so that this file does not match it
ISSUE = re.compile(r"\b" + "issues?" + r" #?\d+|(?<!&)" + "#" + r"\d{2,}\b", re.I)
# where such a form is test data, with the reason
ALLOWED = {
    "tests/unit/cli/test_ci_output.py": "the markdown plan must break an issue reference written in a config",
    "tests/unit/test_docs.py": "this test",
}


def repository_files() -> Iterator[Path]:
    """The repository's own files: what git tracks or would add (not what it ignores: venvs, builds,
    caches); every file but those folders where this is no git checkout."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True
    )
    if listed.returncode == 0 and listed.stdout:
        for name in sorted(set(listed.stdout.decode("utf-8", "replace").split("\0")) - {""}):
            path = ROOT / name
            if path.suffix in TEXT_SUFFIXES and path.is_file() and path.stat().st_size < 2_000_000:
                yield path
        return
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".venv") and not d.endswith(".egg-info")]
        for name in files:
            path = Path(folder) / name
            if path.suffix in TEXT_SUFFIXES and path.stat().st_size < 2_000_000:
                yield path


def test_no_file_names_an_issue_number():
    found = []
    for path in repository_files():
        rel = str(path.relative_to(ROOT))
        if rel in ALLOWED:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if ISSUE.search(line):
                found.append(f"{rel}:{n}: {line.strip()[:100]}")
    assert not found, "say what it is about in words (another project's bug: its URL):\n" + "\n".join(found)
