"""Setting names are checked against the vLLM release the image tag names, when its facts are here:
schemas/vllm-vX.Y.Z.json for v0.31.0 (the default), v0.32.0, v0.33.0 and v0.34.0, each made
by scripts/vllm_facts.py from that release's package. Another release, or a moving tag, keeps the
warning that names were checked against v0.31.0."""

from __future__ import annotations

import json

import pytest

from aigo_apply.config.vllm_facts import VLLM_VERSION, checked_release, facts, known_releases, names
from aigo_apply.desired.build import build_desired
from aigo_apply.errors import ConfigInvalid
from aigo_apply.observe.config_file import load_config

from helpers.configs import host_context, write_config
from helpers.paths import ROOT

NEWER = [r for r in known_releases() if r != VLLM_VERSION]


def config(tmp_path, tag: str | None, settings: str) -> str:
    engines = f"engines: {{vllm: {{image_tag: {tag}}}}}\n" if tag else ""
    return (
        "version: 1\nproject: p\n" + engines + "models:\n  m:\n    source: {repo: a/b}\n    context_length: 4096\n"
        f"    gpus: none\n    vllm: {{{settings}}}\n"
    )


def problems(tmp_path, text: str) -> str:
    try:
        load_config(str(write_config(tmp_path, text)))
    except ConfigInvalid as err:
        return "\n".join(err.lines())
    return ""


def only_in(release: str, setting: str, than: str) -> list[str]:
    return sorted(set(names(setting, release)) - set(names(setting, than)))


def test_the_releases_with_facts():
    assert known_releases()[0] == VLLM_VERSION and len(NEWER) >= 1
    for release in known_releases():
        data = facts(release)
        assert data["version"] == release
        assert set(data) >= set(facts(VLLM_VERSION)) - {"prose_from"}  # the same facts, read from that release
        assert data["speculative_info"]["methods_needing_draft"]


@pytest.mark.parametrize(
    ("tag", "release"),
    [
        (None, "0.31.0"),
        ("v0.31.0-cu129", "0.31.0"),
        ("v0.32.0", "0.32.0"),
        ("v0.32.0-cu129", "0.32.0"),
        ("v0.34.0", "0.34.0"),
        ("v0.34.0-cu130", "0.34.0"),
        ("v0.30.1", "0.31.0"),
        ("latest", "0.31.0"),
        ("nightly-2026", "0.31.0"),
        ("v0.32.0.1", "0.31.0"),
    ],
)
def test_which_release_checks_a_tag(tag, release):
    assert checked_release(tag) == release


@pytest.mark.parametrize("release", NEWER)
@pytest.mark.parametrize("setting", ["tool_call_parser", "reasoning_parser", "moe_backend", "kv_cache_dtype"])
def test_a_name_new_in_a_release_is_valid_with_its_tag_and_refused_without(tmp_path, release, setting):
    new = only_in(release, setting, VLLM_VERSION)
    if not new:
        pytest.skip(f"no {setting} new in v{release}")
    text = config(tmp_path, None, f"{setting}: {new[0]}")
    assert f"is not a {setting} that vLLM v{VLLM_VERSION} knows" in problems(tmp_path, text)
    assert problems(tmp_path, config(tmp_path, f"v{release}", f"{setting}: {new[0]}")) == ""
    desired = build_desired(
        load_config(str(write_config(tmp_path, config(tmp_path, f"v{release}-cu129", f"{setting}: {new[0]}")))),
        host_context(),
    )
    assert new[0] in desired.models["m"].container.command  # the renderer's own check takes it too
    assert desired.warnings == ()  # the names were checked against the tag's own release


@pytest.mark.parametrize("release", NEWER)
def test_a_name_a_release_dropped_is_refused_with_its_tag(tmp_path, release):
    gone = only_in(VLLM_VERSION, "moe_backend", release)
    if not gone:
        pytest.skip(f"no moe_backend dropped in v{release}")
    assert problems(tmp_path, config(tmp_path, None, f"moe_backend: {gone[0]}")) == ""
    assert f"is not a moe_backend that vLLM v{release} knows" in problems(
        tmp_path, config(tmp_path, f"v{release}", f"moe_backend: {gone[0]}")
    )


def test_a_release_without_facts_keeps_the_warning(tmp_path):
    desired = build_desired(
        load_config(str(write_config(tmp_path, config(tmp_path, "v0.30.1", "max_num_seqs: 8")))), host_context()
    )
    assert len(desired.warnings) == 1 and "checked against vLLM v0.31.0" in desired.warnings[0]


def test_each_facts_file_says_where_its_prose_comes_from():
    for release in NEWER:
        data = json.loads((ROOT / "schemas" / f"vllm-v{release}.json").read_text())
        assert "prose_from" in data and data["version"] == release
