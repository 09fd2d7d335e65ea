"""What a platform lacks is declared by the platform and refused in one place (platforms/capabilities.py):
the words and exit codes users have read before, and no use case asking which platform it runs on."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import aigo_apply
from aigo_apply.errors import EXIT_ERROR, EXIT_USAGE, AigoError
from aigo_apply.platforms.capabilities import LACKS, refuse, refuse_lacking
from aigo_apply.platforms.docker.platform import DockerPlatform
from aigo_apply.platforms.kubernetes.platform import KubePlatform

PACKAGE = Path(aigo_apply.__file__).parent


def test_each_platform_declares_what_it_lacks():
    assert DockerPlatform.lacks == LACKS["docker"] == frozenset()
    assert KubePlatform.lacks == LACKS["kubernetes"] == {"this_host", "top", "bench", "saved_plan", "lock"}


@pytest.mark.parametrize(
    ("capability", "code", "text"),
    [
        ("top", EXIT_USAGE, "top: aigo-apply reads Docker's engines only for now (on a cluster: `kubectl top pods`)"),
        ("bench", EXIT_USAGE, "bench: aigo-apply measures Docker's engines only for now"),
        ("saved_plan", EXIT_USAGE, "--out: a saved plan is for Docker only for now (nothing was saved)"),
        ("lock", EXIT_USAGE, "--locked: aigo.lock pins what this machine runs; on a cluster it is not used"),
        (
            "this_host",
            EXIT_ERROR,
            "aigo.yaml deploys to Kubernetes (platform: kubernetes), and this command works on Docker only; "
            "on a cluster use validate, plan, apply, status, destroy and `render --as kubernetes` "
            "(those four also take --platform docker, to act on this machine's Docker instead)",
        ),
    ],
)
def test_a_missing_capability_is_refused_in_the_words_users_know(capability, code, text):
    refuse_lacking(LACKS["docker"], capability, "aigo.yaml")  # Docker lacks nothing: no refusal
    with pytest.raises(AigoError) as caught:
        refuse_lacking(LACKS["kubernetes"], capability, "aigo.yaml")
    assert (str(caught.value), caught.value.exit_code) == (text, code)
    with pytest.raises(AigoError, match="^" + text[:20].replace("(", r"\(").replace(".", r"\.")):
        refuse(capability, "aigo.yaml")


def test_no_use_case_asks_which_platform_it_runs_on():
    """No isinstance of a platform, no comparison of a platform's name: a use case asks the platform
    what it lacks. The one place that compares a name is where the platform is chosen
    (app/choose_platform.open_platform); `render --as kubernetes` compares an output form, not a platform.
    `add` opens no platform (it edits the file), so it looks up what the file's platform lacks (LACKS)."""
    found = []
    for path in sorted((PACKAGE / "app").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            text = ast.unparse(node) if isinstance(node, (ast.Call, ast.Compare)) else ""
            if text.startswith("isinstance(") and ("DockerPlatform" in text or "KubePlatform" in text):
                found.append(f"{path.name}:{node.lineno}: {text}")
            names = {"'kubernetes'", "'docker'"}
            if isinstance(node, ast.Compare) and any(n in text for n in names) and "request.form" not in text:
                found.append(path.name)
    assert found == ["choose_platform.py"]
