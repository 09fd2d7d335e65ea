"""The model store's folder of a download is an injective function of what it holds (kind, repo,
revision): no two sources share a folder, whatever valid repo ids and git ref names they use (`/`,
`--`, `.`, unicode); the escaping reads back (a decoder here proves it), and the folders of ordinary
names are the older layout's, so a store keeps working across the upgrade."""

from __future__ import annotations

import hashlib
import re
from pathlib import PurePosixPath

from hypothesis import given, settings
from hypothesis import strategies as st

from aigo_apply.config.schema import schema
from aigo_apply.desired.model_store import MAX_NAME, downloads, legacy_dir, repo_dir, store_name

STORE = PurePosixPath("/store")
SOURCE = schema()["$defs"]["source"]["properties"]


def decode(name: str) -> str:
    """store_name's inverse, for a name that is not hashed: `%XX` is a byte, a lone `-` is `-`, and an
    even run of `-` is half as many `/` (an odd run longer than one never occurs)."""
    assert "%%" not in name
    out, i = bytearray(), 0
    while i < len(name):
        if name[i] == "%":
            out.append(int(name[i + 1 : i + 3], 16))
            i += 3
        elif name[i] == "-":
            run = len(name[i:]) - len(name[i:].lstrip("-"))
            assert run == 1 or run % 2 == 0, name
            out += b"-" if run == 1 else b"/" * (run // 2)
            i += run
        else:
            out += name[i].encode()
            i += 1
    return out.decode("utf-8", "surrogatepass")


# -- what users write: Hugging Face repo ids (the schema's, and the Hub's own \w with unicode) and
# -- git ref names (git check-ref-format's rules), with the characters that collided before

_WORD = st.sampled_from(list("abcXYZ019_") + ["é", "中", "ß"])
_PART = st.text(st.one_of(_WORD, st.sampled_from(list("-._"))), min_size=0, max_size=12)
HF_REPO = st.builds(lambda a, b, c, d: f"{a}{b}/{c}{d}", _WORD, _PART, _WORD, _PART).filter(
    lambda r: all(len(p) <= 96 for p in r.split("/"))
)
SCHEMA_REPO = st.from_regex(SOURCE["repo"]["pattern"], fullmatch=True)
SCHEMA_REVISION = st.from_regex(SOURCE["revision"]["pattern"], fullmatch=True)


def is_ref_name(ref: str) -> bool:
    """git check-ref-format (with --allow-onelevel): what a branch or tag may be called."""
    if not ref or ref == "@" or ref.startswith("/") or ref.endswith(("/", ".")) or "//" in ref:
        return False
    if ".." in ref or "@{" in ref or re.search(r"[\x00-\x20\x7f~^:?*\[\\]", ref):
        return False
    return all(part and not part.startswith(".") and not part.endswith(".lock") for part in ref.split("/"))


REF = st.text(st.one_of(_WORD, st.sampled_from(list("/-._@%+"))), min_size=1, max_size=40).filter(is_ref_name)
KIND = st.sampled_from(["model", "adapter"])


def folder(kind: str, repo: str, revision: str) -> PurePosixPath:
    return repo_dir(STORE, repo, revision, kind)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=80), HF_REPO, SCHEMA_REPO, REF, SCHEMA_REVISION))
def test_a_folder_name_reads_back_to_its_text_so_no_two_texts_share_one(text):
    name = store_name(text)
    assert re.fullmatch(r"[A-Za-z0-9._%-]+", name) and not name.startswith(".")  # one plain folder, never hidden
    assert len(name) <= MAX_NAME
    if "%%" in name:  # too long to keep whole (or empty): its start, and a hash of the whole text
        assert name.endswith("%%" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32])
    else:
        assert decode(name) == text


def _confusions(text: str) -> list[str]:
    """Texts an escaping might mistake for `text`: each `/` as `--` and back, a `-` more or less, `%`
    spelled out, a leading dot."""
    return [
        text.replace("/", "--"),
        text.replace("--", "/"),
        text.replace("-", "--"),
        text.replace("-/", "/-"),
        text.replace("/", "-/"),
        text.replace("%2D", "-"),
        text.replace("-", "%2D"),
        "." + text,
        text + "-",
        "-" + text,
    ]


@settings(max_examples=300, deadline=None)
@given(KIND, st.one_of(HF_REPO, SCHEMA_REPO), st.one_of(REF, SCHEMA_REVISION), st.data())
def test_two_sources_never_share_a_folder(kind, repo, revision, data):
    here = folder(kind, repo, revision)
    assert here.parent.parent in (STORE, STORE / "adapters") and len(here.relative_to(STORE).parts) in (2, 3)
    other_kind = "adapter" if kind == "model" else "model"
    assert folder(other_kind, repo, revision) != here  # a model and an adapter of one repo@revision
    for other in _confusions(revision):
        assert (folder(kind, repo, other) == here) == (other == revision), (revision, other)
    for other in _confusions(repo):
        if other.count("/") == 1:
            assert (folder(kind, other, revision) == here) == (other == repo), (repo, other)
    repo2 = data.draw(st.one_of(HF_REPO, SCHEMA_REPO))
    revision2 = data.draw(st.one_of(REF, SCHEMA_REVISION))
    kind2 = data.draw(KIND)
    assert (folder(kind2, repo2, revision2) == here) == ((kind2, repo2, revision2) == (kind, repo, revision))


def test_the_sources_that_shared_a_folder_before_have_one_each():
    assert folder("model", "org/m", "feature/x") != folder("model", "org/m", "feature--x")
    assert folder("model", "a--b/c", "main") != folder("model", "a/b--c", "main")
    assert folder("model", "org/m", "main") != folder("adapter", "org/m", "main")
    assert folder("model", "org/m", "main.old") != folder("model", "org/m", "main").with_name(".main.old")
    long_a, long_b = "-" * 100 + "a", "-" * 100 + "b"  # both over MAX_NAME escaped: hashed, still two
    assert store_name(long_a) != store_name(long_b) and "%%" in store_name(long_a)


def test_ordinary_names_keep_the_older_layouts_folder():
    assert folder("model", "Qwen/Qwen3-8B", "main") == STORE / "Qwen--Qwen3-8B" / "main"
    assert folder("model", "unsloth/Qwen3-4B-GGUF", "refs/pr/1") == STORE / "unsloth--Qwen3-4B-GGUF" / "refs--pr--1"
    assert folder("model", "org/m", "v1.0_rc-2") == STORE / "org--m" / "v1.0_rc-2"
    assert folder("adapter", "org/sql-lora", "r1") == STORE / "adapters" / "org--sql-lora" / "r1"
    assert folder("model", "org/m", "feature--x") == STORE / "org--m" / "feature%2D%2Dx"


def test_a_model_and_an_adapter_of_one_repo_are_two_downloads_and_the_older_folder_is_named():
    specs = {
        "a": {"source": {"repo": "org/m", "revision": "r1"}, "model_dir": str(folder("model", "org/m", "r1"))},
        "b": {
            "source": {"repo": "org/base", "revision": "main"},
            "model_dir": str(folder("model", "org/base", "main")),
            "adapters": {
                "x": {
                    "source": {"repo": "org/m", "revision": "r1"},
                    "adapter_dir": str(folder("adapter", "org/m", "r1")),
                }
            },
        },
    }
    found = {(d["dest"], d.get("kind", "model"), tuple(d["models"])) for d in downloads(specs)}
    assert found == {
        ("/store/org--m/r1", "model", ("a",)),
        ("/store/org--base/main", "model", ("b",)),
        ("/store/adapters/org--m/r1", "adapter", ("b",)),
    }
    adapter = next(d for d in downloads(specs) if d.get("kind") == "adapter")
    assert legacy_dir(adapter) == "/store/org--m/r1"  # where the older layout put it, beside the model
    moved = {"repo": "org/m", "revision": "feature--x", "dest": str(folder("model", "org/m", "feature--x"))}
    assert legacy_dir(moved) == "/store/org--m/feature--x"
    same = {"repo": "org/m", "revision": "feature/x", "dest": str(folder("model", "org/m", "feature/x"))}
    assert legacy_dir(same) is None  # its folder is the older one: its marker is checked there
    assert legacy_dir({"repo": "org/m", "revision": "r1", "dest": "/elsewhere/x/y"}) is None  # not the store's
