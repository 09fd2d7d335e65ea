"""The fenced blocks of the documentation (README.md, CONTRIBUTING.md, docs/*.md) and the command lines
they show, for the tests that hold the docs: tests/unit/test_docs.py (every block marked, every YAML
validates, every command line parses) and tests/docker/test_docs_at_docker.py (every request marked
`# through the router:` runs against a router serving the quick start's models).

A request a user would send is marked on its first line, in a ```sh or ```python block:
`# through the router: WHAT` (run by the Docker test, its `http://127.0.0.1:8000` pointed at that
router). Any other block that sends to a router or engine on this host says `# not run: WHY`."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from helpers.paths import ROOT

DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *DOCS]
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w.+-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)
SHELL = {"sh", "bash", "console", "shell"}
RUN_MARK = "# through the router:"
NOT_RUN_MARK = "# not run:"
ROUTER_URL = "http://127.0.0.1:8000"  # the quick start's router (router.port 8000, router.bind 127.0.0.1)
# a request to a server on this host: what a reader would paste into a shell or a Python file
LOCAL_REQUEST = re.compile(r"https?://(127\.0\.0\.1|localhost)[:/]")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    body: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def first_line(self) -> str:
        return self.body.split("\n", 1)[0].strip()


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for m in FENCE.finditer(text):
        indent = len(m["indent"])
        body = "\n".join(line[indent:] for line in m["body"].splitlines())
        found.append(Block(page, text.count("\n", 0, m.start()) + 1, m["lang"], body))
    return found


def all_blocks() -> list[Block]:
    return [b for page in PAGES for b in blocks(page)]


def is_request(block: Block) -> bool:
    """A block a reader runs against a server on this host: every Python block, and a shell block that
    names a URL of 127.0.0.1 or localhost."""
    return block.lang == "python" or (block.lang in SHELL and bool(LOCAL_REQUEST.search(block.body)))


def runnable(blocks_: list[Block] | None = None) -> list[Block]:
    """The blocks marked `# through the router:`."""
    return [b for b in (all_blocks() if blocks_ is None else blocks_) if b.first_line.startswith(RUN_MARK)]


def command_lines(block: Block) -> Iterator[tuple[int, list[str]]]:
    """Each `aigo-apply` invocation in a shell block: after a prompt, a pipe, `&&` or `;`; a line ending in
    a backslash goes on on the next, as in a shell."""
    held, start = "", 0
    for n, line in enumerate(block.body.splitlines()):
        start = start if held else n
        if line.endswith("\\"):
            held += line[:-1]
            continue
        line, held = held + line, ""
        yield from ((block.line + 1 + start, words) for words in command_words(line))


def command_words(line: str) -> Iterator[list[str]]:
    """The arguments of each `aigo-apply` invocation on one shell line (a prompt, pipes, `&&` and `;` split it)."""
    line = re.sub(r"^\$ ", "", line.strip())
    for segment in re.split(r"\|\||&&|[|;]", line):
        words = shlex.split(segment, comments=True)
        redirected = next((i for i, w in enumerate(words) if re.match(r"\d*[<>]", w)), len(words))
        words = words[:redirected]  # `> plan.md` is the shell's, not an argument
        if words and re.fullmatch(r"(\S*/)?aigo-apply", words[0]):
            yield words[1:]


def parse(args: list[str]):
    """Parse `args` as the real CLI does, down to the subcommand; return it (a click.Command). Raises
    click's error for an unknown option, a bad choice or a missing argument."""
    import click

    from aigo_apply.cli.main import cli as group  # importing main registers every command

    ctx = group.make_context("aigo-apply", list(args), resilient_parsing=False)
    command: click.Command = group
    while isinstance(command, click.Group):
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
        if not rest:
            return command
        name, sub, rest = command.resolve_command(ctx, rest)
        assert sub is not None and name is not None
        ctx = sub.make_context(name, rest, parent=ctx, resilient_parsing=False)
        command = sub
    return command


def quick_start_file() -> Block:
    """The README's first whole `aigo.yaml`: the quick start's, which `aigo-apply init` writes."""
    return next(b for b in blocks(ROOT / "README.md") if b.lang == "yaml" and b.first_line == "# aigo.yaml")


MODEL_NAMED = re.compile(r"""["']model["']\s*:\s*["']([^"']+)["']|\bmodel\s*=\s*["']([^"']+)["']""")


def models_named(block: Block) -> set[str]:
    """The models a request block sends to: `"model": "X"` in a JSON body, `model="X"` in Python."""
    return {a or b for a, b in MODEL_NAMED.findall(block.body)}
