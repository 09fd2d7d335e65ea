"""Where a model's files live on the host. A repo source maps to one folder per repo and revision
under the models directory; a path source is used as it is (relative to the config file)."""

from __future__ import annotations

from pathlib import Path


def repo_dir(models_dir: Path, repo: str, revision: str) -> Path:
    org, name = repo.split("/", 1)
    return models_dir / f"{org}--{name}" / revision.replace("/", "--")


def local_dir(base_dir: Path, path: str) -> Path:
    return (base_dir / Path(path).expanduser()).resolve()
