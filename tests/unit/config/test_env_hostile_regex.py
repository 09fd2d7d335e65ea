"""The patterns that look for credentials written in clear take time linear in the text they read
(config/env_rules.py): no input makes one scan a value again from each of its characters, and a
value that YAML aliases repeat 100,000 times is searched once.

No timing is asserted: the worst inputs known run in a child process at a size where a quadratic
pattern would take minutes (the URL pattern took 50 ms on 4096 letters, so 13 minutes on 512
KiB; the JWT one 11 ms on 4096 characters of `eyJ-`, 3 minutes on 512 KiB; the linear ones take
about a second for all), under a deadline that only a hang reaches. The patterns still find what the quadratic ones found."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aigo_apply.config.env_rules import CREDENTIAL_PATTERNS, credential_kind

# Each makes some pattern start at every character, or run to the end of the value and back.
WORST_UNITS = ["a", "a-", " ", ":", "eyJ-", "a_", "-", "a://:", "-----BEGIN ", "Bearer ", "Basic a", " sk-a", "sk-"]
WORST_UNITS += ["?token=a", "&api_key=1", "token=", "ya29.", " ya29.a", "gsk_", " gsk_a", "secret_access_key=", "a1"]
WORST_UNITS += [
    "nvapi-",
    "nvapi-a",
    "SG.a",
    "SG.a.",
    "dapi0",
    "?KEY=a1",
    "&sig=",
    "hooks.slack.com/services/T",
    "/hf_",
    "~/a",
]
CHILD = textwrap.dedent(
    """
    import sys, time
    from aigo_apply.config.env_rules import CREDENTIAL_PATTERNS, check_env
    from aigo_apply.config.secret_values import credential_kind, hide_credentials
    from pathlib import Path
    from aigo_apply.config.finder import Finder
    from aigo_apply.config.path_facts import HostPaths
    from aigo_apply.config.yaml_source import Marks, Source

    size = 512 * 1024
    for unit in sys.argv[1:]:
        text = (unit * (size // len(unit) + 1))[:size]
        for pattern, kind in CREDENTIAL_PATTERNS:
            pattern.search(text)
        if "/" in unit:  # every part of every path in it is judged, and hidden, on its own
            credential_kind(text)
            hide_credentials(text)
    value = ("eyJ-" * 1000)[:4000]  # the same object 99,900 times, as YAML aliases give it
    data = {"version": 1, "project": "p", "models": {}, **{f"l{i}": [value] * 999 for i in range(100)}}
    check_env(data, {}, Finder(Source("F", data, Marks(), [])), HostPaths(Path("/h"), Path("/h")))
    print("done")
    """
)


def test_the_worst_inputs_known_finish_on_half_a_megabyte():
    run = subprocess.run(
        [sys.executable, "-c", CHILD, *WORST_UNITS], capture_output=True, text=True, timeout=300, check=False
    )
    assert run.returncode == 0 and run.stdout.strip() == "done", run.stderr[-2000:]


# The patterns as they were (quadratic), to show that the linear ones find the same things.
OLD = {
    "a signed token (JWT)": re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\."),
    "a URL with a password": re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:[^/\s@]+@"),
}
NEW = {kind: pattern for pattern, kind in CREDENTIAL_PATTERNS if kind in OLD}
PIECES = ["eyJ", "a", "Z", "9", "-", "_", ".", "+", ":", "/", "@", " ", "://", "u:p@", "aaaaaaaa", "x-", "é"]


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=16).map("".join))
def test_the_linear_patterns_find_what_the_quadratic_ones_found(text):
    for kind, old in OLD.items():
        assert bool(NEW[kind].search(text)) == bool(old.search(text)), (kind, text)


@pytest.mark.parametrize(
    "text, kind",
    [
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig", "a signed token (JWT)"),
        ("token-eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig", "a signed token (JWT)"),
        ("a-b-c-d-e-f-eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.", "a signed token (JWT)"),
        ("x=eyJ-eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.", "a signed token (JWT)"),
        ("postgres://user:secret@db:5432/x", "a URL with a password"),
        ("1http://user:secret@host", "a URL with a password"),
        ("--x=-git+ssh://me:pw@host/repo", "a URL with a password"),
        ("mongodb+srv://u:p@cluster", "a URL with a password"),
        ("s3://key:secret@bucket", "a URL with a password"),
        ("a" * 100 + "://u:p@h", "a URL with a password"),
    ],
)
def test_credentials_are_still_found(text, kind):
    assert credential_kind(text) == kind


@pytest.mark.parametrize(
    "text",
    ["https://example.com/a:b@c", "http://host:8000/v1", "eyJ-" * 50, "a" * 4096, "user@host:path", "eyJabc.def."],
)
def test_look_alikes_are_not_credentials(text):
    assert credential_kind(text) is None
