"""Kubernetes object names are unique by construction: every name carries a hash of
64 bits of what it names (a 24-bit one let two valid aliases meet, found in under a second), and
validation refuses two models whose names or name labels would still meet (a hash collision, or an
alias written as another's shortened label), naming both aliases."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aigo_apply.config import kube_names
from aigo_apply.config.names import ALIAS_RE
from aigo_apply.errors import ConfigInvalid
from aigo_apply.observe.config_file import load_config

MODEL = "{source: {repo: org/m}, context_length: 4096, gpus: none}"
HEX16 = r"[0-9a-f]{16}"
ALIASES = st.from_regex(ALIAS_RE, fullmatch=True).filter(lambda a: len(a) <= 64)


def _problems(tmp_path, *aliases: str, project: str = "lab") -> list[str]:
    path = tmp_path / "aigo.yaml"
    body = "".join(f"  {alias!r}: {MODEL}\n" for alias in aliases)
    path.write_text(f"version: 1\nproject: {project}\nmodels:\n{body}")
    try:
        load_config(str(path))
    except ConfigInvalid as exc:
        return [p.format().replace(str(path), "F") for p in exc.problems]
    return []


@settings(max_examples=300, deadline=None)
@given(alias=ALIASES, project=st.from_regex(r"[a-z0-9][a-z0-9_-]{0,31}", fullmatch=True))
def test_every_name_carries_a_64_bit_hash_and_is_a_dns_label(alias, project):
    names = kube_names.model_names(project, alias)
    assert re.fullmatch(rf"aigo-[a-z0-9-]+-{HEX16}", names["Deployment and Service"])
    assert re.fullmatch(rf"aigo-[a-z0-9-]+-{HEX16}-env", names["Secret"])
    assert re.fullmatch(rf"aigo-[a-z0-9-]+-{HEX16}-{HEX16}", kube_names.storage_name(project, alias, "weights"))
    assert re.fullmatch(rf"aigo-[a-z0-9-]+-{HEX16}", kube_names.router_name(project))
    assert re.fullmatch(rf"aigo-[a-z0-9-]+-{HEX16}", kube_names.hub_secret_name(project))
    assert all(len(n) <= 63 and kube_names.DNS_LABEL.fullmatch(n) for k, n in names.items() if "label" not in k)
    label = kube_names.label_value(alias)
    assert kube_names.LABEL_VALUE.fullmatch(label) and len(label) <= 63
    assert label == alias or re.search(rf"(^|-){HEX16}$", label)


def test_many_aliases_that_sanitise_alike_never_meet():
    """Long aliases that share the part of a name that survives the cut differ only by the hash: with
    24 bits, 20000 of them held about a dozen pairs of equal names."""
    aliases = [f"{'a' * 52}.{i:06d}" for i in range(20000)]
    for name in ("Deployment and Service", "volumes and download Jobs"):
        made = {kube_names.model_names("lab", alias)[name] for alias in aliases}
        assert len(made) == len(aliases), name
    volumes = {kube_names.storage_name("lab", "m", f"weights {i}") for i in range(20000)}
    assert len(volumes) == 20000  # a model's new volume never takes its old one's name


def test_an_alias_written_as_anothers_shortened_label_is_refused_naming_both(tmp_path):
    long = "A" * 64  # a valid alias, but no label value (63 at most): its label is cut and hashed
    twin = kube_names.label_value(long)
    assert twin != long and ALIAS_RE.match(twin)
    found = _problems(tmp_path, long, twin)
    assert len(found) == 1, found
    assert f"F:5:3: models.{twin}: model '{twin}' would give its Kubernetes label app.kubernetes.io/name" in found[0]
    assert f"which model '{long}' has too; rename one of them" in found[0]


def test_any_collision_of_object_names_is_refused_whatever_its_cause(tmp_path, monkeypatch):
    """What a 64-bit hash makes impractical is still checked: with the hash made constant, names meet."""
    monkeypatch.setattr(kube_names, "digest", lambda *parts, length=16: "0" * length)
    found = _problems(tmp_path, "a.b", "a_b", "c")
    assert any(
        f.startswith("F:5:3: models.a_b: model 'a_b' would give its Kubernetes Deployment and Service the name ")
        and "which model 'a.b' has too" in f
        for f in found
    ), found
    assert not any("models.c:" in f for f in found)
    router = _problems(tmp_path, "router.")  # slugs like the router's own name
    assert any("which the router has too" in f for f in router), router


@pytest.mark.parametrize("aliases", [("a.b", "a_b", "A-b2"), ("qwen3-8b", "qwen3_8b", "Qwen3.8B")])
def test_aliases_that_only_sanitise_alike_validate(tmp_path, aliases):
    assert _problems(tmp_path, *aliases) == []
