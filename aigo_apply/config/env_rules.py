"""Rules for secrets in the config: a model's environment passes secrets by reference, never in
clear; no value, key, reference or comment anywhere in the file looks like a credential (it would be
stored in the spec label, printed in plans, or committed and shared with the file), judged by the
value's shape (config/secret_values.py) and, for the secrets that have none, by the name's last
words (config/secret_names.py); the Hugging Face token never reaches a container under any name; and
a `from_file` reference names an absolute path outside the host's system and private places (the
same policy as a mount's: config/host_paths.py; here, another account's home is private too), a
systemd credential being the one file inside /run it may name.

The pure policy functions here (`credential_kind`, `unsafe_secret_file`, `reference_credential`) are
used again at plan and apply time by platforms/secrets.py, on the resolved paths and the values read, so
that `plan` refuses nothing as a secret that `validate` (and the pre-commit hook) passed, and says it
in the same words."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Literal

from aigo_apply.config import env_names
from aigo_apply.config.doc_path import dotted
from aigo_apply.config.finder import Finder
from aigo_apply.config.host_paths import Protected, all_homes, expand_home, home_holding, private_place, system_folder
from aigo_apply.config.path_facts import HostPaths
from aigo_apply.config.secret_names import clear_secret, hub_token_name, public_variable
from aigo_apply.config.secret_values import CREDENTIAL_PATTERNS as CREDENTIAL_PATTERNS  # for its callers
from aigo_apply.config.secret_values import credential_hint
from aigo_apply.config.secret_values import credential_kind as credential_kind
from aigo_apply.config.yaml_source import Path_, comments
from aigo_apply.errors import Problem
from aigo_apply.json_types import JsonMap, JsonObject, JsonValue

HUB_TOKEN_FILES = ("token", "stored_tokens")  # in a `huggingface` folder
REFERENCE_FIX = "pass it by reference: NAME: {from_env: VARIABLE} or {from_file: /path/to/file}"


def unsafe_secret_file(
    path: Path,
    home: Path,
    token_files: Iterable[Path] = (),
    protected: Iterable[Protected] = (),
    homes: Iterable[Path] = (),
    mine: frozenset[Path] | None = None,
    credentials: Path | None | Literal["any"] = "any",
) -> str | None:
    """Why the secret file `path` (absolute, normalised or resolved) must not be read into a
    container, or None: the Hugging Face token, inside the tool's own folders (state, Hugging Face
    cache, model store), a credential folder or file at any depth, a system folder or /var/lib
    (services' data), or another account's home. The same private places as a mount's. `home` is
    yours, `mine` it as written and resolved (just `home` when None), `homes` every other one.

    A systemd credential (`systemd_credential`) is the one file inside /run a secret may name: what
    systemd hands a service (LoadCredential=) for exactly this. `credentials` is the folder systemd
    gave this process ($CREDENTIALS_DIRECTORY; None: none), the only one read from at plan and apply
    time (root can read every unit's); "any" when the file is judged as written (validate)."""
    parts = path.parts
    if path in set(token_files) or (len(parts) >= 2 and parts[-2] == "huggingface" and parts[-1] in HUB_TOKEN_FILES):
        return "the Hugging Face token file"
    for place in protected:
        if path == place.folder or place.folder in path.parents:
            return f"inside {place.name} ({place.folder})"
    private = private_place(path, home)
    if private:
        return f"inside the private folder {private[0]}" if private[1] else f"the private file {private[0]}"
    if systemd_credential(path):
        if credentials == "any" or (credentials is not None and credentials in path.parents):
            return None
        if credentials is None:
            return (
                "a systemd credential, and aigo-apply was not started with credentials of its own (no "
                "$CREDENTIALS_DIRECTORY): run it from a unit with LoadCredential=, or use ~/.aigo/secrets/NAME"
            )
        return f"another systemd unit's credential (this process's own are in {credentials})"
    system = system_folder(path) or (Path("/var/lib") if Path("/var/lib") in path.parents else None)
    if system:
        return f"inside the system folder {system}"
    mine = frozenset({home}) if mine is None else mine
    owner = home_holding(path, all_homes(mine, homes))
    if owner is not None and owner not in mine:
        return f"inside the home folder {owner} of another account"
    return None


def systemd_credential(path: Path) -> bool:
    """Whether `path` is a file in a systemd unit's credential folder: /run/credentials/UNIT/NAME
    (a system service's) or /run/user/UID/credentials/UNIT/NAME (a user service's, in
    $XDG_RUNTIME_DIR), at any depth below UNIT."""
    parts = path.parts
    if parts[:3] == ("/", "run", "credentials"):
        return len(parts) >= 5 and ".." not in parts
    in_user = len(parts) >= 7 and parts[1:3] == ("run", "user") and parts[3].isdigit()
    return in_user and parts[4] == "credentials" and ".." not in parts


def _walk(value: JsonValue | JsonMap, path: Path_) -> Iterator[tuple[Path_, str, bool]]:
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


def _texts(value: JsonValue | JsonMap) -> Iterator[str]:
    """The texts `_walk` yields (every string key and value), in no particular order and without
    their paths: what `check_clear_credentials` searches before it locates anything."""
    stack: list[JsonValue | JsonMap] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield from (key for key in item if isinstance(key, str))
            stack += item.values()
        elif isinstance(item, list):
            stack += item
        elif isinstance(item, str):
            yield item


def _in_env(path: Path_, is_key: bool) -> bool:
    """Whether `path` is the value of an engine environment entry (models.ALIAS.env.NAME, and an
    engine-wide or default env block if the schema has one) or a reference's target (there, or the
    router's keys): check_env gives those one message each. Names are still searched here."""
    if is_key:
        return False
    if path[-1:] in (("from_env",), ("from_file",)):
        path = path[:-1]
        if path == ("router", "api_keys"):
            return True
    if path[:1] in (("models",), ("engines",)) and path[2:3] == ("env",):
        return len(path) == 4
    return path[:2] == ("defaults", "env") and len(path) == 3


class _Kinds(dict[str, "str | None"]):
    """credential_kind of each distinct text, searched once: YAML aliases can repeat one
    4096-character value 100,000 times, which the patterns would otherwise search each time."""

    def __missing__(self, text: str) -> str | None:
        self[text] = kind = credential_kind(text)
        return kind


ANYWHERE_FIX = (
    "never write a credential in aigo.yaml (a secret an engine needs goes in its env by reference: "
    "NAME: {from_env: VARIABLE} or {from_file: /path/to/file})"
)
COMMENT_FIX = f"remove it from the comment: aigo.yaml is committed and shared; {ANYWHERE_FIX}"


def check_clear_credentials(data: JsonValue | JsonMap, f: Finder, kinds: _Kinds | None = None) -> None:
    """No value, key or comment anywhere looks like a credential: the spec label stores the
    canonical spec, plans print it, and the file is shared. Env entries and references are left to
    `check_env` (one message per field)."""
    kinds = _Kinds() if kinds is None else kinds
    if credential_hint(f.source.text):  # else no comment can hold one: the file is not scanned again
        found = [(line, col, kind) for line, col, text in comments(f.source.text) if (kind := credential_kind(text))]
        keys = sorted((at, dotted(path)) for path, at in f.source.marks.keys.items()) if found else []
        for line, column, kind in found:
            entry = _entry_of(keys, line)
            f.problems.append(Problem(line, column, entry, f"this comment holds {kind}; {COMMENT_FIX}", f.source.file))
    if not any(kinds[text] for text in _texts(data)):
        return  # the usual case: nothing to locate, so no path is built for each value
    for path, text, is_key in _walk(data, ()):
        if _in_env(path, is_key):
            continue
        kind = kinds[text]
        if kind and is_key:
            f.at_key(path, f"this name looks like {kind}; {ANYWHERE_FIX}")
        elif kind:
            f.at_value(path, f"the value looks like {kind} written in clear; {ANYWHERE_FIX}")


def _entry_of(keys: list[tuple[tuple[int, int], str]], line: int) -> str:
    """The path of the entry a comment on `line` is about: the last key written on that line, else
    the first one below it (a comment above an entry), else the last one of the file."""
    n = bisect.bisect_left(keys, ((line + 1, 0), ""))
    if n and keys[n - 1][0][0] == line:
        return keys[n - 1][1]
    return keys[n][1] if n < len(keys) else (keys[-1][1] if keys else "")


def _env_blocks(data: JsonMap, models: JsonMap) -> Iterator[tuple[Path_, JsonObject]]:
    """Every environment mapping that reaches an engine container, with its path."""
    for alias, model in models.items():
        env = model.get("env") if isinstance(model, dict) else None
        if isinstance(env, dict):
            yield ("models", alias, "env"), env
    engines = data.get("engines")
    for engine, section in engines.items() if isinstance(engines, dict) else ():
        env = section.get("env") if isinstance(section, dict) else None
        if isinstance(env, dict):
            yield ("engines", engine, "env"), env
    defaults = data.get("defaults")
    env = defaults.get("env") if isinstance(defaults, dict) else None
    if isinstance(env, dict):
        yield ("defaults", "env"), env


def check_env(data: JsonMap, models: JsonMap, f: Finder, paths: HostPaths) -> None:
    """Each engine environment and the router's keys: no name that loads code or undoes what the
    tool decides (env_names.py), no Hugging Face token, no credential in clear, safe references.
    `paths`: your home, every account's and the environment's folders, for a secret file's path."""
    kinds = _Kinds()
    check_clear_credentials(data, f, kinds)
    for where, env in _env_blocks(data, models):
        for name, value in env.items():
            _check_entry((*where, name), name, value, f, kinds, paths)
    router = data.get("router")
    keys = router.get("api_keys") if isinstance(router, dict) else None
    if isinstance(keys, dict) and len(keys) == 1:  # the keys go into a file the router container reads
        kind, target = next(iter(keys.items()))
        _check_reference(("router", "api_keys"), kind, target, f, paths)
        if kind == "from_env" and isinstance(target, str) and (why := public_variable(target)):
            f.at_value(
                ("router", "api_keys", "from_env"),
                f"the router's keys would be guessable: {why}; put the keys (one per line, 16 characters or "
                "more) in a variable of their own, e.g. api_keys: {from_env: AIGO_API_KEYS}",
            )


def _check_entry(where: Path_, name: str, value: JsonValue, f: Finder, kinds: _Kinds, paths: HostPaths) -> None:
    if isinstance(name, str) and (why := env_names.refused_name(name)):
        f.at_key(where, f"an engine never gets {name} from aigo.yaml: {why}")
    elif isinstance(name, str) and hub_token_name(name):
        f.at_key(
            where,
            "engine containers never get a Hugging Face token: aigo-apply downloads models on this host "
            "(with HF_TOKEN from its environment or `hf auth login`) and the engine runs offline "
            "(HF_HUB_OFFLINE=1); remove this entry",
        )
    elif isinstance(value, dict) and len(value) == 1:
        _check_reference(where, *next(iter(value.items())), f, paths)
    elif isinstance(value, str) and (kind := kinds[value]):
        f.at_value(where, f"the value looks like {kind} written in clear; {REFERENCE_FIX}")
    elif isinstance(value, str) and isinstance(name, str) and clear_secret(name, value):
        f.at_value(
            where,
            f"{name} looks like a secret written in clear; pass it by reference, e.g. {name}: {{from_env: {name}}}",
        )


def _check_reference(where: Path_, kind: str, target: JsonValue, f: Finder, paths: HostPaths) -> None:
    """A reference names no credential, no Hugging Face token variable and no system or private file."""
    if not isinstance(target, str):
        return
    if kind in ("from_env", "from_file") and (shaped := credential_kind(target)):
        f.at_value(where, "; ".join(reference_credential(kind, shaped)))
    elif kind == "from_env" and hub_token_name(target):
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
        lexical = Path(normal_path(str(expand_home(target, paths.home))))
        mine = paths.mine(paths.home)
        why = unsafe_secret_file(lexical, paths.home, (), paths.protected, paths.homes, mine)
        if why:
            f.at_value(
                where,
                f"the secret file {target!r} is {why}; engines must never get it. Keep the secret in a file "
                "of its own (e.g. ~/.aigo/secrets/NAME, mode 600) and point from_file there",
            )


def reference_credential(kind: str, shaped: str) -> tuple[str, str]:
    """What is wrong with a reference whose target looks like a credential (`{from_env: hf_...}`),
    and what to do; validate's message and the plan's alike, neither quoting the target."""
    if kind == "from_env":
        return (
            f"from_env takes the name of a variable, and this one looks like {shaped} itself",
            "put the secret in a variable of its own (export MY_KEY=...) and write {from_env: MY_KEY}",
        )
    return (
        f"from_file takes the path of a file, and this one looks like {shaped} itself",
        "put the secret in a file of its own (e.g. ~/.aigo/secrets/NAME, mode 600) and write {from_file: PATH}",
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
