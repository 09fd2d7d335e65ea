"""Rules for secrets in the config: a model's environment passes secrets by reference, never in
clear; no value anywhere in the file looks like a credential (it would be stored in the spec label
and printed in plans); the Hugging Face token never reaches a container under any name; and a
`from_file` reference names an absolute path outside the host's system and private places (the
same policy as a mount's: config/host_paths.py; here, another account's home is private too).

The pure policy functions here (`credential_kind`, `unsafe_secret_file`, `hub_token_name`) are
used again at plan and apply time by apply/secrets.py, on the resolved paths and the values read."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from aigo_apply.config import env_names
from aigo_apply.config.finder import Finder
from aigo_apply.config.host_paths import Protected, all_homes, expand_home, home_holding, private_place, system_folder
from aigo_apply.config.path_facts import HostPaths
from aigo_apply.config.secret_names import hub_token_name, plain_value, public_variable, secret_name
from aigo_apply.config.yaml_source import Path_

# What a credential written in clear looks like, with the words that name it in messages. Each is
# searched in every value of a config (up to 4096 characters each) and in secrets read at apply time,
# so each must take time linear in the text: no two quantifiers that can share characters, a literal
# or a bounded part before every open-ended run, and nothing that makes a run be scanned again from
# each of its characters (tests/unit/config/test_env_hostile_regex.py holds the worst inputs known).
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
CREDENTIAL_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY"), "a private key"),
    (re.compile(_START + r"hf_[A-Za-z0-9]{20,}"), "a Hugging Face token (hf_...)"),
    (re.compile(_START + r"sk-" + _LONG_PART + r"[A-Za-z0-9_-]{16,}"), "an API key (sk-...)"),
    (re.compile(_START + r"[sr]k_(live|test)_[A-Za-z0-9]{16,}"), "a Stripe key"),
    (re.compile(_START + r"(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), "a GitHub token"),
    (re.compile(_START + r"glpat-[A-Za-z0-9_-]{16,}"), "a GitLab token"),
    (re.compile(_START + r"xox[abposr]-[A-Za-z0-9-]{10,}"), "a Slack token"),
    (re.compile(_START + r"(AKIA|ASIA)[A-Z0-9]{16}\b"), "an AWS access key"),
    (re.compile(_START + r"AIza[0-9A-Za-z_-]{30,}"), "a Google API key"),
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
HUB_TOKEN_FILES = ("token", "stored_tokens")  # in a `huggingface` folder
REFERENCE_FIX = "pass it by reference: NAME: {from_env: VARIABLE} or {from_file: /path/to/file}"


# What every pattern above needs in the text (its literal part), searched first in one pass: most
# values (names, paths, numbers) have none, and then the patterns need not be tried one by one.
# Only a quick "no": a text that has one still goes through every pattern, in order.
_MAYBE_CREDENTIAL = re.compile(
    r"-----BEGIN |hf_|sk-|k_live_|k_test_|gh[pousr]_|github_pat_|glpat-|xox[abposr]-|AKIA|ASIA|AIza|npm_|pypi-|eyJ|://"
    r"|[Bb]asic|BASIC|[Bb]earer|BEARER"
)


def credential_kind(text: str) -> str | None:
    """What kind of credential `text` looks like, or None. Never returns any part of the text."""
    if _MAYBE_CREDENTIAL.search(text) is None:
        return None
    for pattern, kind in CREDENTIAL_PATTERNS:
        if pattern.search(text):
            return kind
    return None


def unsafe_secret_file(
    path: Path,
    home: Path,
    token_files: Iterable[Path] = (),
    protected: Iterable[Protected] = (),
    homes: Iterable[Path] = (),
    mine: frozenset[Path] | None = None,
) -> str | None:
    """Why the secret file `path` (absolute, normalised or resolved) must not be read into a
    container, or None: the Hugging Face token, inside the tool's own folders (state, Hugging Face
    cache, model store), a credential folder or file at any depth, a system folder or /var/lib
    (services' data), or another account's home. The same private places as a mount's. `home` is
    yours, `mine` it as written and resolved (just `home` when None), `homes` every other one."""
    parts = path.parts
    if path in set(token_files) or (len(parts) >= 2 and parts[-2] == "huggingface" and parts[-1] in HUB_TOKEN_FILES):
        return "the Hugging Face token file"
    for place in protected:
        if path == place.folder or place.folder in path.parents:
            return f"inside {place.name} ({place.folder})"
    private = private_place(path, home)
    if private:
        return f"inside the private folder {private[0]}" if private[1] else f"the private file {private[0]}"
    system = system_folder(path) or (Path("/var/lib") if Path("/var/lib") in path.parents else None)
    if system:
        return f"inside the system folder {system}"
    mine = frozenset({home}) if mine is None else mine
    owner = home_holding(path, all_homes(mine, homes))
    if owner is not None and owner not in mine:
        return f"inside the home folder {owner} of another account"
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


def _texts(value: Any) -> Iterator[str]:
    """The texts `_walk` yields (every string key and value), in no particular order and without
    their paths: what `check_clear_credentials` searches before it locates anything."""
    stack = [value]
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
    """Whether `path` is the value of an engine environment entry or inside one (models.ALIAS.env.NAME,
    and an engine-wide or default env block if the schema has one): check_env gives those one
    message each. The entry's name is still searched here."""
    if path[:1] in (("models",), ("engines",)) and path[2:3] == ("env",):
        depth = 4
    elif path[:2] == ("defaults", "env"):
        depth = 3
    else:
        return False
    return len(path) > depth or (len(path) == depth and not is_key)


class _Kinds(dict[str, "str | None"]):
    """credential_kind of each distinct text, searched once: YAML aliases can repeat one
    4096-character value 100,000 times, which the patterns would otherwise search each time."""

    def __missing__(self, text: str) -> str | None:
        self[text] = kind = credential_kind(text)
        return kind


def check_clear_credentials(data: Any, f: Finder, kinds: _Kinds | None = None) -> None:
    """No value or key anywhere looks like a credential: the spec label stores the canonical spec
    and plans print it. Env entries are left to `check_env` (one message per field)."""
    kinds = _Kinds() if kinds is None else kinds
    if not any(kinds[text] for text in _texts(data)):
        return  # the usual case: nothing to locate, so no path is built for each value
    for path, text, is_key in _walk(data, ()):
        if _in_env(path, is_key):
            continue
        kind = kinds[text]
        if kind and is_key:
            f.at_key(path, f"this name looks like {kind}; never write a credential in aigo.yaml")
        elif kind:
            f.at_value(path, f"the value looks like {kind} written in clear; never write a credential in aigo.yaml")


def _env_blocks(data: dict[str, Any], models: dict[str, Any]) -> Iterator[tuple[Path_, dict[str, Any]]]:
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


def check_env(data: dict[str, Any], models: dict[str, Any], f: Finder, paths: HostPaths) -> None:
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


def _check_entry(where: Path_, name: Any, value: Any, f: Finder, kinds: _Kinds, paths: HostPaths) -> None:
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
    elif isinstance(value, str) and isinstance(name, str) and secret_name(name) and not plain_value(name, value):
        f.at_value(
            where,
            f"{name} looks like a secret written in clear; pass it by reference, e.g. {name}: {{from_env: {name}}}",
        )


def _check_reference(where: Path_, kind: Any, target: Any, f: Finder, paths: HostPaths) -> None:
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
        lexical = Path(normal_path(str(expand_home(target, paths.home))))
        mine = paths.mine(paths.home)
        why = unsafe_secret_file(lexical, paths.home, (), paths.protected, paths.homes, mine)
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
