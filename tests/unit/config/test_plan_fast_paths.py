"""The quick paths a plan of many models takes (in-process plan work at N = 200) give
exactly what the plain definitions they replace give: the system and home folder rules by text
lookups (config/path_text.py), the credential search's quick "no", the label check that spells
out places only when something is found, and one resolution per folder in a build."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aigo_apply.config.env_rules import CREDENTIAL_PATTERNS, credential_kind
from aigo_apply.config.host_paths import (
    REMOVABLE_MEDIA,
    SECRETS_FOLDER,
    SYSTEM_DIRS,
    Protected,
    system_folder,
    unsafe_mount,
)
from aigo_apply.config.path_text import ancestors, at_or_below, below, home_rules
from aigo_apply.desired import labels, model_store
from aigo_apply.errors import UnsafeSetting
from aigo_apply.observe.host_paths import own_homes

from helpers.configs import host_context, with_paths

ADA = Path("/home/ada")
PARTS = ["home", "ada", "alice", "root", ".aigo", "secrets", "etc", "var", "lib", "docker", "run", "usr"]
PARTS += ["models", "data", "users", "", "x", "etcetera", "var2", "media"]
HOME_SETS = [
    (ADA, Path("/home/alice"), Path("/root"), Path("/var/lib/someuser-home")),
    (ADA, Path("/data/users"), Path("/data/users/alice"), Path("/data"), Path("/")),
    (Path("/home/ada/x"), "/home/str", PurePosixPath("/home/alice")),  # text and pure paths as given
    (),
]
paths = st.lists(st.sampled_from(PARTS), min_size=0, max_size=6).map(lambda p: "/" + "/".join(p))


def plain_system_folder(path: Path) -> Path | None:
    if at_or_below(path, Path(REMOVABLE_MEDIA)):  # removable disks, though inside /run
        return None
    return next((Path(s) for s in SYSTEM_DIRS if at_or_below(path, Path(s))), None)


def plain_home_rule(path: Path, homes: tuple, store: bool) -> str | None:
    """The loop over every home that HomeRules replaces (yours first)."""
    mine = own_homes(ADA)
    for each in sorted(mine | set(homes), key=lambda h: h not in mine):
        secrets = Path(f"{each}/{SECRETS_FOLDER}")
        if at_or_below(path, secrets):
            return f"the secrets folder {secrets} (where from_file secrets are kept)"
        if not store and path == each:
            return f"the home folder {each} of another account"
        if not store and below(each, path):
            return f"a folder that holds home folders ({each} is inside it)"
    return None


@settings(max_examples=400, deadline=None)
@given(paths)
def test_ancestors_are_exactly_the_folders_a_path_is_at_or_below(text):
    found = set(ancestors(text))
    assert text in found
    for folder in {text[:n] for n in range(1, len(text))}:  # every other prefix
        if not folder.endswith("/"):  # the folders a lookup is made for (none ends in '/')
            assert (folder in found) == at_or_below(text, folder), folder


@settings(max_examples=400, deadline=None)
@given(paths)
def test_system_folder_by_lookup_is_the_first_system_folder_of_the_list(text):
    assert system_folder(Path(text)) == plain_system_folder(Path(text))


@pytest.mark.parametrize("homes", HOME_SETS)
@settings(max_examples=300, deadline=None)
@given(path=paths, store=st.booleans())
def test_home_rules_give_the_message_the_loop_over_every_home_gave(homes, path, store):
    rules = home_rules(own_homes(ADA), homes, SECRETS_FOLDER)
    assert rules.first(str(Path(path)), store) == plain_home_rule(Path(path), homes, store)


def test_a_mount_that_holds_homes_names_the_first_home_yours_first():
    mine, homes = Path("/data/ada"), (Path("/data/users/bob"),)
    assert (
        unsafe_mount(Path("/data"), mine, (), homes=homes)
        == "a folder that holds home folders (/data/ada is inside it)"
    )
    secrets = unsafe_mount(Path("/home/alice/.aigo/secrets/k"), ADA, (), homes=HOME_SETS[0])
    assert secrets == "the secrets folder /home/alice/.aigo/secrets (where from_file secrets are kept)"


TEXTS = ["hf_", "sk-", "sk_live_", "ghp_", "github_pat_", "glpat-", "xoxb-", "AKIA", "ASIA", "AIza", "npm_", "pypi-"]
TEXTS += ["eyJ", ".", "://", "@", ":", "Bearer ", "bEaReR\t", " Basic ", "\u017fk-", "-----BEGIN RSA PRIVATE KEY", "-"]
TEXTS += ["_", "A" * 8, "abcdEFGH1234", "0123456789", "/", " ", "\n", "é", "\u212a"]
TEXTS += ["gsk_", "ya29.", "?", "&", "=", "token=", "access_token=", "api_key=", "Secret_Access_Key", '"', "+"]
TEXTS += ["nvapi-", "xai-", "pplx-", "r8_", "api_org_", "SG.", "dapi", "0a1b2c3d", "lsv2_pt_", "ACCESS_TOKEN=", "key="]
TEXTS += ["sig=", "X-Amz-Signature=", "hooks.slack.com/services/T0123456/", "B0123456/", "~/", "./", "a/"]
# A path written as a word of its own: each of its parts is a text of its own (written here from the rule).
PATH_WORD = re.compile(r"(?<![^\s=:,;|'\"`(\[{<>])(?:~|\.{1,2})?/[^\s'\"`]*")


def plain_credential_kind(text: str) -> str | None:
    parts = [text] + [part for word in PATH_WORD.finditer(text) for part in word.group().split("/")]
    return next((kind for part in parts for pattern, kind in CREDENTIAL_PATTERNS if pattern.search(part)), None)


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(TEXTS), max_size=8).map("".join) | st.text(max_size=40))
def test_the_quick_no_never_hides_a_credential(text):
    assert credential_kind(text) == plain_credential_kind(text)


def test_the_label_check_names_the_first_place_as_before():
    spec = {"env": {"A": "x", "B": ["ok", "hf_" + "a" * 30]}, "hf_" + "b" * 30: 1}
    with pytest.raises(UnsafeSetting, match=re.escape("spec.env.B[1]: refusing to store a Hugging Face token")):
        labels.references_only(spec)
    labels.references_only({"env": {"A": "x"}, "gpus": [0, 1], "n": None})


def test_a_build_judges_each_folder_once_and_says_why_for_each_model(tmp_path, monkeypatch):
    (tmp_path / "m").mkdir()
    host = host_context()
    calls = []
    real = model_store.unsafe_mount
    monkeypatch.setattr(model_store, "unsafe_mount", lambda p, *a, **k: calls.append(p) or real(p, *a, **k))
    mounts = model_store.Mounts(host, with_paths(host, tmp_path / "m", Path("/etc")))
    first = model_store.mountable(tmp_path, "m", "models.a.source.path", mounts)
    assert model_store.mountable(tmp_path, "m", "models.b.source.path", mounts) == first
    assert len(calls) == 1
    with pytest.raises(UnsafeSetting, match=r"^models\.c\.source\.path: '/etc' is the system folder /etc"):
        model_store.mountable(tmp_path, "/etc", "models.c.source.path", mounts)
    with pytest.raises(UnsafeSetting, match=r"^models\.d\.source\.path: '/etc' is the system folder /etc"):
        model_store.mountable(tmp_path, "/etc", "models.d.source.path", mounts)


def test_protected_places_still_come_first():
    place = Protected("aigo-apply's state folder", ADA / ".local/state/aigo-apply")
    assert unsafe_mount(ADA / ".local/state/aigo-apply/x", ADA, (place,), homes=()) == (
        f"inside aigo-apply's state folder ({place.folder})"
    )
