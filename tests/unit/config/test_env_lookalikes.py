"""What users ordinarily write is not a secret written in clear (DESIGN.md 5a: names by whole parts,
values by their shape), and real secrets of each kind are still refused:

- a size, a time or a share under a secret's name (`MAX_TOKEN_LENGTH: 32k`) is no credential;
- prose that starts with Basic or Bearer is no Authorization header: its credential is a whole token
  shaped like one (a digit, a capital after a lower-case letter, base64's padding);
- a key prefix inside a hyphenated, dotted or slashed name (`org/whisper-large-v3-sk-finetuned`) is
  no key: a key is a token of its own;
- a path under a name whose last word says it holds one (`OPENAI_API_KEY_FILE: /run/secrets/openai`)
  is the secret's file, not the secret."""

from __future__ import annotations

import json

import pytest

from aigo_apply.config.env_rules import credential_kind
from aigo_apply.config.secret_names import location_name, path_value, plain_value, switch_value
from aigo_apply.errors import ConfigInvalid
from aigo_apply.observe.config_file import load_config

HEAD = "version: 1\nproject: lab\nmodels:\n  m:\n    source: {repo: %s}\n    context_length: 4096\n    gpus: none\n"
CLEAR = "looks like a secret written in clear"


def _problems(tmp_path, env: dict[str, str], repo: str = "org/m") -> dict[str, str]:
    """The last part of each refused field's path -> its message."""
    path = tmp_path / "aigo.yaml"
    body = "".join(f"      {name}: {json.dumps(value)}\n" for name, value in env.items())
    path.write_text(HEAD % json.dumps(repo) + ("    env:\n" + body if env else ""))
    try:
        load_config(str(path))
    except ConfigInvalid as exc:
        return {p.path.rsplit(".", 1)[-1]: p.message for p in exc.problems}
    return {}


# -- 1. sizes, times and shares ---------------------------------------------------------------------
SIZES = ["32k", "8K", "1.5M", "512MiB", "2GB", "2g", "1Gi", "64kb", "16 GiB", "512B", "1e6", "1.5e-3", "-4k"]
TIMES = ["100ms", "30s", "5m", "2h", "7d", "1w", "250us", "90min", "50%", "0.5%"]


@pytest.mark.parametrize("value", SIZES + TIMES)
def test_a_number_with_a_unit_is_no_secret_by_its_shape(value):
    assert switch_value(value)


def test_sizes_under_secret_names_validate(tmp_path):
    env = {"MAX_TOKEN_LENGTH": "32k", "TOKEN_BUDGET": "8k", "A_TOKEN": "8K", "B_TOKEN": "1.5M"}
    env |= {"C_TOKEN": "512MiB", "D_TOKEN": "2GB", "TOKEN_TTL": "30s", "TOKEN_SHARE": "50%"}
    assert _problems(tmp_path, env) == {}


@pytest.mark.parametrize(
    "value",
    ["32kx", "k32", "32 k b", "32kk", "1234567890123k", "12345678901234", "s3cr3t", "8kpassword", "1.5.3M",
     "32k hunter2", "0x1F", "2h30", "hunter2", "p4ss", "1e1234"],
)  # fmt: skip
def test_a_value_that_only_starts_like_a_size_keeps_the_secret_rule(tmp_path, value):
    assert not switch_value(value)
    assert CLEAR in _problems(tmp_path, {"DB_PASSWORD": value}).get("DB_PASSWORD", "")


# -- 2. Basic and Bearer: prose, or an Authorization header ------------------------------------------
PROSE = [
    "Basic conversation etiquette applies",
    "Basic instructions: answer briefly",
    "basic instructions: answer briefly",
    "BASIC INSTRUCTIONS: ANSWER BRIEFLY",
    "Basic troubleshooting steps first",
    "Bearer of unwelcome announcements",
    "Basic Qwen2.5-7B-Instruct chat template",  # a model name is no base64
    "You are a Basic assistant. Be concise.",
    "Ba\u017fic dXNlcjpwYXNzd29yZA==",  # not Basic: U+017F matched `s` only when the case was ignored
    "Basic JavaScript/TypeScript knowledge is assumed.",  # a token shaped like one, then more words
    "You know Basic PostgreSQL/MySQL administration",
    "Basic OpenAI/ChatGPT usage only",
    "Bearer Token2Go rules apply here",
]


@pytest.mark.parametrize("text", PROSE)
def test_prose_after_basic_or_bearer_is_no_authorization_header(text):
    assert credential_kind(text) is None


def test_prompts_that_start_with_basic_validate(tmp_path):
    env = {"VLLM_GPT_OSS_HARMONY_SYSTEM_INSTRUCTIONS": PROSE[0], "SYSTEM_PROMPT": PROSE[1]}
    assert _problems(tmp_path, env) == {}


HEADER = "an Authorization header value"


@pytest.mark.parametrize(
    "text, kind",
    [
        ("Basic dXNlcjpwYXNzd29yZA==", HEADER),
        ("  basic YWxpY2U6c2VjcmV0", HEADER),  # no padding, still base64 of user:password
        ("BASIC YWxpY2U6c2VjcmV0IQ==", HEADER),
        ("Bearer 0123456789abcdef0123", HEADER),
        ("bearer AbcdefGhijklmnop", HEADER),  # a capital after a lower-case letter: no English word
        ("Bearer abcdefghijklmnop.qrstuv~w/x+y-z=", HEADER),
        ("Authorization: Bearer 0123456789abcdef0123", HEADER),  # a whole header, no longer only at the start
        ("-H 'Authorization: Basic dXNlcjpwYXNzd29yZA=='", HEADER),
        ("Authorization:Bearer 0123456789abcdef0123", HEADER),
        ("Bearer sk-abc123abc123abc123abc", "an API key (sk-...)"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.sig", "a signed token (JWT)"),
    ],
)
def test_real_authorization_headers_are_still_found(text, kind):
    assert credential_kind(text) == kind


def test_a_header_written_in_clear_is_still_refused(tmp_path):
    refused = _problems(tmp_path, {"AUTH": "Basic dXNlcjpwYXNzd29yZA==", "PROMPT": PROSE[1]})
    assert list(refused) == ["AUTH"] and refused["AUTH"].startswith(f"the value looks like {HEADER} written in clear")


# -- 3. a key is a token of its own ---------------------------------------------------------------
NAMES = [
    "org/whisper-large-v3-sk-finetuned-commonvoice",
    "skt/sk-learn-regression-model-v2",
    "sk-learn-regression-model-v2",  # a hyphenated name of short words, even at the start
    "org/model-sk-abcdefghijklmnopqrstuv",
    "org/hf_abcdefghijklmnopqrstuvwxyz",
    "org/x-ghp_abcdefghijklmnopqrstuvwx",
    "org/a.github_pat_abcdefghijklmnopqrstuvwx",
    "org/x-glpat-abcdefghijklmnopqrst",
    "org/x-xoxb-1234567890-abc",
    "org/x-AKIAABCDEFGHIJKLMNOP",
    "org/x-AIzaabcdefghijklmnopqrstuvwxyz0123456",
    "org/x-npm_abcdefghijklmnopqrstuvwxyz01234",
    "org/x-sk_live_abcdefghijklmnop",
    "pypi-package-description-classifier-v1",
    "org/pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoLWlqa2wtbW5vcA",
]


@pytest.mark.parametrize("text", NAMES)
def test_a_key_prefix_inside_a_name_is_no_key(text):
    assert credential_kind(text) is None


@pytest.mark.parametrize("repo", NAMES[:2])
def test_repos_named_with_sk_validate(tmp_path, repo):
    assert _problems(tmp_path, {}, repo=repo) == {}


SK = "an API key (sk-...)"


@pytest.mark.parametrize(
    "text, kind",
    [
        ("sk-proj-AbCdEf0123456789xyzXYZ", SK),
        ("  sk-proj-AbCdEf0123456789xyzXYZ", SK),
        ("Authorization: Bearer sk-proj-AbCdEf0123456789xyzXYZ", SK),
        ("https://api.example.com/v1?key=sk-proj-AbCdEf0123456789xyzXYZ", SK),
        ('{"api_key":"sk-proj-AbCdEf0123456789xyzXYZ"}', SK),
        ("--api-key sk-ant-api03-AbCdEf0123456789xyzXYZ-AbCd", SK),
        ("sk-" + "a" * 20, SK),
        ("hf_abcdefghijklmnopqrstuvwxyz", "a Hugging Face token (hf_...)"),
        ("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz", "a Hugging Face token (hf_...)"),
        ("https://ghp_abcdefghijklmnopqrstuvwx@github.com/o/r", "a GitHub token"),  # a token as a URL's user
        ("token: github_pat_abcdefghijklmnopqrstuvwx", "a GitHub token"),
        ("glpat-abcdefghijklmnopqrst", "a GitLab token"),
        ("xoxb-1234567890-abc", "a Slack token"),
        ("AWS_ACCESS_KEY_ID=AKIAABCDEFGHIJKLMNOP", "an AWS access key"),
        ("(AIzaabcdefghijklmnopqrstuvwxyz0123456)", "a Google API key"),
        ("npm_abcdefghijklmnopqrstuvwxyz01234", "a package registry token"),
        ("pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoLWlqa2wtbW5vcA", "a package registry token"),
        ("sk_live_abcdefghijklmnop", "a Stripe key"),
    ],
)
def test_keys_of_every_kind_are_still_found(text, kind):
    assert credential_kind(text) == kind


def test_a_key_written_in_clear_is_still_refused(tmp_path):
    refused = _problems(
        tmp_path, {"OPENAI": "sk-proj-AbCdEf0123456789xyzXYZ"}, repo="org/sk-proj-AbCdEf0123456789xyzXYZ"
    )
    assert SK in refused["OPENAI"] and "repo" not in refused  # inside a slashed name: a name
    refused = _problems(tmp_path, {}, repo="sk-proj-AbCdEf0123456789xyzXYZ")
    assert SK in refused["repo"]


# -- 4. a location under a secret's name ---------------------------------------------------------
@pytest.mark.parametrize(
    "name, location",
    [("OPENAI_API_KEY_FILE", True), ("HF_TOKEN_PATH", True), ("DB_PASSWORD_DIR", True), ("apiKeyFile", True),
     ("SECRET_FILES", True), ("TOKEN_DIRECTORY", True), ("OPENAI_API_KEY", False), ("FILE_TOKEN", False),
     ("TOKEN_PROFILE", False), ("TOKEN_KEYFILE", False), ("", False)],
)  # fmt: skip
def test_a_location_is_named_by_the_last_whole_word(name, location):
    assert location_name(name) is location


@pytest.mark.parametrize("value", ["/run/secrets/openai", "~/.aigo/secrets/hf", "./secrets/k", "../k", "/a:/b"])
def test_paths_by_their_shape(value):
    assert path_value(value)


@pytest.mark.parametrize("value", ["s3cr3t", "run/secrets", "~alice/k", "/a b", "/a\tb", "", "sk-/x"])
def test_other_values_are_no_path(value):
    assert not path_value(value)


def test_paths_under_location_names_validate(tmp_path):
    env = {"OPENAI_API_KEY_FILE": "/run/secrets/openai", "HF_TOKEN_PATH": "/run/secrets/hf"}
    env |= {"DB_PASSWORD_FILE": "~/.aigo/secrets/db", "apiKeyFile": "./key"}
    assert _problems(tmp_path, env) == {}


@pytest.mark.parametrize(
    "name, value",
    [
        ("OPENAI_API_KEY_FILE", "s3cr3t-value-written-in-clear"),  # a location's name, a secret's value
        ("HF_TOKEN_PATH", "hunter2hunter2"),
        ("OPENAI_API_KEY", "/run/secrets/openai"),  # a path, but the name says the value is the key
        ("FILE_TOKEN", "/run/secrets/openai"),
        ("TOKEN_FILE", "/run/secrets/my key"),
    ],
)
def test_a_secret_under_a_location_name_or_a_path_under_a_secret_name_is_still_refused(tmp_path, name, value):
    assert not plain_value(name, value)
    assert CLEAR in _problems(tmp_path, {name: value}).get(name, "")


def test_a_credential_under_a_location_name_is_still_refused(tmp_path):
    refused = _problems(tmp_path, {"OPENAI_API_KEY_FILE": "/x?key=sk-proj-AbCdEf0123456789xyzXYZ"})
    assert SK in refused["OPENAI_API_KEY_FILE"]
