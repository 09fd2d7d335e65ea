"""`aigo-apply image tag ENGINE TAG` / `--reset`: one edit of the file, with every other line kept as
written (comments, flow mappings, CRLF line ends), validated before it replaces the file, atomic,
mode kept; and the message an empty `image_tag:` gets from validate."""

from __future__ import annotations

import os
import stat

import pytest

from aigo_apply.edit.image_tag import patch, set_tag
from aigo_apply.errors import AigoError, ConfigInvalid, UsageProblem
from aigo_apply.observe.config_file import load_config

from helpers.cli import run_cli
from helpers.configs import write_config
from helpers.paths import EXAMPLES

MODEL = "models:\n  a: {source: {path: /m}, context_length: 9, gpus: none}\n"


def _added_and_removed(before: str, after: str) -> tuple[list[str], list[str]]:
    old, new = before.splitlines(), after.splitlines()
    return [line for line in new if line not in old], [line for line in old if line not in new]


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_set_then_reset_touches_only_the_tag_lines_of_every_example(tmp_path, example):
    original = (EXAMPLES / example).read_text()
    target = tmp_path / example
    target.write_text(original)
    change = set_tag(str(target), "vllm", "v0.31.0-cu129")
    assert change.changed and change.after == "v0.31.0-cu129"
    edited = target.read_text()
    assert load_config(str(target)).data["engines"]["vllm"]["image_tag"] == "v0.31.0-cu129"
    added, removed = _added_and_removed(original, edited)
    assert all("image_tag" in line or line.strip() in ("engines:", "vllm:") for line in added), added
    assert all("image_tag" in line or "engines:" in line for line in removed), removed
    # every comment of the file is still there
    comments = [line for line in original.splitlines() if line.lstrip().startswith("#")]
    assert [line for line in edited.splitlines() if line.lstrip().startswith("#")] == comments
    set_tag(str(target), "vllm", None)
    data = load_config(str(target)).data
    assert "image_tag" not in data.get("engines", {}).get("vllm", {})
    if "vllm:" not in original:  # no vllm section before: set then reset gives the file back as it was
        assert target.read_text() == original


def test_a_new_engines_section_goes_before_the_comments_that_head_models(tmp_path):
    text = "# top\nversion: 1\nproject: p\nrouter:\n  port: 9000   # the endpoint\n\n# the models\n" + MODEL
    target = write_config(tmp_path, text)
    change = set_tag(str(target), "vllm", "v0.31.0-cu129")
    assert (change.before, change.after) == (None, "v0.31.0-cu129")
    assert target.read_text() == (
        "# top\nversion: 1\nproject: p\nrouter:\n  port: 9000   # the endpoint\n"
        "engines:\n  vllm:\n    image_tag: v0.31.0-cu129\n\n# the models\n" + MODEL
    )


def test_replacing_a_tag_keeps_its_comment_and_the_file_indentation(tmp_path):
    text = "version: 1\nproject: p\nengines:\n    vllm:\n        image_tag: v0.30.1   # pinned\n" + MODEL
    target = write_config(tmp_path, text)
    change = set_tag(str(target), "vllm", "v0.31.0")
    assert (change.before, change.after) == ("v0.30.1", "v0.31.0")
    assert target.read_text() == text.replace("v0.30.1   # pinned", "v0.31.0   # pinned")


def test_flow_mappings_and_crlf_line_ends_are_kept(tmp_path):
    text = "version: 1\r\nproject: p\r\nengines: {vllm: {image: reg.local:5000/vllm}}\r\n" + MODEL.replace("\n", "\r\n")
    target = tmp_path / "aigo.yaml"
    target.write_bytes(text.encode())
    set_tag(str(target), "sglang", "v0.5.6-cu129")
    assert target.read_bytes().decode() == text.replace(
        "{vllm: {image: reg.local:5000/vllm}}",
        "{vllm: {image: reg.local:5000/vllm}, sglang: {image_tag: v0.5.6-cu129}}",
    )


@pytest.mark.parametrize("tag", ["3.10", "yes", "1_0", "0o17", "null"])
def test_a_tag_yaml_would_not_read_as_text_is_quoted(tmp_path, tag):
    target = write_config(tmp_path, "version: 1\nproject: p\nrouter:\n  port: 9000\n" + MODEL)
    set_tag(str(target), "router", tag)
    assert f'  image_tag: "{tag}"\n' in target.read_text()  # as fmt writes it (tests/unit/edit/test_image_tag_fmt.py)
    assert load_config(str(target)).data["router"]["image_tag"] == tag


def test_a_new_tag_is_written_as_fmt_writes_it_not_in_the_old_quotes(tmp_path):
    target = write_config(tmp_path, 'version: 1\nproject: p\nengines:\n  vllm: {image_tag: "v1"}\n' + MODEL)
    set_tag(str(target), "vllm", "v2")
    assert "  vllm: {image_tag: v2}\n" in target.read_text()


def test_reset_removes_the_line_and_sections_left_empty_but_keeps_comments(tmp_path):
    text = (
        "version: 1\nproject: p\nengines:\n  vllm:\n    image_tag: v0.31.0-cu129   # old driver\n# the models\n" + MODEL
    )
    target = write_config(tmp_path, text)
    change = set_tag(str(target), "vllm", None)
    assert (change.before, change.after) == ("v0.31.0-cu129", None)
    assert target.read_text() == "version: 1\nproject: p\n# old driver\n# the models\n" + MODEL  # no comment lost
    assert "built-in v0.31.0" in change.describe("aigo.yaml")


def test_reset_without_the_key_says_there_is_nothing_to_reset(tmp_path):
    target = write_config(tmp_path, "version: 1\nproject: p\n" + MODEL)
    before = target.read_text()
    result = run_cli("image", "tag", "vllm", "--reset", "-f", str(target))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        f"nothing to reset: {target} sets no engines.vllm.image_tag (the built-in v0.31.0 applies)"
    )
    assert target.read_text() == before


def test_the_command_prints_what_changed_and_keeps_the_mode(tmp_path):
    target = write_config(tmp_path, "version: 1\nproject: p\n" + MODEL)
    os.chmod(target, 0o640)
    result = run_cli("image", "tag", "vllm", "v0.31.0-cu129", "-f", str(target))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        f"{target}: engines.vllm.image_tag: (not set) -> v0.31.0-cu129; run `aigo-apply plan` to see what it changes"
    )
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["aigo.yaml"]  # no temporary file left behind
    again = run_cli("image", "tag", "vllm", "v0.31.0-cu129", "-f", str(target))
    assert again.returncode == 0 and "already v0.31.0-cu129" in again.stdout


def test_a_symlinked_config_is_refused_and_names_where_it_points(tmp_path):
    real = write_config(tmp_path, "version: 1\nproject: p\n" + MODEL, name="real.yaml")
    link = tmp_path / "aigo.yaml"
    link.symlink_to(real)
    before = real.read_text()
    with pytest.raises(AigoError, match=f"is a symbolic link \\(it points to {real}\\); aigo-apply never writes"):
        set_tag(str(link), "vllm", "v0.31.0-cu129")
    assert link.is_symlink() and real.read_text() == before
    set_tag(str(real), "vllm", "v0.31.0-cu129")
    assert "image_tag: v0.31.0-cu129" in real.read_text()


def test_an_edit_that_would_not_validate_is_refused_and_the_file_is_unchanged(tmp_path):
    target = tmp_path / "aigo.yaml"
    target.write_text((EXAMPLES / "three-engines.yaml").read_text())
    before = target.read_text()
    with pytest.raises(AigoError) as bad_tag:
        set_tag(str(target), "vllm", "vllm/vllm-openai:v0.31.0")
    assert "would not validate with engines.vllm.image_tag: vllm/vllm-openai:v0.31.0" in str(bad_tag.value)
    assert "write only the tag here" in str(bad_tag.value) and str(target) in str(bad_tag.value)
    with pytest.raises(AigoError) as needed:  # a model runs on sglang, which has no built-in tag
        set_tag(str(target), "sglang", None)
    assert "would not validate without engines.sglang.image_tag" in str(needed.value)
    assert target.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["aigo.yaml"]


def test_usage_problems(tmp_path):
    target = write_config(tmp_path, "version: 1\nproject: p\n" + MODEL)
    with pytest.raises(UsageProblem, match="unknown engine 'tgi'"):
        set_tag(str(target), "tgi", "1")
    with pytest.raises(UsageProblem, match="the tag is empty"):
        set_tag(str(target), "vllm", " ")
    neither = run_cli("image", "tag", "vllm", "-f", str(target))
    both = run_cli("image", "tag", "vllm", "v1", "--reset", "-f", str(target))
    assert neither.returncode == both.returncode == 64 and "give either TAG or --reset" in both.stderr


def test_an_empty_tag_in_the_file_can_be_set_and_reset(tmp_path):
    target = write_config(tmp_path, "version: 1\nproject: p\nengines:\n  vllm:\n    image_tag:\n" + MODEL)
    assert set_tag(str(target), "vllm", "v0.31.0").before == ""
    assert "    image_tag: v0.31.0\n" in target.read_text()


def test_a_layout_the_writer_cannot_reproduce_is_refused_not_restyled():
    original = "a:\n   b: 1\n   c: 2\n"  # three-space indentation: never what the writer produces
    assert patch(original, "a:\n  b: 1\n  c: 2\n", "a:\n  b: 1\n  c: 3\n") is None
    assert patch("a: 1   \nb: 2\n", "a: 1\nb: 2\n", "a: 1\nb: 3\n") == "a: 1   \nb: 3\n"


@pytest.mark.parametrize(
    "section, message",
    [
        ("engines:\n  vllm:\n    image_tag:\n", "engines.vllm.image_tag: is empty: remove the line to use v0.31.0"),
        ('engines: {vllm: {image_tag: ""}}\n', "engines.vllm.image_tag: is empty: remove the line to use v0.31.0"),
        ("router:\n  image_tag:\n", "router.image_tag: is empty: remove the line to use 3.2"),
        (
            "engines:\n  sglang: {image_tag: }\n",
            "engines.sglang.image_tag: is empty: sglang has no built-in tag, so write one (such as v0.5.6-cu129)",
        ),
    ],
)
def test_an_empty_image_tag_says_how_to_use_the_built_in_one(tmp_path, section, message):
    target = write_config(tmp_path, "version: 1\nproject: p\n" + section + MODEL)
    with pytest.raises(ConfigInvalid) as invalid:
        load_config(str(target))
    lines = [p.format() for p in invalid.value.problems]
    assert len(lines) == 1 and message in lines[0], lines
    assert "write a value" not in lines[0]  # not the generic hint for an empty value
