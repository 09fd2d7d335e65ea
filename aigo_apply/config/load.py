"""Turns a path into a checked config: read YAML with positions, apply the schema and the
cross-field rules, and raise one ConfigInvalid that carries every problem found. What the host
says of the paths the file names is gathered by the caller's adapter (`gather`:
observe/host_paths.file_facts, through observe/config_file.load_config), once, between reading and
checking; the rules take it as data."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aigo_apply import __version__
from aigo_apply.config import rules as checks
from aigo_apply.config import schema
from aigo_apply.config.defaults import DEFAULT_FILE, FILE_ENV
from aigo_apply.config.document import Document, is_document
from aigo_apply.config.path_facts import HostPaths
from aigo_apply.config.secret_values import unquoted
from aigo_apply.config.vllm_facts import known_releases
from aigo_apply.config.yaml_source import Marks, Source, load
from aigo_apply.errors import ConfigInvalid, Problem, UsageProblem
from aigo_apply.json_types import JsonValue, obj
from aigo_apply.resources import data_dir
from aigo_apply.safe_read import home_path


@dataclass(frozen=True)
class Config:
    """A file that passed validation: its data, where it lives, where each value is written, and
    what the host said of the paths it names (the desired state looks them up there)."""

    file: str
    base_dir: Path
    data: Document
    marks: Marks
    paths: HostPaths


Gather = Callable[[str, JsonValue], HostPaths]  # the host's facts for a file's paths (observe/host_paths.file_facts)


def choose_file(option: str | None) -> str:
    """-f/--file wins, then $AIGO_FILE, then ./aigo.yaml. A set but empty AIGO_FILE is a mistake
    (a variable meant to name a file, expanded empty), never a quiet fall back to ./aigo.yaml."""
    if option:
        return option
    named = os.environ.get(FILE_ENV)
    if named is not None and not named.strip():
        raise UsageProblem(
            f"{FILE_ENV} is set but empty: name the config file in it, or unset it to use ./{DEFAULT_FILE}"
        )
    return named or DEFAULT_FILE


def load_checked(file: str, gather: Gather) -> Config:
    """The file is read once (a pipe can be read only once): the validity cache keys on those bytes.
    `gather` reads what the host says of the paths it names, once, for the rules and the desired state."""
    path = home_path(file, "the config file")
    source = load(path, file)
    _refuse_foreign(source)
    _refuse_oversized(source)
    key = _validated_key(source.digest)
    known_valid = key is not None and (cache := _cache_dir()) is not None and (cache / key).exists()
    paths = gather(source.file, source.data)
    problems = source.problems + ([] if known_valid else schema.validate(source)) + checks.check(source, paths)
    if problems:
        raise ConfigInvalid(file, unquoted(problems))
    data = source.data
    assert is_document(data), "the schema has accepted it"
    if key is not None and not known_valid:
        _remember_valid(key)
    return Config(file, path.resolve().parent, data, source.marks, paths)


# Schema validation depends only on the file's bytes and the schema, so a file this version has
# already found valid is not validated (nor jsonschema imported) again: plan stays fast. The
# cross-field checks always run; an invalid file is never cached.
def _cache_dir() -> Path | None:
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "aigo-apply" / "validated"


TOP_KEYS = ("version", "project", "models")


def _refuse_foreign(source: Source) -> None:
    """A file that is not an aigo.yaml at all (`-f /etc/shadow`, a kubeconfig, a key) is refused in one
    line that quotes nothing of it: listing its keys as unknown would print the file line by line."""
    data = source.data
    if isinstance(data, dict) and any(key in data for key in TOP_KEYS):
        return
    if isinstance(data, dict):
        message = "is not an aigo.yaml: none of version, project, models is at its top level (its content is not shown)"
    else:
        kind = "a list" if isinstance(data, list) else "a single value"
        message = f"must be a mapping, not {kind}: an aigo.yaml has version, project and models at its top level"
    message += "; is this the right file?"
    raise ConfigInvalid(source.file, unquoted([Problem(1, 1, "", message, source.file)]))


def _refuse_oversized(source: Source) -> None:
    """More models than the schema allows is refused before any per-model check runs, so that the
    answer comes at once (the checks are linear, but 10,000 models of them still take seconds)."""
    models = source.data.get("models") if isinstance(source.data, dict) else None
    limit = schema.schema()["properties"]["models"]["maxProperties"]
    if isinstance(models, dict) and len(models) > limit:
        line, col = source.marks.of_key(("models",))
        message = f"has {len(models)} entries; at most {limit} models are allowed in one file"
        raise ConfigInvalid(
            source.file, unquoted(source.problems + [Problem(line, col, "models", message, source.file)])
        )
    most = schema.schema()["$defs"]["model"]["properties"]["env"]["maxProperties"]
    crowded = [
        (alias, len(env))
        for alias, model in obj(models).items()
        if isinstance(env := obj(model).get("env"), dict) and len(env) > most
    ]
    if crowded:
        problems = []
        for alias, count in crowded:
            line, col = source.marks.of_key(("models", alias, "env"))
            message = f"has {count} variables; at most {most} are allowed for one engine"
            problems.append(Problem(line, col, f"models.{alias}.env", message, source.file))
        raise ConfigInvalid(source.file, unquoted(source.problems + problems))  # an alias may be a credential


def _validated_key(file_digest: str) -> str | None:
    try:
        digest = hashlib.sha256(file_digest.encode())
        for name in (schema.SCHEMA_FILE, *(f"vllm-v{r}.json" for r in known_releases())):
            digest.update((data_dir("schemas") / name).read_bytes())
        digest.update(Path(schema.__file__).read_bytes())  # how the schema is applied counts too
    except OSError:
        return None
    digest.update(__version__.encode())
    return digest.hexdigest()


def _remember_valid(key: str) -> None:
    folder = _cache_dir()
    if folder is None:
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / key).touch()
    except OSError:
        pass  # a cache that cannot be written only costs time
