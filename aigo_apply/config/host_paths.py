"""What may be mounted into an engine container: a model's own folder or file, never the host's
system, its users' homes and secrets, nor the tool's own folders. One policy, applied three times:
when the file is validated (located errors), when the desired state is built (with the host's real
folders), and by the Docker adapter just before a container is made (the path must still be the
one planned: no symlink swapped in since).

A config may come from a repository its user does not fully trust, and aigo-apply often runs as
root: a mount is the one way a config reaches the host's files, so it is held to the model's own."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aigo_apply.config.finder import Finder
from aigo_apply.config.yaml_source import Path_

# Never mounted, nor anything inside them: the system, the container engines' own state, logs.
SYSTEM_DIRS = (
    "/etc",
    "/proc",
    "/sys",
    "/dev",
    "/boot",
    "/run",
    "/var/run",
    "/var/lib/docker",
    "/var/lib/containerd",
    "/var/lib/kubelet",
    "/var/lib/containers",
    "/var/log",
    "/var/spool",
    "/var/mail",
    "/var/backups",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/root/.ssh",
)
# Folders that hold many other things: never mounted as a whole (a model folder inside is fine).
SHARED_DIRS = (
    "/var",
    "/var/lib",
    "/var/cache",
    "/var/tmp",
    "/home",
    "/root",
    "/opt",
    "/srv",
    "/mnt",
    "/media",
    "/tmp",
    "/usr/local",
    "/snap",
    "/nix",
)
# Inside a home folder: credentials and keys (the folder itself and everything in it).
PRIVATE_HOME_DIRS = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".docker",
    ".kube",
    ".config",
    ".password-store",
    ".pki",
    ".local/share/keyrings",
    ".terraform.d",
)
# Docker's `-v SRC:DST:MODE` splits on ':' and `--mount` on ','; control characters have no place in a path.
_UNMOUNTABLE = re.compile(r"[:,\x00-\x1f\x7f-\x9f]")


HF_CACHE = "the Hugging Face cache and its token"


@dataclass(frozen=True)
class Protected:
    """A folder of this host that a model mount must not expose: `name` says what it is; with
    `inside_too` nothing below it may be mounted either (else only the folder and its parents)."""

    name: str
    folder: Path
    inside_too: bool = True


def hf_home(environ: dict[str, str] | os._Environ[str] | None = None, home: Path | None = None) -> Path:
    """The Hugging Face cache root (its `token` file is the Hub credential): $HF_HOME, else
    $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface."""
    env = os.environ if environ is None else environ
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser()
    cache = env.get("XDG_CACHE_HOME") or str((home or Path.home()) / ".cache")
    return Path(cache) / "huggingface"


def path_text_problem(text: str) -> str | None:
    """Why a path cannot be given to Docker as a bind mount as written, or None."""
    bad = _UNMOUNTABLE.search(text)
    if bad is None:
        return None
    char = bad.group()
    what = {":": "':' (Docker's mount syntax splits on it)", ",": "',' (Docker's --mount syntax splits on it)"}
    return f"holds {what.get(char, repr(char) + ' (a control character)')}"


def unsafe_mount(path: Path, home: Path, protected: Iterable[Protected] = (), store: bool = False) -> str | None:
    """Why mounting `path` (absolute, resolved) into an engine would expose the host, or None.
    With `store` (the model store, never mounted itself: each download below it is) a shared
    folder or the home folder is fine, a system or private one is not."""
    if path == Path("/"):
        return "the whole filesystem"
    if not store and path == home:
        return "your whole home folder"
    for private in PRIVATE_HOME_DIRS:
        secret = home / private
        if path == secret or secret in path.parents:
            return f"the private folder ~/{private}" + ("" if path == secret else " (or inside it)")
    for system in map(Path, SYSTEM_DIRS):
        if path == system or system in path.parents:
            return f"the system folder {system}" if path == system else f"inside the system folder {system}"
    if not store and str(path) in SHARED_DIRS:
        return f"the shared folder {path} (it holds far more than one model)"
    if not store and path in home.parents:
        return f"a folder that holds home folders ({home} is inside it)"
    for place in protected:
        if path == place.folder or (not store and path in place.folder.parents):
            return f"{place.name} ({place.folder})" if path == place.folder else f"a folder that holds {place.name}"
        if place.inside_too and place.folder in path.parents:
            return f"inside {place.name} ({place.folder})"
    return None


def env_protected(environ: dict[str, str] | os._Environ[str] | None = None) -> tuple[Protected, ...]:
    """What validation can know without the host context: the Hugging Face cache root."""
    return (Protected(HF_CACHE, hf_home(environ)),)


def mount_places(data: dict[str, Any], models: dict[str, Any]) -> list[tuple[Path_, str]]:
    """Every host path the file mounts (model sources, speculative drafts) and the model store."""
    places: list[tuple[Path_, str]] = []
    for alias, model in models.items():
        if not isinstance(model, dict):
            continue
        source = model.get("source")
        if isinstance(source, dict) and isinstance(source.get("path"), str):
            places.append((("models", alias, "source", "path"), source["path"]))
        spec = model.get("vllm", {}).get("speculative") if isinstance(model.get("vllm"), dict) else None
        draft = spec.get("draft") if isinstance(spec, dict) else None
        if isinstance(draft, dict) and isinstance(draft.get("path"), str):
            places.append((("models", alias, "vllm", "speculative", "draft", "path"), draft["path"]))
    defaults = data.get("defaults")
    if isinstance(defaults, dict) and isinstance(defaults.get("models_dir"), str):
        places.append((("defaults", "models_dir"), defaults["models_dir"]))
    return places


def check_paths(data: dict[str, Any], models: dict[str, Any], f: Finder, base: Path) -> None:
    """A model folder is mounted into a container: it must be a model's folder or file, not the
    host's secrets or system (a config from a shared repo must not mount ~/.ssh or /etc)."""
    home = Path.home().resolve()
    protected = env_protected()
    for where, raw in mount_places(data, models):
        problem = path_text_problem(raw)
        if problem:  # control characters are the schema's to report; ':' and ',' are Docker's
            if "control character" not in problem:
                f.at_value(where, f"the path {problem}; rename the folder or file (or link it under a plain name)")
            continue
        try:
            resolved = (base / Path(raw).expanduser()).resolve()
        except (OSError, RuntimeError, ValueError):
            continue
        why = unsafe_mount(resolved, home, protected, store=where[0] == "defaults") or (
            path_text_problem(str(resolved)) and f"a path that {path_text_problem(str(resolved))}"
        )
        if why:
            fix = (
                "downloads go there and are mounted into engines: choose a folder of their own"
                if where[0] == "defaults"
                else "engines get this mounted, so it must be the model's own folder or file: point it there"
            )
            f.at_value(where, f"{raw!r} is {why} ({resolved}); {fix}")
