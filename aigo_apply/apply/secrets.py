"""Resolves secret references at apply time, on the host. Values never leave this module except
into a container's environment: they are not logged, stored, labelled or put in error messages."""

from __future__ import annotations

import os
from pathlib import Path

from aigo_apply.desired.types import ContainerSpec, SecretRef
from aigo_apply.errors import SecretUnavailable


def resolve(ref: SecretRef, where: str) -> str:
    if ref.kind == "from_env":
        value = os.environ.get(ref.target)
        if value is None:
            raise SecretUnavailable(
                f"{where}: the environment variable {ref.target} is not set; "
                f"export it before running aigo-apply (nothing was changed)"
            )
        return value
    path = Path(ref.target).expanduser()
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise SecretUnavailable(
            f"{where}: cannot read the secret file {path}: {exc.strerror or exc} (nothing was changed)"
        ) from None
    except UnicodeDecodeError:
        raise SecretUnavailable(f"{where}: the secret file {path} is not UTF-8 text (nothing was changed)") from None


def container_env(container: ContainerSpec, alias: str) -> dict[str, str]:
    """The container's environment with every reference replaced by its value."""
    return {
        name: resolve(value, f"models.{alias}.env.{name}") if isinstance(value, SecretRef) else value
        for name, value in container.env
    }
