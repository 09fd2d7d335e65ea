"""Rules for secrets in the config: a model's environment passes secrets by reference, never in
clear; no value anywhere in the file looks like a credential (it would be stored in the spec label
and printed in plans); the Hugging Face token never reaches a container under any name; and a
`from_file` reference names an absolute path outside the host's system and private folders.

The pure policy functions here (`credential_kind`, `unsafe_secret_file`, `hub_token_name`) are
used again at plan and apply time by apply/secrets.py, on the resolved paths and the values read."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from aigo_apply.config.finder import Finder
from aigo_apply.config.host_paths import PRIVATE_HOME_DIRS, SYSTEM_DIRS
from aigo_apply.config.yaml_source import Path_

HUB_TOKEN_NAMES = frozenset(
    {
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "HUGGINGFACE_HUB_TOKEN",
        "HF_API_TOKEN",
        "HF_HUB_TOKEN",
        "HUGGINGFACE_TOKEN",
        "HUGGINGFACEHUB_API_TOKEN",
    }
)
# Any other spelling of a Hugging Face token variable (HF_READ_TOKEN, HUGGING_FACE_TOKEN, HF_API_KEY...).
_HUB_TOKEN_NAME_RE = re.compile(r"^(HF|HUGGING_?FACE)(_?HUB)?_\w*(TOKEN|API_?KEY)S?\Z", re.I)
SECRET_NAME_RE = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY|PRIVATE_KEY)", re.I)

# What a credential written in clear looks like, with the words that name it in messages.
CREDENTIAL_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY"), "a private key"),
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}"), "a Hugging Face token (hf_...)"),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"), "an API key (sk-...)"),
    (re.compile(r"\b[sr]k_(live|test)_[A-Za-z0-9]{16,}"), "a Stripe key"),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"), "a GitHub token"),
    (re.compile(r"\bglpat-[A-Za-z0-9_-]{16,}"), "a GitLab token"),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), "a Slack token"),
    (re.compile(r"\b(AKIA|ASIA)[A-Z0-9]{16}\b"), "an AWS access key"),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"), "a Google API key"),
    (re.compile(r"\bnpm_[A-Za-z0-9]{30,}|\bpypi-[A-Za-z0-9_-]{30,}"), "a package registry token"),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\."), "a signed token (JWT)"),
    (re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:[^/\s@]+@"), "a URL with a password"),
    (re.compile(r"^\s*(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{12,}", re.I), "an Authorization header value"),
)
# Files in a home folder (any user's) that hold credentials, besides PRIVATE_HOME_DIRS.
PRIVATE_HOME_FILES = (
    ".netrc",
    ".git-credentials",
    ".pgpass",
    ".my.cnf",
    ".npmrc",
    ".pypirc",
    ".boto",
    ".s3cfg",
    ".vault-token",
    ".dockercfg",
    ".huggingface",
    ".cache/huggingface",
    ".bash_history",
    ".zsh_history",
    ".python_history",
)
HUB_TOKEN_FILES = ("token", "stored_tokens")  # in a `huggingface` folder
REFERENCE_FIX = "pass it by reference: NAME: {from_env: VARIABLE} or {from_file: /path/to/file}"


def hub_token_name(name: str) -> bool:
    """Whether an environment variable name is one the Hugging Face libraries read a token from."""
    return name.upper() in HUB_TOKEN_NAMES or bool(_HUB_TOKEN_NAME_RE.match(name))


def credential_kind(text: str) -> str | None:
    """What kind of credential `text` looks like, or None. Never returns any part of the text."""
    for pattern, kind in CREDENTIAL_PATTERNS:
        if pattern.search(text):
            return kind
    return None


def unsafe_secret_file(path: Path, home: Path, token_files: Iterable[Path] = ()) -> str | None:
    """Why the secret file `path` (absolute, normalised) must not be read into a container, or
    None: the Hugging Face token, a system file, another user's home or a credential store."""
    text = str(path)
    parts = path.parts
    if text in {str(p) for p in token_files} or (
        len(parts) >= 2 and parts[-2] == "huggingface" and parts[-1] in HUB_TOKEN_FILES
    ):
        return "the Hugging Face token file"
    extra = ("/var/lib",) + (("/root",) if str(home) != "/root" else ())
    for system in SYSTEM_DIRS + extra:
        if text == system or text.startswith(system + "/"):
            return f"inside the system folder {system}"
    for private in PRIVATE_HOME_DIRS + PRIVATE_HOME_FILES:
        if f"/{private}/" in text + "/":
            return f"a private file of a home folder (~/{private})"
    return None


def _walk(value: Any, path: Path_) -> Iterator[tuple[Path_, Any, bool]]:
    """Every mapping key (is_key True) and scalar string value in the document, with its path."""
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                yield (*path, key), key, True
            yield from _walk(item, (*path, key))
    elif isinstance(value, list):
        for n, item in enumerate(value):
            yield from _walk(item, (*path, n))
    elif isinstance(value, str):
        yield path, value, False


def _is_env_value(path: Path_) -> bool:
    return len(path) == 4 and path[0] == "models" and path[2] == "env"


def check_clear_credentials(data: Any, f: Finder) -> None:
    """No value or key anywhere looks like a credential: the spec label stores the canonical spec
    and plans print it. Env values are left to `check_env` (one message per field)."""
    for path, text, is_key in _walk(data, ()):
        if (not is_key and _is_env_value(path)) or (len(path) >= 5 and path[2] == "env" and path[0] == "models"):
            continue
        kind = credential_kind(text)
        if kind and is_key:
            f.at_key(path, f"this name looks like {kind}; never write a credential in aigo.yaml")
        elif kind:
            f.at_value(path, f"the value looks like {kind} written in clear; never write a credential in aigo.yaml")


def check_env(data: dict[str, Any], models: dict[str, Any], f: Finder) -> None:
    """Each model's env and the router's keys: no Hugging Face token, no credential in clear,
    safe references."""
    check_clear_credentials(data, f)
    for alias, model in models.items():
        env = model.get("env") if isinstance(model, dict) else None
        if not isinstance(env, dict):
            continue
        for name, value in env.items():
            _check_entry(("models", alias, "env", name), name, value, f)
    router = data.get("router")
    keys = router.get("api_keys") if isinstance(router, dict) else None
    if isinstance(keys, dict) and len(keys) == 1:  # the keys go into a file the router container reads
        _check_reference(("router", "api_keys"), *next(iter(keys.items())), f)


def _check_entry(where: Path_, name: Any, value: Any, f: Finder) -> None:
    if isinstance(name, str) and hub_token_name(name):
        f.at_key(
            where,
            "engine containers never get a Hugging Face token: aigo-apply downloads models on this host "
            "(with HF_TOKEN from its environment or `hf auth login`) and the engine runs offline "
            "(HF_HUB_OFFLINE=1); remove this entry",
        )
    elif isinstance(value, dict) and len(value) == 1:
        _check_reference(where, *next(iter(value.items())), f)
    elif isinstance(value, str) and (kind := credential_kind(value)):
        f.at_value(where, f"the value looks like {kind} written in clear; {REFERENCE_FIX}")
    elif isinstance(value, str) and value and isinstance(name, str) and SECRET_NAME_RE.search(name):
        f.at_value(
            where,
            f"{name} looks like a secret written in clear; pass it by reference, e.g. {name}: {{from_env: {name}}}",
        )


def _check_reference(where: Path_, kind: Any, target: Any, f: Finder) -> None:
    """A reference names no Hugging Face token variable and no system or private file."""
    if not isinstance(target, str):
        return
    if kind == "from_env" and hub_token_name(target):
        f.at_value(
            where,
            f"{target} holds the Hugging Face token, which never reaches a container under any "
            "name (aigo-apply downloads models on this host); remove this entry",
        )
    elif kind == "from_file" and not target.startswith(("/", "~/")):
        f.at_value(
            where,
            f"the secret file {target!r} must be an absolute path (or start with ~/): a relative one "
            "would depend on the folder aigo-apply is run from",
        )
    elif kind == "from_file" and "\x00" not in target:
        why = unsafe_secret_file(Path(normal_path(str(Path(target).expanduser()))), Path.home())
        if why:
            f.at_value(
                where,
                f"the secret file {target!r} is {why}; engines must never get it. Keep the secret in a file "
                "of its own (e.g. ~/.aigo/secrets/NAME, mode 600) and point from_file there",
            )


def normal_path(text: str) -> str:
    """`text` with `.`, `..` and repeated slashes removed, without touching the filesystem."""
    out: list[str] = []
    for part in text.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if out:
                out.pop()
        else:
            out.append(part)
    return "/" + "/".join(out)
