"""`aigo-apply image tag ENGINE TAG` writes what `aigo-apply fmt` keeps: on a formatted file, the edit
leaves nothing for `fmt --check` to rewrite, whatever the tag (one YAML would read as a number,
boolean, null or date is double-quoted, as fmt quotes it) and wherever the key goes (a new section or
key lands where fmt's order puts it); and the file reads back the tag as text."""

from __future__ import annotations

import re

import pytest

from aigo_apply.edit.fmt import format_file
from aigo_apply.edit.image_tag import set_tag
from aigo_apply.observe.config_file import load_config

from helpers.cli import run_cli
from helpers.configs import write_config
from helpers.paths import EXAMPLES

# Tags (all valid Docker tags) that a YAML 1.1 or 1.2 reader reads as something else when plain.
MISTYPED = ["3.3", "3.10", "1e3", "0x10", "0o17", "08", "012", "1_0", "true", "False", "yes", "on", "null", "1.0"]
ORDINARY = ["v0.31.0-cu129", "server-cuda", "latest", "3.2-bookworm"]
ENGINES = ["vllm", "sglang", "llama.cpp", "router"]
MODEL = "models:\n  a:\n    source: {path: /m}\n    context_length: 9\n    gpus: none\n"

LAYOUTS = {
    "bare": "version: 1\nproject: p\n" + MODEL,
    # sections around the ones image tag adds: each new one must land where fmt puts it
    "sections": (
        "version: 1\nproject: p\nplatform: docker\ndefaults:\n  ready_timeout: 60\n"
        "kubernetes:\n  namespace: lab\n" + MODEL
    ),
    "router-keys": (
        "version: 1\nproject: p\nrouter:\n  port: 9000\n  bind: 127.0.0.1\n  image: reg.local/haproxy\n"
        "  max_body_mb: 8\n  timeout: 60\nengines:\n  sglang:\n    image: reg.local/sglang\n" + MODEL
    ),
    "quoted-before": (
        'version: 1\nproject: p\nrouter:\n  image_tag: "3.2"\nengines:\n  vllm:\n    image_tag: "1.0"\n'
        "  llama.cpp:\n    image_tag: server-cuda\n" + MODEL
    ),
}


def _unformatted(path) -> str:
    result = format_file(str(path), write=False)
    return result.diff() if result.changed else ""


CASES = [("bare", tag) for tag in MISTYPED + ORDINARY] + [
    (layout, tag) for layout in LAYOUTS if layout != "bare" for tag in ("3.3", "null", "v0.31.0-cu129")
]


@pytest.mark.parametrize("layout, tag", CASES)
def test_a_tag_set_on_a_formatted_file_leaves_nothing_for_fmt(tmp_path, layout, tag):
    target = write_config(tmp_path, LAYOUTS[layout])
    assert _unformatted(target) == ""  # the file is formatted to begin with
    for engine in ENGINES:
        set_tag(str(target), engine, tag)
        assert _unformatted(target) == "", (engine, target.read_text())
    data = load_config(str(target)).data
    assert data["router"]["image_tag"] == tag
    assert all(data["engines"][engine]["image_tag"] == tag for engine in ENGINES[:3])
    for engine in ENGINES:  # and resetting leaves it formatted too
        set_tag(str(target), engine, None)
        assert _unformatted(target) == "", (engine, target.read_text())


@pytest.mark.parametrize("tag", MISTYPED)
def test_a_mistyped_tag_is_written_in_double_quotes_as_fmt_writes_it(tmp_path, tag):
    target = write_config(tmp_path, "version: 1\nproject: p\nrouter:\n  port: 9000\n" + MODEL)
    set_tag(str(target), "router", tag)
    assert target.read_text() == f'version: 1\nproject: p\nrouter:\n  port: 9000\n  image_tag: "{tag}"\n' + MODEL


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_every_example_stays_formatted_after_image_tag(tmp_path, example):
    target = tmp_path / "aigo.yaml"
    target.write_text((EXAMPLES / example).read_text())
    for engine, tag in (("vllm", "3.3"), ("router", "08"), ("llama.cpp", "null")):
        set_tag(str(target), engine, tag)
        assert _unformatted(target) == "", (engine, target.read_text())


def test_fmt_check_finds_nothing_after_the_command(tmp_path):
    target = write_config(tmp_path, LAYOUTS["sections"])
    result = run_cli("image", "tag", "vllm", "3.3", "-f", str(target))
    assert result.returncode == 0, result.stderr
    assert '  vllm:\n    image_tag: "3.3"\n' in target.read_text()
    check = run_cli("fmt", "--check", str(target))
    assert check.returncode == 0 and check.stdout == "", check.stdout + check.stderr


# Formatted files with comments around the key the command edits or removes: above it, after it, after
# a flow mapping that holds it (two spaces before the `#`, as people write them), after a section it
# empties, with blank lines around.
COMMENTED = {
    "above": "version: 1\nproject: p\nengines:\n  vllm:\n    # about the tag\n    image_tag: v1\n" + MODEL,
    "after": "version: 1\nproject: p\nengines:\n  vllm:\n    image_tag: v1  # pinned: see notes\n" + MODEL,
    "both-with-sibling": (
        "version: 1\nproject: p\nengines:\n  vllm:\n    # about the tag\n    image_tag: v1  # eol\n"
        "  sglang:\n    image_tag: v0.5.6\n" + MODEL
    ),
    "flow-alone": "version: 1\nproject: p\nengines: {vllm: {image_tag: v1}}  # flow\n" + MODEL,
    "flow-beside": "version: 1\nproject: p\nengines: {vllm: {image: vllm/vllm-openai, image_tag: v1}}  # flow\n"
    + MODEL,
    "flow-engine": "version: 1\nproject: p\nengines:\n  vllm: {image_tag: v1}  # flow\n  sglang: {image_tag: v0.5.6}\n"
    + MODEL,
    "blank-lines": (
        "version: 1\nproject: p\n\n# engines\nengines:\n  vllm:\n    image_tag: v1   # pinned\n\n# the models\n" + MODEL
    ),
    "router": 'version: 1\nproject: p\nrouter: {port: 9000, image_tag: "3.2"}  # router\n' + MODEL,
    "router-block": 'version: 1\nproject: p\nrouter:\n  port: 9000\n  # the tag\n  image_tag: "3.2"  # pinned\n'
    + MODEL,
    "between-keys": (
        "version: 1\nproject: p\nengines:\n  vllm:\n    image: vllm/vllm-openai\n    # about the tag\n"
        "    image_tag: v1  # t\n  sglang:\n    image_tag: x\n" + MODEL
    ),
    "comment-blocks": (
        "version: 1\nproject: p\n\n# engines below\n\nengines:\n  # vllm\n  vllm:\n    # about\n    image_tag: v1\n"
        "\n# models\n" + MODEL
    ),
}


@pytest.mark.parametrize("tag", [None, "v1", "v0.31.0-cu129-longer", "3.3"])
@pytest.mark.parametrize("layout", sorted(COMMENTED))
def test_image_tag_keeps_every_comment_and_its_spacing_and_leaves_nothing_for_fmt(tmp_path, layout, tag):
    from collections import Counter

    from aigo_apply.edit.fmt import comments

    text = COMMENTED[layout]
    target = write_config(tmp_path, text)
    assert _unformatted(target) == "", text  # formatted to begin with
    engine = "router" if layout.startswith("router") else "vllm"
    set_tag(str(target), engine, tag)
    after = target.read_text()
    assert _unformatted(target) == "", after
    assert Counter(comments(after)) == Counter(comments(text)), after  # no comment lost
    for line in text.splitlines():  # the spaces before an end-of-line comment stay as written
        written = re.fullmatch(r"(.*\S)( +)(# .*)", line)
        if written and "image_tag" in line:
            gap, comment = written.group(2), written.group(3)
            rows = [row for row in after.splitlines() if re.fullmatch(f".*\\S +{re.escape(comment)}", row)]
            assert rows or tag is None, after  # a line left after a value keeps its comment there
            assert all(re.fullmatch(f".*\\S{gap}{re.escape(comment)}", row) for row in rows), after
    data = load_config(str(target)).data
    assert (data["router"] if engine == "router" else data.get("engines", {}).get("vllm", {})).get("image_tag") == tag
