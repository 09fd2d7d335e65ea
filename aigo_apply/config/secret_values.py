"""Which texts hold a credential, judged by the shape of the value and never by the name it stands
under (pure): the prefixes, lengths and alphabets that services publish for their keys and tokens,
the blocks and headers that carry them (private keys, Authorization values) and the places in a URL
that hold them (a password, an `access_token=` query value).

One judgement for every place a config can hold text: an env value, any other string or key of the
file, a `from_env` name (a name that is itself a token: `{from_env: hf_...}`), a comment; and, at
plan and apply time, the values read (platforms/secrets.py) and the spec stored in a label
(desired/labels.py). Ordinary words never match: a key is a token of its own with its service's
prefix and length, so `EOS_TOKEN: "</s>"`, `TOKEN_TYPE: bearer` or a repo named
`org/whisper-large-v3-sk-finetuned` are no credential, whatever their name.

`hide_credentials` rewrites a message that would quote a value (`'ghp_...' is not an IP address`) so
that only the kind of credential shows: no error prints a secret."""

from __future__ import annotations

import functools
import re
from dataclasses import replace

from aigo_apply.errors import Problem

# Each pattern is searched in every value of a config (up to 4096 characters each), in its comments
# and in secrets read at apply time, so each must take time linear in the text: no two quantifiers
# that can share characters, a literal or a bounded part before every open-ended run, and nothing
# that makes a run be scanned again from each of its characters (tests/unit/config/
# test_env_hostile_regex.py holds the worst inputs known).
#
# A key is a token of its own: it starts the value or follows a space, `=`, `:`, `,`, `;`, `|`, a
# quote or a bracket (`key=sk-...`, `Bearer sk-...`, `{"token": "ghp_..."}`), or the `//` of a URL
# (`https://ghp_...@github.com`); never a part of a hyphenated, dotted or slashed name, where `\b`
# found one (`org/whisper-large-v3-sk-finetuned-commonvoice`, `skt/sk-learn-regression-model-v2`).
_START = r"(?:(?<![^\s=:,;|'\"`(\[{<>])|(?<=//))"
# Where a token of an Authorization header ends: the end of the value (or of its line), a quote, `,`, `;` or a
# bracket, after spaces at most; not more words (`Basic JavaScript/TypeScript knowledge is assumed`).
_END = r"(?=[ \t]*+(?:$|[\r\n'\"`,;)\]}>|]))"
# A run of key characters holding a part of 16 or more without a hyphen, as random keys do
# (sk-proj-AbCd...): not a hyphenated name of short words (sk-learn-regression-model-v2).
_LONG_PART = r"(?=[A-Za-z0-9_-]*?[A-Za-z0-9_]{16})"
# An Authorization header's credential is a whole token shaped like one: with a digit, a lower-case
# letter followed by a capital, or base64's `=` padding; a word of prose is not (`Basic instructions:
# answer briefly`, `Basic conversation etiquette applies`). The scheme is written Basic, basic or
# BASIC (Bearer alike), not matched ignoring case: that made prose and odd letters (U+017F, a long
# s) match too. Basic takes base64 (RFC 7617), Bearer a b64token (RFC 6750).
_BASIC = r"[A-Za-z0-9+/]"
_BEARER = r"[A-Za-z0-9._~+/-]"
_SHAPED = r"(?={lead}*+[0-9]|{run}*?[a-z][A-Z]|{run}*+=)"
# A query parameter that carries a credential (OAuth's access_token, an API's api_key...), as a
# parameter of its own (`?token=`, `&api_key=`, or a value that is only `token=...`; not `max_token=`),
# whose value is 16 or more URL characters holding a letter and a digit: a random token, not `?token=abc`
# nor `?access_token=REDACTED`. Each lookahead reads only the value's run, which `=` and `&` end.
# Names as services write them, in any case (`?ACCESS_TOKEN=`): OAuth's tokens, API keys (`?key=`),
# client secrets, and the signatures of pre-signed URLs (Azure SAS `sig=`, S3 `X-Amz-Signature=`,
# Google Cloud Storage `X-Goog-Signature=`) and S3's session token.
_QUERY_NAMES = (
    r"(?ai:access_token|id_token|refresh_token|auth_token|token|api_key|apikey|api-key|key|client_secret"
    r"|sig|signature|x-amz-signature|x-goog-signature|x-amz-security-token)"
)
_QUERY_VALUE = r"[A-Za-z0-9._~+/%-]"
_QUERY = (
    r"(?<![A-Za-z0-9_.-])"
    + _QUERY_NAMES
    + r"=(?="
    + _QUERY_VALUE
    + r"*?[0-9])(?="
    + _QUERY_VALUE
    + r"*?[A-Za-z])"
    + _QUERY_VALUE
    + r"{16}"
)
# An AWS secret access key has no prefix (40 characters of base64); it is recognisable only where its
# name stands before it, as AWS's own files and tools write it (`aws_secret_access_key = ...`,
# `"SecretAccessKey": "..."`). Matched ignoring case only in ASCII (the name's spellings).
_AWS_SECRET = r"(?ai:secret_?access_?key)[\"']?[ \t]*+[=:][ \t]*+[\"']?[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])"
CREDENTIAL_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY"), "a private key"),
    (re.compile(_START + r"hf_[A-Za-z0-9]{20,}"), "a Hugging Face token (hf_...)"),
    (re.compile(_START + r"sk-" + _LONG_PART + r"[A-Za-z0-9_-]{16,}"), "an API key (sk-...)"),
    (re.compile(_START + r"[sr]k_(live|test)_[A-Za-z0-9]{16,}"), "a Stripe key"),
    (re.compile(_START + r"(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), "a GitHub token"),
    (re.compile(_START + r"glpat-[A-Za-z0-9_-]{16,}"), "a GitLab token"),
    (re.compile(_START + r"xox[abposr]-[A-Za-z0-9-]{10,}"), "a Slack token"),
    (re.compile(_START + r"(AKIA|ASIA)[A-Z0-9]{16}\b"), "an AWS access key"),
    (re.compile(_AWS_SECRET), "an AWS secret access key"),
    (re.compile(_START + r"AIza[0-9A-Za-z_-]{30,}"), "a Google API key"),
    (re.compile(_START + r"ya29\.[0-9A-Za-z_-]{20,}"), "a Google OAuth token (ya29.)"),
    # Groq's keys: gsk_ and 52 letters and digits (40 or more are taken: no word is that long).
    (re.compile(_START + r"gsk_[A-Za-z0-9]{40,}"), "a Groq API key (gsk_...)"),
    # Prefixes and lengths the services publish (fewer characters are taken than they write, never a
    # word's): NVIDIA's API catalog (nvapi- and 64), xAI (xai- and 80), Perplexity (pplx- and 48),
    # Replicate (r8_ and 37), a Hugging Face organization token (api_org_), SendGrid (SG.22.43),
    # Databricks (dapi and 32 hex digits), LangSmith (lsv2_pt_ or lsv2_sk_ and 32 hex digits).
    (re.compile(_START + r"nvapi-" + _LONG_PART + r"[A-Za-z0-9_-]{40,}"), "an NVIDIA API key (nvapi-...)"),
    (re.compile(_START + r"xai-[A-Za-z0-9]{40,}"), "an xAI API key (xai-...)"),
    (re.compile(_START + r"pplx-[A-Za-z0-9]{32,}"), "a Perplexity API key (pplx-...)"),
    (re.compile(_START + r"r8_[A-Za-z0-9]{30,}"), "a Replicate API token (r8_...)"),
    (re.compile(_START + r"api_org_[A-Za-z0-9]{24,}"), "a Hugging Face token (api_org_...)"),
    (re.compile(_START + r"SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{30,}"), "a SendGrid API key (SG....)"),
    (re.compile(_START + r"dapi[0-9a-f]{32}(?![0-9A-Za-z])"), "a Databricks token (dapi...)"),
    (re.compile(_START + r"lsv2_(?:pt|sk)_[0-9a-f]{32}"), "a LangSmith API key (lsv2_...)"),
    (
        re.compile(_START + r"(?:npm_[A-Za-z0-9]{30,}|pypi-" + _LONG_PART + r"[A-Za-z0-9_-]{30,})"),
        "a package registry token",
    ),
    # Read from the start of a run of token characters, committing (atomic group) to the first `eyJ`
    # in it: that one has the longest tail, so no later one can match where it fails, and a run such
    # as `eyJ-eyJ-eyJ-...` is scanned once, not once per `eyJ` in it.
    (
        re.compile(r"(?<![A-Za-z0-9_-])(?>[A-Za-z0-9_-]*?\beyJ)[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\."),
        "a signed token (JWT)",
    ),
    # The scheme (a run of scheme characters holding a letter) is read from the start of its run
    # only: starting at every letter made each letter of a long value a start scanned to the end of
    # the value (quadratic: 4096 letters took 50 ms, a 1 MiB config 25 s).
    (
        re.compile(r"(?<![A-Za-z0-9+.-])[0-9+.-]*[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:[^/\s@]+@"),
        "a URL with a password",
    ),
    (re.compile(_QUERY), "a URL with a token in its query (access_token=, token=, api_key=...)"),
    # A webhook's URL is its secret: Slack's (/services/T.../B.../secret) and Discord's (/webhooks/id/secret).
    (
        re.compile(
            r"hooks\.slack\.com/(?:services|workflows|triggers)/T[A-Z0-9]{6,}/[A-Z0-9]{6,}/[A-Za-z0-9]{16,}"
            r"|discord(?:app)?\.com/api/webhooks/[0-9]{10,}/[A-Za-z0-9_-]{30,}"
        ),
        "a webhook URL with its secret",
    ),
    (
        re.compile(
            _START
            + r"(?:(?:Basic|basic|BASIC)\s++"
            + _SHAPED.format(lead=r"[A-Za-z+/]", run=_BASIC)
            + _BASIC
            + r"{12,}+={0,2}+"
            + r"|(?:Bearer|bearer|BEARER)\s++"
            + _SHAPED.format(lead=r"[A-Za-z._~+/-]", run=_BEARER)
            + _BEARER
            + r"{12,}+=*+)"
            + _END
        ),
        "an Authorization header value",
    ),
)

# What every pattern above needs in the text (its literal part), searched first in one pass: most
# values (names, paths, numbers) have none, and then the patterns need not be tried one by one.
# Only a quick "no": a text that has one still goes through every pattern, in order.
_MAYBE_CREDENTIAL = re.compile(
    r"-----BEGIN |hf_|sk-|k_live_|k_test_|gh[pousr]_|github_pat_|glpat-|xox[abposr]-|AKIA|ASIA|AIza|ya29\.|gsk_"
    r"|npm_|pypi-|eyJ|://|(?ai:token=|key=|_secret=|sig=|signature=|access_?key)"
    r"|nvapi-|xai-|pplx-|r8_|api_org_|SG\.|dapi|lsv2_|hooks\.slack\.com/|/webhooks/"
    r"|[Bb]asic|BASIC|[Bb]earer|BEARER"
)
# A path written as a word of its own (`/run/secrets/x`, `~/.aigo/secrets/x`, `./x`, a URL's path):
# each of its parts is judged as a text of its own, so `~/.aigo/secrets/hf_...` holds a token, while a
# repo id (`org/hf_...`, no leading `/`) stays a name.
_PATH_WORD = re.compile(r"(?<![^\s=:,;|'\"`(\[{<>])(?:~|\.{1,2})?/[^\s'\"`]*")


def credential_hint(text: str) -> bool:
    """Whether `text` holds what some credential needs (a literal part of a pattern): a quick "no"
    for a whole file before its comments are looked for."""
    return _MAYBE_CREDENTIAL.search(text) is not None


def credential_kind(text: str) -> str | None:
    """What kind of credential `text` looks like, or None: in the text, or as a whole part of a path
    in it (`~/.aigo/secrets/hf_...`). Never returns any part of the text."""
    if not credential_hint(text):  # the usual case: no part of it can hold one either
        return None
    return _kind_of(text) or next(filter(None, map(_kind_of, _path_parts(text))), None)


def _kind_of(text: str) -> str | None:
    """The kind of the first pattern found in `text` as it is."""
    if not credential_hint(text):
        return None
    return next((kind for pattern, kind in CREDENTIAL_PATTERNS if pattern.search(text)), None)


def _path_parts(text: str) -> list[str]:
    """The parts of every path written in `text` (see _PATH_WORD); none when it holds no `/`."""
    if "/" not in text:
        return []
    return [part for word in _PATH_WORD.finditer(text) for part in word.group().split("/") if part]


def hide_credentials(text: str) -> str:
    """`text` with each credential in it replaced by the words naming its kind (`<a GitHub token,
    not shown>`): for messages that quote what was written. What follows a match in the same run of
    key characters goes too (a JWT's signature, a private key's body)."""
    if credential_kind(text) is None:
        return text
    for pattern, kind in _whole_tokens():
        text = pattern.sub(f"<{kind}, not shown>", text)
    return _PATH_WORD.sub(_hide_parts, text) if _path_parts(text) else text


def _hide_parts(word: re.Match[str]) -> str:
    """A path with each part that is a credential replaced by the words naming its kind."""
    return "/".join(f"<{kind}, not shown>" if (kind := _kind_of(part)) else part for part in word.group().split("/"))


def hidden_path(path: str) -> str:
    """A location in the file (`models.ALIAS.env.NAME`, a key quoted where it holds dots) with each
    part that is a credential replaced by the words naming its kind: a key is a name of its own, so
    `models.hf_...` names a token, which an error's location must not print."""
    if not credential_hint(path):
        return path
    parts = re.split(r"(\.|\[[0-9]+\]|\"|\\.)", path)  # keys, with the dots, indices and quotes between
    return "".join(f"<{kind}, not shown>" if (kind := credential_kind(part)) else part for part in parts)


@functools.cache
def _whole_tokens() -> tuple[tuple[re.Pattern[str], str], ...]:
    """Each pattern followed by the rest of its run, compiled only when a message needs them."""
    return tuple((re.compile(f"(?:{p.pattern})[A-Za-z0-9+/=_.~%-]*"), kind) for p, kind in CREDENTIAL_PATTERNS)


def unquoted(problems: list[Problem]) -> list[Problem]:
    """`problems` with every credential a message quotes (`'ghp_...' is not an IP address`), or a
    location names (`models.hf_...`), replaced by the words naming its kind: a rule that quotes a value
    it refuses, or a key it refuses, never prints a secret, in text, JSON or a CI annotation."""
    return [replace(p, path=hidden_path(p.path), message=hide_credentials(p.message)) for p in problems]
