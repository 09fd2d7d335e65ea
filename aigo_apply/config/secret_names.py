"""Which environment variable names hold secrets, judged by their whole parts, and which values are
plainly no secret, judged by their shape (pure).

A check that refuses what users ordinarily write costs more trust than it buys: matching TOKEN
anywhere in a name refused `TOKENIZERS_PARALLELISM: "false"` (the Hugging Face tokenizers switch),
`MAX_TOKENS` and vLLM's `VLLM_MAX_TOKENS_PER_EXPERT_FP4_MOE` as "a secret written in clear". So a
name is split into its words (at `_`, other separators and camelCase: `HF_TOKEN`, `apiKey`), and it
names a secret when one word is (or ends in) TOKEN, SECRET, PASSWORD, PASSWD or PASSPHRASE (PGPASSWORD; not
TOKENS, TOKENIZERS), or two words in a row are API KEY(S), ACCESS KEY or PRIVATE KEY (or written as
one: APIKEY).

A credential is found by its value's shape (config/secret_values.py), under any name; the name
decides only for the secrets that have no shape (`clear_secret`), and only by its last words, which
say what the value is:
- a password, a secret or a key (`DB_PASSWORD`, `CLIENT_SECRET`, `OPENAI_API_KEY`, `S3_ACCESS_KEY_ID`,
  `PGPASSWORD`), or a secret's file (`HF_TOKEN_PATH`): any value but a plain one is refused;
- a token (`GITHUB_TOKEN`, `EOS_TOKEN`): to an LLM a token is also a piece of text, so only a value
  shaped like a random token (one run of 8 or more letters, digits and `-._~+/=` with a letter beside
  a digit) or a path is refused: `EOS_TOKEN: "</s>"`, `STOP_TOKEN: "<|im_end|>"` are special tokens,
  `SAMPLE_TOKEN: token_id_42` an identifier;
- anything else (`TOKEN_TYPE: bearer`, `SECRET_BACKEND: vault`, `TOKEN_URL`, `API_KEY_HEADER`):
  the value is what the name says it is, no secret, and only its shape is judged.
A plain value is empty, a boolean word, or a short number with or without a unit: a switch, a size or
a time (`VLLM_MULTI_STREAM_GEMM_TOKEN_THRESHOLD: 1024`, `MAX_TOKEN_LENGTH: 32k`, `TOKEN_TTL: 30s`);
or a path under a name whose last word says it holds a location (`OPENAI_API_KEY_FILE:
/run/secrets/openai`, `HF_TOKEN_PATH: ~/.aigo/secrets/hf`: FILE, PATH, DIR...), the file that holds
the secret and not the secret (whether it may be read is the path checks' business).

Also the names of the Hugging Face token (`hub_token_name`: HF_TOKEN, HF_READ_TOKEN, HF_API_KEY,
HUGGING_FACE_HUB_TOKEN...; not HF_HUB_DISABLE_IMPLICIT_TOKEN, a switch, nor HF_TOKEN_PATH, a path), and the variables whose value
is no secret at all (`public_variable`: HOME, PATH, USER, ... what the login, the shell, the terminal
and the system set, which anyone on the machine can know or guess), which router.api_keys must not
be read from, and the keys that are too short or shaped to be guessed (`guessable_key`).
"""

from __future__ import annotations

import re

_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
SECRET_WORDS = frozenset({"TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "APIKEY", "ACCESSKEY", "PRIVATEKEY"})
SECRET_ENDINGS = (
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "APIKEY",
)  # a word written together: PGPASSWORD
SECRET_PAIRS = frozenset({("API", "KEY"), ("API", "KEYS"), ("ACCESS", "KEY"), ("PRIVATE", "KEY")})
# A switch (empty, a boolean word), or a number of at most 12 digits (a longer one may be a PIN or an
# account number) with an optional exponent and unit: a size (32k, 8K, 1.5M, 512MiB, 2GB, 2g), a time
# (100ms, 30s, 5m, 2h, 7d) or a share (50%), with at most one space before the unit (16 GiB).
_SWITCH = re.compile(
    r"(?i:true|false|yes|no|on|off|y|n|none|null|auto)?"
    r"|[+-]?(?:[0-9]{1,12}(?:\.[0-9]{1,12})?|\.[0-9]{1,12})(?:[eE][+-]?[0-9]{1,3})?"
    r"(?: ?(?:[kKmMgGtTpP]i?[bB]?|[bB]|[nu\u00b5m]s|min|[smhdw]|%))?"
)
# The last word of a name that holds a location, not a secret: OPENAI_API_KEY_FILE, HF_TOKEN_PATH.
LOCATION_WORDS = frozenset({"FILE", "FILES", "FILENAME", "PATH", "PATHS", "DIR", "DIRS", "DIRECTORY", "FOLDER"})
# A path: absolute, in a home (~/) or relative to the working folder (./, ../), with no space or
# control character (a list of paths joined by ':' too: /a:/b).
_PATH = re.compile(r"(?:~|\.{1,2})?/[^\s\x00-\x1f\x7f-\x9f]*")

_HUB_STARTS = (("HF",), ("HUGGINGFACE",), ("HUGGING", "FACE"), ("HUGGINGFACEHUB",))
_HUB_QUALIFIERS = frozenset({"HUB", "API", "READ", "WRITE", "ACCESS", "AUTH", "USER"})
_HUB_ENDS = (("TOKEN",), ("TOKENS",), ("API", "KEY"), ("APIKEY",))

PUBLIC_NAMES = frozenset(
    """HOME PATH USER USERNAME LOGNAME PWD OLDPWD SHELL LANG LANGUAGE TERM TERM_PROGRAM TERM_PROGRAM_VERSION
    COLORTERM HOSTNAME HOST HOSTTYPE MACHTYPE OSTYPE MAIL MAILPATH SHLVL EDITOR VISUAL PAGER BROWSER TMPDIR
    TEMP TMP TZ DISPLAY WAYLAND_DISPLAY UID EUID GID PPID PS1 PS2 PS4 IFS COLUMNS LINES MANPATH INFOPATH
    LS_COLORS LESSOPEN LESSCLOSE HISTFILE HISTSIZE HISTFILESIZE HISTCONTROL MOTD_SHOWN CI INVOCATION_ID
    JOURNAL_STREAM SYSTEMD_EXEC_PID NOTIFY_SOCKET LISTEN_PID LISTEN_FDS DESKTOP_SESSION WINDOWID
    VIRTUAL_ENV CONDA_PREFIX CONDA_DEFAULT_ENV PYENV_ROOT GOPATH GOROOT JAVA_HOME CARGO_HOME RUSTUP_HOME
    KUBECONFIG DOCKER_HOST DOCKER_CONFIG CONTAINER_HOST HF_HOME HF_HUB_CACHE AIGO_FILE AIGO_STATE_DIR
    AIGO_NO_MEMO""".split()
)
PUBLIC_PREFIXES = ("LC_", "XDG_", "SSH_", "SUDO_", "DBUS_", "BASH_", "ZSH_", "GITHUB_", "RUNNER_", "GDM", "GNOME_",
                   "KDE_", "QT_", "GTK_", "npm_config_", "PIP_", "PYTHON", "LD_")  # fmt: skip
# GITHUB_* and RUNNER_* are what GitHub Actions sets for every job (GITHUB_SHA, GITHUB_REPOSITORY...):
# GITHUB_TOKEN, the one secret among them, is judged by its words first.


def words(name: str) -> list[str]:
    """The words of a name, upper-case: `HF_TOKEN` -> HF, TOKEN; `apiKey` -> API, KEY."""
    return [w.upper() for w in _WORDS.findall(name)]


def secret_name(name: str) -> bool:
    """Whether a variable of this name holds a secret (judged by whole words, see the docstring)."""
    parts = words(name)
    pairs = zip(parts, parts[1:], strict=False)
    whole = any(p in SECRET_WORDS or p.endswith(SECRET_ENDINGS) for p in parts)  # PGPASSWORD, GHTOKEN
    return whole or any(pair in SECRET_PAIRS for pair in pairs)


def switch_value(value: str) -> bool:
    """Whether a value is plainly no secret by its shape: empty, a boolean word, a short number with
    or without a unit (a size, a time, a share)."""
    return _SWITCH.fullmatch(value.strip()) is not None


def location_name(name: str) -> bool:
    """Whether the last whole word of `name` says it holds a location: FILE, PATH, DIR... (a whole
    word: not PROFILE, nor KEYFILE written together)."""
    parts = words(name)
    return bool(parts) and parts[-1] in LOCATION_WORDS


def path_value(value: str) -> bool:
    """Whether `value` is shaped like a path: /..., ~/..., ./... or ../..., with no space."""
    return _PATH.fullmatch(value) is not None


def plain_value(name: str, value: str) -> bool:
    """Whether the value of the variable `name` (a secret's name) is plainly no secret: a switch, a
    size or a time (`switch_value`), or a path under a name that says it holds one
    (`OPENAI_API_KEY_FILE: /run/secrets/openai`)."""
    return switch_value(value) or (location_name(name) and path_value(value))


# The last words of a name whose value is a secret with no shape of its own (a password, a key): a
# word ending in one of these (PGPASSWORD, CLIENTSECRET), or a pair or triple of words.
SECRET_LAST_WORD = ("PASSWORD", "PASSWD", "PASSPHRASE", "SECRET", "APIKEY", "ACCESSKEY", "PRIVATEKEY")
SECRET_LAST_WORDS = (
    ("API", "KEY"), ("API", "KEYS"), ("ACCESS", "KEY"), ("PRIVATE", "KEY"), ("SECRET", "KEY"),
    ("ACCESS", "KEY", "ID"), ("SECRET", "KEY", "ID"),
)  # fmt: skip
# A random token: one run of 8 or more token characters with a letter beside a digit somewhere (a
# part that mixes them, as random characters do: `s3cr3t-value-1`, `4f9a8c2e`), not an identifier
# of words and numbers (`token_id_42`, `eos_token_2`).
_RANDOM_TOKEN = re.compile(r"(?=[A-Za-z0-9._~+/=-]*?(?:[A-Za-z][0-9]|[0-9][A-Za-z]))[A-Za-z0-9._~+/=-]{8,}")


def token_shaped(value: str) -> bool:
    """Whether `value` is shaped like a random token: one run of 8 or more letters, digits and
    `-._~+/=`, with a letter beside a digit (not `</s>`, `<|im_end|>`, `Observation:`, `###`, nor
    `token_id_42`, words and a number joined)."""
    return _RANDOM_TOKEN.fullmatch(value.strip()) is not None


def clear_secret(name: str, value: str) -> bool:
    """Whether `value`, written in clear under the variable `name`, is a secret that only the name
    tells (a password has no shape), judged by the name's last words (see the docstring): under a
    password, secret or key, or a secret's file, any value but a plain one; under a token, a value
    shaped like a random token or a path; under anything else (TOKEN_TYPE), none."""
    if not secret_name(name) or plain_value(name, value):
        return False
    parts = tuple(words(name))
    if location_name(name) or parts[-1].endswith(SECRET_LAST_WORD):
        return True
    if any(parts[-len(end) :] == end for end in SECRET_LAST_WORDS):
        return True
    return parts[-1].endswith("TOKEN") and (token_shaped(value) or path_value(value))


def hub_token_name(name: str) -> bool:
    """Whether the Hugging Face libraries read a token (or the token's file) from this name: HF or
    HUGGING(_)FACE(HUB), then at most two of HUB, API, READ, WRITE, ACCESS, AUTH, USER, then TOKEN(S)
    or API KEY. HF_HUB_DISABLE_IMPLICIT_TOKEN and the like are switches, not tokens."""
    parts = tuple(words(name))
    for start in _HUB_STARTS:
        if parts[: len(start)] != start:
            continue
        rest = parts[len(start) :]
        for end in _HUB_ENDS:
            middle = rest[: len(rest) - len(end)]
            if rest[len(rest) - len(end) :] == end and len(middle) <= 2 and set(middle) <= _HUB_QUALIFIERS:
                return True
    return False


def public_variable(name: str) -> str | None:
    """Why the variable `name` holds no secret (anyone on the machine can know or guess its value),
    or None. A name of secret words (GITHUB_TOKEN, AIGO_API_KEYS) is never public."""
    if secret_name(name):
        return None
    if name in PUBLIC_NAMES or name.upper() in PUBLIC_NAMES:
        return f"{name} is set by the system, the login or the shell, and its value is no secret"
    if name.startswith(PUBLIC_PREFIXES):
        return f"{name} is one of the variables the system, the login, the shell or a tool sets, with no secret value"
    return None


MIN_KEY_CHARS = 16
KEY_FIX = f"make each key at least {MIN_KEY_CHARS} random characters (e.g. `openssl rand -hex 24`), one per line"


def guessable_key(key: str) -> str | None:
    """Why an API key could be guessed (said without the key), or None: shorter than MIN_KEY_CHARS,
    or shaped like a path or a list of paths (a value such as $HOME's or $PATH's)."""
    if len(key) < MIN_KEY_CHARS:
        return f"is {len(key)} characters long, and a key under {MIN_KEY_CHARS} characters can be guessed"
    if key.startswith(("/", "~", "./")) or ":/" in key:
        return "looks like a path, not a secret: anyone on this machine could know it"
    return None
