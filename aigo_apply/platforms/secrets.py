"""Resolves secret references on the host, at plan time (to check them: platforms/docker/secret_checks.py) and
at apply time (to hand them to a container). Values never leave this module except into a
container's environment or the router's key file: messages name the field and the reference,
never the value or any part of it.

Reading is bounded: a `from_file` must be a regular file of at most MAX_SECRET_BYTES, opened
without blocking (a FIFO or a device never hangs apply while it holds the project's lock), outside
the host's private places (config/host_paths.py: the system, credential folders and files at any
depth, other accounts' homes, the tool's state, the Hugging Face cache and the model store), checked
on the path as written and as resolved; a path that cannot be resolved is refused with why. A value
must be UTF-8 text without control characters. The Hugging Face token of this host never reaches
a container, under any name.

Every value read is remembered for `redact()`, which the journal, the reporters and the CLI's error
boundary apply to what they write: a second line of defence behind never putting values in text."""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import replace
from pathlib import Path
from typing import overload

from aigo_apply import safe_read
from aigo_apply.config.env_rules import (
    REFERENCE_FIX,
    credential_kind,
    normal_path,
    reference_credential,
    unsafe_secret_file,
)
from aigo_apply.config.host_paths import short
from aigo_apply.config.secret_names import hub_token_name
from aigo_apply.desired.types import ContainerSpec, SecretRef
from aigo_apply.errors import SecretUnavailable, Unreadable
from aigo_apply.json_types import JsonObject, JsonValue
from aigo_apply.observe import host_paths
from aigo_apply.observe.host_paths import env_protected, hf_home, own_homes, resolve_or_why, try_resolve

MAX_SECRET_BYTES = 64 * 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CONTROL_BUT_NEWLINE = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")
_HUB_TOKEN_VALUE = re.compile(r"\bhf_[A-Za-z0-9]{20,}")
_MIN_REDACTED = 4  # shorter values would blank out ordinary words; they are not put in messages anyway
FILE_FIX = (
    "keep the secret in a regular file of its own (e.g. ~/.aigo/secrets/NAME, mode 600) and point from_file there"
)

_known: set[str] = set()
_known_lock = threading.Lock()


def refused(where: str, what: str, fix: str) -> SecretUnavailable:
    """The error for a reference that cannot or must not be resolved: field, what, the fix."""
    return SecretUnavailable(f"{where}: {what}", fix)


def remember(value: str) -> None:
    """Add a resolved value (and each of its lines or comma-separated parts) to what `redact` hides."""
    parts = {value, *re.split(r"[,\n]", value)}
    with _known_lock:
        for part in (p.strip() for p in parts):
            if len(part) >= _MIN_REDACTED:
                _known.add(part)
                _known.add(json.dumps(part, ensure_ascii=False)[1:-1])  # as it appears inside JSON text


def redact(text: str) -> str:
    """`text` with every secret value read by this process replaced by ***."""
    with _known_lock:
        known = sorted(_known, key=len, reverse=True)
    for value in known:
        if value in text:
            text = text.replace(value, "***")
    return text


@overload
def redact_data(value: JsonObject) -> JsonObject: ...
@overload
def redact_data(value: dict[str, object]) -> JsonObject: ...
@overload
def redact_data(value: object) -> JsonValue: ...
def redact_data(value: object) -> JsonValue:
    """JSON-ready data with every string redacted, keys left as they are (so JSON stays JSON)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_data(v) for v in value]
    return value if value is None or isinstance(value, bool | int | float) else redact(str(value))


def resolve(ref: SecretRef, where: str, multiline: bool = False) -> str:
    """The value `ref` names, checked; `multiline` allows line breaks (router.api_keys: one key a line)."""
    if ref.kind in ("from_env", "from_file") and (shaped := credential_kind(ref.target)):
        raise refused(where, *reference_credential(ref.kind, shaped))  # as validate says it; the target unquoted
    if ref.kind == "from_env":
        value, source = _from_env(ref.target, where), f"the environment variable {ref.target}"
    elif ref.kind == "from_file":
        value, source = _from_file(ref.target, where), f"the secret file {ref.target}"
    else:
        raise refused(where, f"{ref.kind!r} is not a kind of secret reference", "use from_env or from_file")
    value = _checked(value, where, source, multiline)
    remember(value)
    return value


def _from_env(name: str, where: str) -> str:
    if hub_token_name(name):
        raise refused(where, f"{name} holds the Hugging Face token", "no container gets it, under any name")
    value = os.environ.get(name)
    if value is None:
        raise refused(where, f"the environment variable {name} is not set", "export it before running aigo-apply")
    return value


def _from_file(target: str, where: str) -> str:
    """The file's text: an absolute path, not a system, private or token file, regular and small."""
    if "\x00" in target or not target.startswith(("/", "~/")):
        raise refused(where, f"the secret file {target!r} is not an absolute path", "write it from / or ~/")
    lexical = Path(normal_path(str(Path(target).expanduser())))
    real = resolve_or_why(lexical)
    if isinstance(real, str):
        raise refused(where, f"the secret file {short(target)} cannot be resolved: {real}", FILE_FIX)
    protected, home = env_protected(), Path.home()
    for path in (lexical, real):
        why = unsafe_secret_file(
            path, home, hub_token_files(), protected, host_paths.known_homes(), own_homes(home), own_credentials()
        )
        if why:
            shown = target if path == lexical else f"{target} (a link to {real})"
            raise refused(where, f"the secret file {shown} is {why}; engines must never get it", FILE_FIX)
    try:
        data = read_regular(real)
    except SecretUnavailable as exc:
        raise refused(where, f"the secret file {target} {exc}", FILE_FIX) from None
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise refused(where, f"the secret file {target} is not UTF-8 text", FILE_FIX) from None


def own_credentials() -> Path | None:
    """The folder of systemd credentials this process was started with ($CREDENTIALS_DIRECTORY), if any."""
    folder = os.environ.get("CREDENTIALS_DIRECTORY", "")
    return Path(normal_path(folder)) if folder.startswith("/") else None


def read_regular(path: Path, limit: int = MAX_SECRET_BYTES) -> bytes:
    """At most `limit` bytes of the regular file at `path` (resolved by the caller), by the one
    bounded reader's rules (safe_read.SECRET: judged on lstat before it is opened, so a FIFO, socket
    or device is never opened; opened without following a link or waiting; judged again once open);
    a file with other hard links is refused too. SecretUnavailable says why, after the file's name."""
    kind = safe_read.SECRET if limit == MAX_SECRET_BYTES else replace(safe_read.SECRET, limit=limit)
    try:
        with safe_read.opened(path, kind, judge=_one_name) as f:
            data = safe_read.read_at_most(f.fileno(), limit)
    except Unreadable as exc:
        said = {"size": f"is larger than {limit} bytes", "link": "is a link, not a regular file"}
        raise SecretUnavailable(said.get(exc.why, exc.reason)) from None
    except OSError as exc:
        raise SecretUnavailable(f"cannot be read: {exc.strerror or type(exc).__name__}") from None
    if len(data) > limit:
        raise SecretUnavailable(f"is larger than {limit} bytes")
    return data


def _one_name(st: os.stat_result) -> str | None:
    if st.st_nlink > 1:  # a hard link may be a system file (/etc/shadow) under an innocent name
        return "has other hard links, so it may be another file under a second name"
    return None


def _checked(value: str, where: str, source: str, multiline: bool) -> str:
    """Refuse an empty, oversized or control-character value, and the Hugging Face token."""
    if multiline:
        value = value.replace("\r\n", "\n")
    if not value.strip():
        raise refused(where, f"{source} is empty", "put the secret there")
    if len(value.encode("utf-8", "surrogateescape")) > MAX_SECRET_BYTES:
        raise refused(where, f"{source} is larger than {MAX_SECRET_BYTES} bytes", "a secret is one short value")
    if (_CONTROL_BUT_NEWLINE if multiline else _CONTROL).search(value):
        raise refused(
            where,
            f"{source} holds a control character (such as NUL, a line break or an escape)",
            "an environment variable's value must be one line of text",
        )
    if _is_hub_token(value):
        raise refused(
            where,
            f"{source} holds the Hugging Face token",
            "no container gets it, under any name (aigo-apply downloads models on this host)",
        )
    return value


def _is_hub_token(value: str) -> bool:
    """The value is or holds a Hugging Face token: this host's (if long enough to tell), or one
    that looks like one."""
    if _HUB_TOKEN_VALUE.search(value):
        return True
    if len(value) < 8:  # too short to hold a token told apart (and no file is read for "1")
        return False
    return any(token in value for token in host_hub_tokens() if len(token) >= 8)


def hub_token_files() -> tuple[Path, ...]:
    """Where huggingface_hub keeps this host's token: $HF_TOKEN_PATH, $HF_HOME/token, the legacy file."""
    home = hf_home()
    files = [home / "token", home / "stored_tokens", Path.home() / ".huggingface" / "token"]
    if os.environ.get("HF_TOKEN_PATH"):
        files.append(safe_read.home_path(os.environ["HF_TOKEN_PATH"], "HF_TOKEN_PATH"))
    return tuple(files) + tuple(try_resolve(f) for f in files)


def host_hub_tokens() -> set[str]:
    """This host's Hugging Face tokens (environment and token files), remembered for redaction."""
    found = {os.environ[n].strip() for n in os.environ if hub_token_name(n) and os.environ[n].strip()}
    for path in {try_resolve(p) for p in hub_token_files()}:
        try:
            text = read_regular(path).decode("utf-8", "replace")
        except SecretUnavailable:
            continue
        found |= set(_HUB_TOKEN_VALUE.findall(text)) if path.name == "stored_tokens" else {text.strip()}
    found.discard("")
    for token in found:
        remember(token)
    return found


def container_env(container: ContainerSpec, alias: str) -> dict[str, str]:
    """The container's environment with every reference replaced by its value."""
    return {name: env_value(name, value, f"models.{alias}.env.{name}") for name, value in container.env}


def env_value(name: str, value: str | SecretRef, where: str) -> str:
    """One variable's value for a container, checked again here (a saved plan's spec is input):
    no Hugging Face token under any name, no credential in clear, references resolved and checked."""
    if hub_token_name(name):
        raise refused(where, "engine containers never get a Hugging Face token", "remove this entry")
    if isinstance(value, SecretRef):
        return resolve(value, where)
    if (kind := credential_kind(value)) or _is_hub_token(value):  # in validate's words
        raise refused(where, f"the value looks like {kind or 'a credential'} written in clear", REFERENCE_FIX)
    return value
