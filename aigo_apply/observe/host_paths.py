"""Reads what the host says of the paths a run names, once, so that config/ and desired/ judge them
as data (config/path_facts.HostPaths): each path the file mounts resolved, or why
it cannot be; your home resolved; the folders the environment names (the Hugging Face cache, the
state root, the model store); every account's home; and for a model store, whether another
account owns or may write a folder on its way. The policy itself is config/host_paths.py.

Also the readers the apply-time checks call again on the paths they are about to use (a secret
file, a mount just before Docker makes its container): those must see the host as it is then."""

from __future__ import annotations

import errno
import functools
import os
import pwd
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from aigo_apply.config.host_paths import (
    HF_CACHE,
    NAME_MAX,
    OS_WHY,
    PATH_MAX,
    SHARED_DIRS,
    STATE,
    STORE,
    Protected,
    expand_home,
    system_folder,
)
from aigo_apply.config.load import Config
from aigo_apply.config.mount_rules import mount_places
from aigo_apply.config.path_facts import HostPaths
from aigo_apply.config.yaml_source import Path_
from aigo_apply.safe_read import home_path

Environ = dict[str, str] | os._Environ[str]


def hf_home(environ: Environ | None = None, home: Path | None = None) -> Path:
    """The Hugging Face cache root (its `token` file is the Hub credential): $HF_HOME, else
    $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface."""
    env = os.environ if environ is None else environ
    if env.get("HF_HOME"):
        return home_path(env["HF_HOME"], "HF_HOME")
    cache = env.get("XDG_CACHE_HOME") or str((home or Path.home()) / ".cache")
    return Path(cache) / "huggingface"


def state_root_of(environ: Environ | None = None, home: Path | None = None) -> Path:
    """The tool's state root as written (not resolved): $AIGO_STATE_DIR, else
    $XDG_STATE_HOME/aigo-apply, else ~/.local/state/aigo-apply."""
    env = os.environ if environ is None else environ
    root = env.get("AIGO_STATE_DIR") or os.path.join(
        env.get("XDG_STATE_HOME") or str((home or Path.home()) / ".local" / "state"), "aigo-apply"
    )
    return home_path(root, "AIGO_STATE_DIR" if env.get("AIGO_STATE_DIR") else "the state folder")


def models_dir_of(environ: Environ | None = None, home: Path | None = None) -> Path:
    """The model store unless defaults.models_dir says otherwise: $XDG_CACHE_HOME/aigo-apply/models,
    else ~/.cache/aigo-apply/models."""
    env = os.environ if environ is None else environ
    cache = env.get("XDG_CACHE_HOME") or str((home or Path.home()) / ".cache")
    return Path(cache) / "aigo-apply" / "models"


def resolve_or_why(path: Path) -> Path | str:
    """`path` (absolute) with every symlink followed, or why it cannot be, in words: a symlink
    loop, a name longer than NAME_MAX or a path longer than PATH_MAX, a folder that cannot be
    searched or a link that cannot be read, a part that is a file, a character no name may hold.
    Never raises (RuntimeError, OSError, ValueError are all answered)."""
    try:
        raw = os.fsencode(path)
    except (UnicodeError, ValueError):
        return "it holds a character no file name can hold"
    if b"\x00" in raw:
        return "it holds a NUL character"
    try:
        real = (path if isinstance(path, Path) else Path(path)).resolve() if not _too_long(raw) else None
    except RuntimeError:  # how Python 3.11-3.12 report a symlink loop
        return OS_WHY[errno.ELOOP]
    except OSError as exc:
        return OS_WHY.get(exc.errno or 0, exc.strerror or type(exc).__name__)
    except ValueError:
        return "it holds a character no file name can hold"
    if real is None or _too_long(os.fsencode(real)):  # a link may lead to a name no folder can hold
        return OS_WHY[errno.ENAMETOOLONG]
    return real


def _too_long(raw: bytes) -> bool:
    """Longer than PATH_MAX, or a name in it longer than NAME_MAX (which a shorter whole cannot hold)."""
    return len(raw) > PATH_MAX or (len(raw) > NAME_MAX and any(len(part) > NAME_MAX for part in raw.split(b"/")))


def try_resolve(path: Path) -> Path:
    """`resolve_or_why`, or the path as written when it cannot be resolved (for the host's own folders)."""
    real = resolve_or_why(path)
    return real if isinstance(real, Path) else Path(os.path.abspath(path))


def usable_homes(found: Iterable[str | Path]) -> tuple[Path, ...]:
    """The home folders the policy holds private, from what the system lists: each as written and
    resolved; not "/" nor a system folder (accounts whose home is `/`, `/bin` or `/dev/null`
    are covered by the system rule), nor a shared folder other than /root (`/tmp` as a home would
    make every scratch folder someone's home)."""
    out: set[Path] = set()
    for text in found:
        if not str(text).startswith("/"):
            continue
        for home in {Path(os.path.normpath(text)), try_resolve(Path(text))}:
            if home == Path("/") or system_folder(home) or (str(home) in SHARED_DIRS and str(home) != "/root"):
                continue
            out.add(home)
    return tuple(sorted(out))


def listed_homes() -> list[str]:
    """The home folders as the system lists them now: each account's in the password database,
    /root, and each folder in /home (read afresh)."""
    found: list[str] = ["/root"]
    try:
        found += [entry.pw_dir for entry in pwd.getpwall()]
    except (OSError, KeyError):
        pass
    try:
        with os.scandir("/home") as entries:
            found += [entry.path for entry in entries]
    except OSError:
        pass
    return found


@functools.lru_cache(maxsize=1)
def known_homes() -> tuple[Path, ...]:
    """Every home folder this system knows (read once per process), as the policy holds them."""
    return usable_homes(listed_homes())


@functools.lru_cache(maxsize=16)
def own_homes(home: Path) -> frozenset[Path]:
    """Your home as given and resolved (/home may be a link to /var/home); resolved once per process,
    as known_homes() is read once."""
    return frozenset({home, try_resolve(home)})


def env_protected(environ: Environ | None = None) -> tuple[Protected, ...]:
    """What validation, the Docker adapter and the secret reader know without the host context:
    the Hugging Face cache, the tool's state root and the default model store (as written and
    resolved: a link to one is the same place)."""
    places = [(HF_CACHE, hf_home(environ), True), (STATE, state_root_of(environ), True)]
    places.append((STORE, models_dir_of(environ), False))
    return tuple(
        Protected(name, folder, inside)
        for name, written, inside in places
        for folder in dict.fromkeys((Path(os.path.abspath(written)), try_resolve(written)))
    )


def others_can_write(path: Path) -> str | None:
    """Why another account could change what lands in the model store `path` (absolute, resolved),
    or None. aigo-apply (often root) downloads into it and mounts what is there into engines, so a
    folder someone else owns or may write (`/tmp`, `/var/tmp`, another account's home) would let
    them plant a model, its remote code or a symlink for the download to follow. The store (or,
    while it does not exist, the folder it will be made in) must be owned by root or you and
    writable by nobody else; no folder above it may be owned by another account, or writable by
    everyone without the sticky bit (then anyone could rename the store away)."""
    mine = {0, os.geteuid()}
    first = True
    for folder in (path, *path.parents):
        try:
            info = os.stat(folder)
        except OSError:
            continue  # not made yet: the folder above is where it will be
        if info.st_uid not in mine:
            return f"a folder another account owns ({folder}: uid {info.st_uid}), which could plant files in it"
        everyone = info.st_mode & stat.S_IWOTH
        if first and everyone:
            return f"a folder every account may write ({folder}), where anyone could plant files"
        if everyone and not info.st_mode & stat.S_ISVTX:
            return f"inside a folder every account may write ({folder}), where anyone could swap it"
        first = False
    return None


def _store(key: Path, real: dict[Path, Path | str], writers: dict[Path, str | None]) -> None:
    """A model store's facts: where `key` leads, where that leads (the desired state checks the
    resolved store again), and who else could write each."""
    if key not in real:
        real[key] = resolve_or_why(key)
    first = real[key]
    if isinstance(first, Path) and first not in real:
        real[first] = resolve_or_why(first)
    for folder in (first, real.get(first) if isinstance(first, Path) else None):
        if isinstance(folder, Path) and folder not in writers:
            writers[folder] = others_can_write(folder)


def _names_a_secret_file(value: object) -> bool:
    """Whether any mapping in the document has a `from_file` key (only then are homes listed for it)."""
    stack: list[object] = [value]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if id(item) in seen:  # a YAML alias repeats one node: it is looked at once
            continue
        seen.add(id(item))
        if isinstance(item, dict):
            if "from_file" in item:
                return True
            stack += item.values()
        elif isinstance(item, list):
            stack += item
    return False


def file_facts(file: str, document: object) -> HostPaths:
    """What validation and the desired state need of the host for the config `file` holding
    `document`: its folder resolved, each path it mounts resolved (or why not) and, for its model
    store, who else could write it; your home; the environment's folders; and every account's home,
    listed only when the file mounts a path or names a secret file."""
    base = Path(file).expanduser().resolve().parent
    data = document if isinstance(document, dict) else {}
    models = data["models"] if isinstance(data.get("models"), dict) else {}
    home = Path.home()
    home_real = try_resolve(home)
    real: dict[Path, Path | str] = {home_real: resolve_or_why(home_real)}
    writers: dict[Path, str | None] = {}
    places = _mounted(data, models, base, home, real, writers)
    defaults = data.get("defaults")
    if not (isinstance(defaults, dict) and "models_dir" in defaults) and not (store := models_dir_of()).is_absolute():
        _store(base / store, real, writers)  # the default store, when the environment names it relatively
    homes = known_homes() if places or _names_a_secret_file(data) else ()
    return HostPaths(home, home_real, homes, env_protected(), real, writers, base)


def _mounted(
    data: Mapping[str, object],
    models: Mapping[str, object],
    base: Path,
    home: Path,
    real: dict[Path, Path | str],
    writers: dict[Path, str | None],
) -> list[tuple[Path_, str]]:
    """Each path the file mounts (config/mount_rules.mount_places), `~` against `home`, resolved into `real`."""
    places = mount_places(data, models)
    seen: set[str] = set()  # models often share a folder: its Path is made and looked up once
    for where, raw in places:
        if where[0] == "defaults":
            _store(base / expand_home(raw, home), real, writers)
        elif raw not in seen:
            seen.add(raw)
            key = base / expand_home(raw, home)
            if key not in real:
                real[key] = resolve_or_why(key)
    return places


def host_facts(home: Path, models_dir: Path, config: Config | None = None) -> HostPaths:
    """What the desired state needs of the host besides the file's paths: `home` resolved, every
    account's home, and the default model store `models_dir` (where it leads, who else could write
    it). With `config`, its paths too, `~` against this `home` (a host context other than this
    process's: the file's own facts were gathered against your home)."""
    home_real = try_resolve(home)
    real: dict[Path, Path | str] = {home_real: resolve_or_why(home_real)}
    writers: dict[Path, str | None] = {}
    if models_dir.is_absolute():
        _store(models_dir, real, writers)
    if config is not None:
        models = config.data.get("models")
        _mounted(config.data, models if isinstance(models, dict) else {}, config.base_dir, home, real, writers)
    return HostPaths(home, home_real, known_homes(), (), real, writers)
