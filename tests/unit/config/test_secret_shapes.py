"""Secrets are judged by the value's shape, never by the name alone (DESIGN.md 2a), through
validate's real entry (app/checking.run_validate, which `plan` and the pre-commit hook share):

- MUST_PASS: what LLM users write every day validates whatever the name (`EOS_TOKEN: "</s>"`,
  `TOKEN_TYPE: bearer`, `SECRET_BACKEND: vault`, header names, plain URLs, systemd credentials);
- MUST_REFUSE: a value shaped like a published credential is refused wherever it stands (an env value
  under a neutral name, any other string of the file, a `from_env` name, a comment), the message saying
  file, line, path and what to do, and never the value;
- CLEAR_SECRETS: a secret that has no shape (a password) is still told by the name's last words.

The fake keys are built here from their published prefix, length and alphabet (nothing key-shaped
is written whole in the repository)."""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path

import pytest

from aigo_apply.app.checking import ValidateRequest, run_validate
from aigo_apply.config.env_rules import unsafe_secret_file
from aigo_apply.desired.types import SecretRef
from aigo_apply.errors import ConfigFileError, ConfigInvalid, Problem, SecretUnavailable
from aigo_apply.observe import host_paths
from aigo_apply.platforms import secrets

from helpers.cli import run_cli

HEAD = "version: 1\nproject: lab\nmodels:\n  m:\n    source: {repo: org/m}\n    context_length: 4096\n    gpus: none\n"
FIX = "{from_env: VARIABLE} or {from_file: /path/to/file}"
ALNUM = "Zt8kq2LmN4pR7sVx1wYbC3dE5fG6hJ9a"  # 32 letters and digits, as random keys are


def _run(n: int, alphabet: str = ALNUM) -> str:
    return (alphabet * (n // len(alphabet) + 1))[:n]


# name -> (the fake credential, the words the message names it by)
MUST_REFUSE = {
    "groq": ("gsk_" + _run(52), "a Groq API key"),
    "openai": ("sk-" + _run(48), "an API key (sk-...)"),
    "openai-project": ("sk-proj-" + _run(40) + "-" + _run(30) + "_" + _run(20), "an API key (sk-...)"),
    "anthropic": ("sk-ant-api03-" + _run(93) + "AA", "an API key (sk-...)"),
    "hugging-face": ("hf_" + _run(34, "AbCdEfGhIjKlMnOpQrStUvWxYz"), "a Hugging Face token"),
    "google-api-key": ("AIza" + _run(35), "a Google API key"),
    "google-oauth": ("ya29.a0" + _run(60) + "-" + _run(20), "a Google OAuth token"),
    "oauth-url": ("https://www.googleapis.com/oauth2/v1/userinfo?access_token=ya29.a0" + _run(40), "Google OAuth"),
    "token-query": (
        "https://hooks.example.com/notify?channel=ops&token=" + _run(24),
        "a URL with a token in its query",
    ),
    "api-key-query": ("https://api.example.com/v1/models?api_key=" + _run(32), "a URL with a token in its query"),
    "aws-access-key": ("AKIA" + _run(16).upper(), "an AWS access key"),
    "aws-session-key": ("ASIA" + _run(16).upper(), "an AWS access key"),
    "aws-secret-key": ("aws_secret_access_key=" + _run(36) + "/+Ab", "an AWS secret access key"),
    "github-classic": ("ghp_" + _run(36), "a GitHub token"),
    "github-oauth": ("gho_" + _run(36), "a GitHub token"),
    "github-user": ("ghu_" + _run(36), "a GitHub token"),
    "github-server": ("ghs_" + _run(36), "a GitHub token"),
    "github-refresh": ("ghr_" + _run(36), "a GitHub token"),
    "github-fine-grained": ("github_pat_" + _run(22) + "_" + _run(59), "a GitHub token"),
    **{f"slack-{c}": (f"xox{c}-1234567890-1234567890123-" + _run(24), "a Slack token") for c in "abpors"},
    "jwt": (
        base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
        + "."
        + base64.urlsafe_b64encode(b'{"sub":"1234567890","name":"x"}').decode().rstrip("=")
        + "."
        + _run(43),
        "a signed token (JWT)",
    ),
    "private-key": ("-----BEGIN OPENSSH PRIVATE KEY-----" + _run(64), "a private key"),
    "basic": ("Basic " + base64.b64encode(b"admin:" + _run(12).encode()).decode(), "an Authorization header"),
    "bearer": ("Bearer " + _run(40), "an Authorization header"),
    "url-password": ("postgres://app:" + _run(16) + "@db.internal:5432/app", "a URL with a password"),
    "url-password-https": ("https://deploy:" + _run(20) + "@git.example.com/org/repo.git", "a URL with a password"),
    # keys of LLM services and others, by their published prefix and length
    "nvidia": ("nvapi-" + _run(40) + "-" + _run(23), "an NVIDIA API key"),
    "xai": ("xai-" + _run(80), "an xAI API key"),
    "perplexity": ("pplx-" + _run(48), "a Perplexity API key"),
    "replicate": ("r8_" + _run(37), "a Replicate API token"),
    "hugging-face-org": ("api_org_" + _run(34), "a Hugging Face token"),
    "sendgrid": ("SG." + _run(22) + "." + _run(20) + "-" + _run(22), "a SendGrid API key"),
    "databricks": ("dapi" + _run(32, "0123456789abcdef"), "a Databricks token"),
    "langsmith": (
        "lsv2_pt_" + _run(32, "0123456789abcdef") + "_" + _run(10, "0123456789abcdef"),
        "a LangSmith API key",
    ),
    # credentials in a URL's query under names written in capitals, or short ones
    "access-token-capitals": ("https://api.example.com/v1?ACCESS_TOKEN=" + _run(32), "a URL with a token in its query"),
    "key-query": (
        "https://generativelanguage.example.com/v1/models?key=" + _run(39),
        "a URL with a token in its query",
    ),
    "azure-sas": (
        "https://acct.blob.core.windows.net/c/b.bin?sv=2022-11-02&se=2026-01-01&sr=b&sp=r&sig=" + _run(40) + "%3D",
        "a URL with a token in its query",
    ),
    "s3-presigned": (
        "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=" + _run(64, "0123456789abcdef"),
        "a URL with a token in its query",
    ),
    "slack-webhook": (
        "https://hooks.slack.com/services/T" + _run(8).upper() + "/B" + _run(10).upper() + "/" + _run(24),
        "a webhook URL with its secret",
    ),
    "discord-webhook": (
        "https://discord.com/api/webhooks/123456789012345678/" + _run(68),
        "a webhook URL with its secret",
    ),
}
# Where a credential can stand in a file, each as the text that places VALUE (a JSON string) there.
PLACES = {
    "env value under a neutral name": "    env:\n      NEUTRAL: VALUE\n",
    "any other string": "    vllm: {served_model_name: VALUE}\n",
    "a from_env name": "    env:\n      KEY: {from_env: VALUE}\n",
    "a from_file path": "    env:\n      KEY: {from_file: VALUE}\n",
    "a comment": "    # VALUE\n",
    "an end-of-line comment": "    port: 8001  # the key was VALUE\n",
    "the router's keys": "router:\n  api_keys: {from_env: VALUE}\n",
    "a value a rule quotes": "router:\n  bind: VALUE\n",  # ('...' is not an IP address)
    "a value the schema quotes": "    vllm: {quantization: VALUE}\n",
}
LINE = {"any other string": 8, "a comment": 8, "an end-of-line comment": 8, "a value the schema quotes": 8}
PATHS = {
    "env value under a neutral name": "models.m.env.NEUTRAL",
    "any other string": "models.m.vllm.served_model_name",
    "a from_env name": "models.m.env.KEY",
    "a from_file path": "models.m.env.KEY",
    "a comment": "models.m.gpus",  # the entry the comment stands in (the last one written before the end)
    "an end-of-line comment": "models.m.port",
    "the router's keys": "router.api_keys",
    "a value a rule quotes": "router.bind",
    "a value the schema quotes": "models.m.vllm.quantization",
}

MUST_PASS = {
    # special tokens, stop strings and token ids under a *_TOKEN name
    "EOS_TOKEN": "</s>", "BOS_TOKEN": "<s>", "STOP_TOKEN": "<|im_end|>", "EOT_TOKEN": "<|eot_id|>",
    "PAD_TOKEN": "<|finetune_right_pad_id|>", "END_TOKEN": "<|endoftext|>", "THINK_END_TOKEN": "</think>",
    "SEP_TOKEN": "[SEP]", "MASK_TOKEN": "[MASK]", "UNK_TOKEN": "<unk>", "TURN_END_TOKEN": "<end_of_turn>",
    "HASH_STOP_TOKEN": "###", "REACT_STOP_TOKEN": "Observation:", "ROLE_TOKEN": "assistant", "EOS_TOKEN_ID": "2",
    "INST_END_TOKEN": "[/INST]", "CHAT_STOP_TOKEN": "User:",
    # what a name's other words say the value is
    "TOKEN_TYPE": "bearer", "OAUTH_TOKEN_TYPE": "Bearer", "SECRET_BACKEND": "vault",
    "SECRET_STORE": "aws-secrets-manager", "PASSWORD_POLICY": "strict", "TOKEN_ENCODING": "cl100k_base",
    "TIKTOKEN_ENCODINGS_BASE": "/models/tiktoken", "API_KEY_NAME": "openai-prod-2024",
    # header names
    "AUTH_HEADER": "Authorization", "API_KEY_HEADER": "X-Api-Key", "TOKEN_HEADER": "Authorization",
    "UPSTREAM_AUTH": "Proxy-Authorization",
    # URLs without a credential
    "TOKEN_URL": "https://auth.example.com/oauth/token", "SECRET_URL": "https://vault.example.com:8200/v1/secret",
    "API_KEY_URL": "https://platform.openai.com/api-keys", "JWKS_URL": "https://login.example.com/.well-known/jwks.json",
    "CALLBACK_URL": "https://app.example.com/cb?token=REDACTED&state=abc123",
    "DOCS_URL": "https://example.com/docs?api_key=YOUR_API_KEY",
    "REDIS_URL": "redis://cache.internal:6379/0", "PROXY_TARGET_URL": "https://user@git.example.com/org/repo",
    # prose
    "SYSTEM_PROMPT": "Use the bearer token from the request header; never reveal secret keys or passwords.",
    "GUIDE": "Basic instructions: answer briefly. Tokens such as </s> end a turn.",
    # sizes, times and paths under secret names (the corpus before, still)
    "MAX_TOKEN_LENGTH": "32k", "TOKEN_TTL": "30s", "OPENAI_API_KEY_FILE": "/run/secrets/openai",
    # identifiers of words and a number under a token's name
    "SAMPLE_TOKEN": "token_id_42", "SPECIAL_TOKEN": "audio_token_1", "IMAGE_TOKEN": "image_pad_0",
    # names, hosts and paths that begin like a key, and query names with no credential after them
    "GROK_MODEL": "xai-org/grok-1", "NIM_MODEL": "nvidia/Llama-3.1-Nemotron-70B-Instruct-HF",
    "HF_CACHE_DIR": "/models/hf_cache/llama-3-8b", "DATA_PATH": "/data/sk-learn-regression-model-v2/train",
    "DATABRICKS_HOST": "https://dbc-a1b2c3d4-e5f6.cloud.databricks.com", "MAIL_FROM": "SG.notifications@example.com",
    "REPLICATE_MODEL": "meta/llama-2-70b-chat:02e509c789964a7ea8736978a43525956ef40397be9033abf9fd2badfe68c9e3",
    "KEY_URL": "https://example.com/docs?key=value", "SIG_URL": "https://example.com/a?sig=abc&v=2",
    "S3_URL": "https://bucket.s3.amazonaws.com/key?X-Amz-Expires=3600", "HOOKS_DOCS": "https://api.slack.com/messaging/webhooks",
    "PPLX_MODEL": "pplx-70b-online", "ADAPTER_DIR": "./adapters/r8_sql",
}  # fmt: skip
PASS_REFERENCES = {
    "SYSTEM_CREDENTIAL": {"from_file": "/run/credentials/aigo-apply.service/openai"},
    "USER_CREDENTIAL": {"from_file": "/run/user/1000/credentials/aigo-apply.service/openai"},
    "OPENAI_API_KEY": {"from_env": "OPENAI_API_KEY"},
}
PASS_COMMENTS = [
    "# set EOS_TOKEN to </s> for Llama 2 chat",
    "# HF_TOKEN comes from the environment ({from_env: HF_TOKEN}), never from this file",
    "# tokens: see https://huggingface.co/docs/hub/security-tokens#user-access-tokens",
    "# token=${TOKEN} is expanded by the shell, not here",
    "# Bearer tokens for clients go in router.api_keys",
    "# a key looks like sk-... or ghp_...; never paste one here",
]

# A secret with no shape of its own, told by the last words of its name.
CLEAR_SECRETS = {
    "DB_PASSWORD": "hunter2", "PGPASSWORD": "correct horse battery staple", "CLIENT_SECRET": "changeme",
    "OPENAI_API_KEY": "token-abc123", "S3_ACCESS_KEY_ID": "minioadmin", "GPG_PASSPHRASE": "open sesame",
    "GITHUB_TOKEN": "s3cr3t-value-1", "MY_SERVICE_TOKEN": "4f9a8c2e71b3d605", "FILE_TOKEN": "/run/secrets/token",
}  # fmt: skip


class Recorded:
    """validate's view, kept in memory: the problems of the one file (or why it is unreadable)."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def valid(self, path: str, project: str, models: int) -> None:
        pass

    def invalid(self, error: ConfigInvalid, alone: bool) -> None:
        self.problems = error.problems

    def unreadable(self, error: ConfigFileError, alone: bool) -> None:
        raise AssertionError(str(error))


def validate(tmp_path: Path, text: str) -> list[Problem]:
    path = tmp_path / "aigo.yaml"
    path.write_text(text)
    view = Recorded()
    status = run_validate(ValidateRequest(files=(str(path),)), view)
    assert (status == 0) is (not view.problems)
    return view.problems


@pytest.fixture(autouse=True)
def no_other_homes(monkeypatch):
    monkeypatch.setattr(host_paths, "known_homes", lambda: ())
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)


# -- refused wherever it stands, and never shown ----------------------------------------------------
@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("case", sorted(MUST_REFUSE))
def test_a_credential_is_refused_wherever_it_stands_and_never_shown(tmp_path, case, place):
    secret, words = MUST_REFUSE[case]
    placed = PLACES[place].replace("VALUE", json.dumps(secret) if "comment" not in place else secret)
    problems = validate(tmp_path, HEAD + placed)
    ours = [p for p in problems if words in p.message and "{from_" in p.message]  # the credential's own problem
    assert ours, [p.format() for p in problems]
    found = ours[0]
    assert found.file.endswith("aigo.yaml") and found.line == LINE.get(place, 9) and found.path == PATHS[place]
    shown = "\n".join(p.format() for p in problems)
    random_part = max(re.findall("[A-Za-z0-9]+", secret), key=len)[:12]  # never in any message of the file
    assert secret not in shown and random_part not in shown, shown


def test_a_comment_reports_where_it_stands(tmp_path):
    secret = MUST_REFUSE["github-classic"][0]
    text = f"# deploy key: {secret}\n" + HEAD + "router:  # old key Bearer " + _run(40) + "\n  port: 8080\n"
    found = [(p.line, p.column, p.path, p.message.split(";")[0]) for p in validate(tmp_path, text)]
    assert found == [
        (1, 1, "version", "this comment holds a GitHub token"),
        (9, 10, "router", "this comment holds an Authorization header value"),
    ]


# A credential as a whole part of a path: the path is written in the file (a label, the plan) as
# surely as the credential on its own. Each single-word shape, in each place a path stands.
WORDS = sorted(c for c, (secret, _) in MUST_REFUSE.items() if re.fullmatch(r"[A-Za-z0-9._~+=-]+", secret))
PATH_PLACES = {
    "a from_file path": ("    env:\n      KEY: {from_file: ~/.aigo/secrets/VALUE}\n", "models.m.env.KEY"),
    "an env value": ("    env:\n      DATA: /srv/data/VALUE/train\n", "models.m.env.DATA"),
    "a relative path": ("    env:\n      DATA: ./VALUE\n", "models.m.env.DATA"),
    "any other string": ("    vllm: {served_model_name: /srv/VALUE}\n", "models.m.vllm.served_model_name"),
    "a comment": ("    # the key is in ~/keys/VALUE now\n", "models.m.gpus"),
}


@pytest.mark.parametrize("place", sorted(PATH_PLACES))
@pytest.mark.parametrize("case", WORDS)
def test_a_credential_as_a_part_of_a_path_is_refused_and_never_shown(tmp_path, case, place):
    secret, words = MUST_REFUSE[case]
    text, where = PATH_PLACES[place]
    problems = validate(tmp_path, HEAD + text.replace("VALUE", secret))
    ours = [p for p in problems if words in p.message and "{from_" in p.message]
    assert ours and ours[0].path == where, [p.format() for p in problems]
    shown = "\n".join(p.format() for p in problems)
    assert secret not in shown and max(re.findall("[A-Za-z0-9]+", secret), key=len)[:12] not in shown, shown


# -- what users ordinarily write --------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(MUST_PASS))
def test_ordinary_values_validate_whatever_the_name(tmp_path, name):
    assert validate(tmp_path, HEAD + f"    env:\n      {name}: {json.dumps(MUST_PASS[name])}\n") == []


@pytest.mark.parametrize("name", sorted(PASS_REFERENCES))
def test_ordinary_references_validate(tmp_path, name):
    assert validate(tmp_path, HEAD + f"    env:\n      {name}: {json.dumps(PASS_REFERENCES[name])}\n") == []


@pytest.mark.parametrize("comment", PASS_COMMENTS)
def test_ordinary_comments_validate(tmp_path, comment):
    assert validate(tmp_path, comment + "\n" + HEAD + "    port: 8001  " + comment + "\n") == []


def test_the_ordinary_corpus_validates_in_one_file(tmp_path):
    env = {**MUST_PASS, **PASS_REFERENCES}
    body = "".join(f"      {name}: {json.dumps(value)}\n" for name, value in env.items())
    assert validate(tmp_path, "\n".join(PASS_COMMENTS) + "\n" + HEAD + "    env:\n" + body) == []


@pytest.mark.parametrize("name", sorted(CLEAR_SECRETS))
def test_a_secret_with_no_shape_is_told_by_the_names_last_words(tmp_path, name):
    problems = validate(tmp_path, HEAD + f"    env:\n      {name}: {json.dumps(CLEAR_SECRETS[name])}\n")
    assert [(p.path, p.message) for p in problems] == [
        (
            f"models.m.env.{name}",
            f"{name} looks like a secret written in clear; pass it by reference, e.g. {name}: {{from_env: {name}}}",
        )
    ]


# -- validate and plan agree ------------------------------------------------------------------------
def test_validate_and_plan_refuse_the_same_lines_and_show_no_secret(tmp_path):
    """The pre-commit hook runs `validate`: whatever `plan` refuses as a secret it refuses too, in the
    same words (the real command line, both commands)."""
    secrets_used = [MUST_REFUSE[c][0] for c in ("groq", "hugging-face", "oauth-url", "github-classic", "slack-b")]
    text = (
        f"# {secrets_used[3]}\n"
        + HEAD
        + f"    env:\n      NEUTRAL: {json.dumps(secrets_used[0])}\n      KEY: {{from_env: {secrets_used[1]}}}\n"
        + f'      URL: {json.dumps(secrets_used[2])}\n      EOS_TOKEN: "</s>"  # {secrets_used[4]}\n'
    )
    path = tmp_path / "aigo.yaml"
    path.write_text(text)
    env = {"HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    validated, planned = (run_cli(command, "-f", str(path), env=env) for command in ("validate", "plan"))
    assert validated.returncode == planned.returncode == 1
    lines = [line for line in validated.stdout.splitlines() + validated.stderr.splitlines() if line.strip()]
    assert lines == [line for line in planned.stdout.splitlines() + planned.stderr.splitlines() if line.strip()]
    assert len([line for line in lines if line.startswith(str(path))]) == 5, lines
    for secret in secrets_used:
        assert secret not in validated.stdout + validated.stderr


@pytest.mark.parametrize("kind", ["from_env", "from_file"])
def test_a_reference_named_like_a_credential_is_refused_at_plan_time_in_validates_words(tmp_path, kind):
    """A saved plan's spec is input too: resolving the reference says what validate says, unquoted."""
    secret = MUST_REFUSE["hugging-face"][0]
    (said,) = validate(tmp_path, HEAD + f"    env:\n      KEY: {{{kind}: {secret}}}\n")
    with pytest.raises(SecretUnavailable) as info:
        secrets.resolve(SecretRef(kind, secret), "models.m.env.KEY")
    assert info.value.problem == f"models.m.env.KEY: {said.message.split('; ')[0]}"
    assert said.message == f"{info.value.problem.split(': ', 1)[1]}; {info.value.fix}"
    assert secret not in str(info.value)


# -- systemd credentials ----------------------------------------------------------------------------
HOME = Path("/home/ada")
UNIT = Path("/run/credentials/aigo-apply.service")


@pytest.mark.parametrize(
    "path, own, why",
    [
        (UNIT / "openai", "any", None),  # as written (validate): any unit's
        (UNIT / "openai", UNIT, None),  # this process's own, at plan and apply time
        (Path("/run/user/1000/credentials/aigo-apply.service/openai"), "any", None),
        (Path("/run/credentials/sshd.service/key"), UNIT, "another systemd unit's credential"),
        (UNIT / "openai", None, "aigo-apply was not started with credentials of its own"),
        (Path("/run/credentials/aigo-apply.service"), "any", "inside the system folder /run"),  # the folder
        (Path("/run/credentials"), "any", "inside the system folder /run"),
        (Path("/run/user/ada/credentials/u/k"), "any", "inside the system folder /run"),
        (Path("/run/secrets/openai"), "any", "inside the system folder /run"),
    ],
)
def test_systemd_credentials_are_read_only_from_this_process_own(path, own, why):
    found = unsafe_secret_file(path, HOME, credentials=own)
    assert (found is None) if why is None else (why in (found or "")), found


def test_another_units_credential_is_a_plan_blocker(monkeypatch):
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(UNIT))
    with pytest.raises(SecretUnavailable, match="another systemd unit's credential"):
        secrets.resolve(SecretRef("from_file", "/run/credentials/sshd.service/key"), "models.m.env.KEY")
    monkeypatch.delenv("CREDENTIALS_DIRECTORY")
    with pytest.raises(SecretUnavailable, match="not started with credentials of its own"):
        secrets.resolve(SecretRef("from_file", str(UNIT / "openai")), "models.m.env.KEY")
    assert os.environ.get("CREDENTIALS_DIRECTORY") is None
