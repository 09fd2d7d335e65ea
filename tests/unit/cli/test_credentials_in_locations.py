"""A name shaped like a credential (an alias, an adapter's alias, an env variable's name, any key) is
refused, and the error's location never prints it: in text, in -o json's `path`, in a GitHub
annotation (a public CI log), and from every command that reports a file's problems (validate,
`image tag`, `import`), through the real command line. Every ConfigInvalid in the package is built
from problems whose credentials are hidden (config/secret_values.unquoted)."""

from __future__ import annotations

import ast
import json

import pytest

from helpers.cli import run_cli
from helpers.paths import ROOT

ALNUM = "Zt8kq2LmN4pR7sVx1wYbC3dE5fG6hJ9a"
KEYS = {
    "hugging-face": "hf_" + ALNUM[:30],
    "openai": "sk-" + ALNUM + ALNUM[:8],
    "github": "ghp_" + ALNUM + ALNUM[:4],
    "nvidia": "nvapi-" + ALNUM + ALNUM,
    "replicate": "r8_" + ALNUM + ALNUM[:5],
}
HEAD = "version: 1\nproject: lab\nmodels:\n"
MODEL = "    source: {repo: org/m}\n    context_length: 4096\n    gpus: none\n"
# Where a name stands, as the file's text with KEY in its place.
PLACES = {
    "an alias": HEAD + "  KEY:\n" + MODEL,
    "an adapter's alias": HEAD + "  m:\n" + MODEL + "    adapters:\n      KEY: {source: {repo: org/lora}}\n",
    "an env name": HEAD + "  m:\n" + MODEL + "    env:\n      KEY: x\n",
    "an unknown key": HEAD + "  m:\n" + MODEL + "router:\n  KEY: 1\n",
    "a key with dots": HEAD + "  m:\n" + MODEL + '    env:\n      "KEY.x": x\n',
    "a key written twice": HEAD + "  m:\n" + MODEL + "    env:\n      KEY: a\n      KEY: b\n",
}


def _never_shown(text: str, key: str) -> None:
    assert key not in text and key[-20:] not in text, text
    assert "not shown" in text, text


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("kind", sorted(KEYS))
def test_validate_never_prints_a_credential_shaped_name_in_any_format(tmp_path, kind, place):
    key = KEYS[kind]
    path = tmp_path / "aigo.yaml"
    path.write_text(PLACES[place].replace("KEY", key))
    for output in ("text", "json", "github"):
        result = run_cli("validate", "-f", str(path), "-o", output)
        assert result.returncode == 1, result.stdout + result.stderr
        _never_shown(result.stdout + result.stderr, key)
    problems = json.loads(run_cli("validate", "-f", str(path), "-o", "json").stdout)["problems"]
    assert any("not shown" in p["path"] for p in problems), problems


@pytest.mark.parametrize("kind", sorted(KEYS))
def test_image_tag_and_import_never_print_one_either(tmp_path, kind):
    key = KEYS[kind]
    config = tmp_path / "aigo.yaml"
    config.write_text(PLACES["a key written twice"].replace("KEY", key))
    tagged = run_cli("image", "tag", "vllm", "v0.31.0", "-f", str(config))
    assert tagged.returncode == 1, tagged.stdout + tagged.stderr
    _never_shown(tagged.stdout + tagged.stderr, key)
    definition = tmp_path / "m.baimodel"
    definition.write_text(
        "format: aigo-apply/model/1\nalias: m\nmodel:\n  source: {repo: org/m}\n  context_length: 4096\n"
        f"  env:\n    {key}: a\n    {key}: b\n"
    )
    imported = run_cli("import", str(definition))
    assert imported.returncode == 1, imported.stdout + imported.stderr
    _never_shown(imported.stdout + imported.stderr, key)


def test_every_config_invalid_is_built_from_unquoted_problems():
    """The class, not the examples: wherever the package raises ConfigInvalid, its problems went
    through unquoted (their messages and their locations), so no command prints a key that is a
    credential."""
    unguarded = []
    for path in sorted((ROOT / "aigo_apply").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ConfigInvalid":
                problems = node.args[1] if len(node.args) > 1 else None
                if not (isinstance(problems, ast.Call) and getattr(problems.func, "id", None) == "unquoted"):
                    unguarded.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert unguarded == []
