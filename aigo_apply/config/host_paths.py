"""Rules for the host folders and files a config mounts into engine containers: a model's own
folder or file, never the host's system, secrets or the tool's own folders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aigo_apply.config.finder import Finder
from aigo_apply.config.yaml_source import Path_

SYSTEM_DIRS = (
    "/etc",
    "/proc",
    "/sys",
    "/dev",
    "/boot",
    "/run",
    "/var/run",
    "/var/lib/docker",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/root/.ssh",
)
PRIVATE_HOME_DIRS = (".ssh", ".gnupg", ".aws", ".docker", ".kube", ".config", ".local/share/keyrings")


def unsafe_mount(path: Path) -> str | None:
    """Why mounting `path` into an engine container would expose the host, or None when it is fine."""
    text = str(path)
    if text == "/":
        return "the whole filesystem"
    for system in SYSTEM_DIRS:
        if text == system or text.startswith(system + "/"):
            return f"the system folder {system}"
    home = Path.home().resolve()
    if path == home:
        return "your whole home folder"
    for private in PRIVATE_HOME_DIRS:
        secret = home / private
        if path == secret or secret in path.parents:
            return f"the private folder ~/{private}"
    return None


def check_paths(data: dict[str, Any], models: dict[str, Any], f: Finder, base: Path) -> None:
    """A model folder is mounted into a container: it must be a model's folder, not the host's
    secrets or system (a config from a shared repo must not mount ~/.ssh or /etc)."""
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
    for where, raw in places:
        try:
            resolved = (base / Path(raw).expanduser()).resolve()
        except (OSError, RuntimeError, ValueError):
            continue
        why = unsafe_mount(resolved)
        if why:
            f.at_value(
                where,
                f"{raw!r} is {why} ({resolved}); engines get this folder mounted, so it must be "
                "the model's own folder: point it there",
            )
