"""The named volumes of the Docker adapter (a part of adapters/docker_engine.DockerRuntime, kept in a
module of its own): a volume a container of ours mounts is made first, with the project's volume labels
and, for the compile cache, the image whose compiled code it keeps (Docker would make it unlabelled);
the project's volumes are listed by those labels in one call; a volume is read and removed by name.
Pruning and destroy (platforms/docker/cache_volumes.py) remove only what observe/cache_volumes.py says is ours."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from aigo_apply.desired import labels
from aigo_apply.desired.engines.common import CACHE_DIR
from aigo_apply.desired.types import ContainerSpec

LIST_VOLUMES = ("/volumes", None)  # every volume; the label filter is applied here (one call, no SDK)


class DockerVolumes:
    """What DockerRuntime does with volumes, through its SDK client, its light reads and its one error
    mapping (DockerRuntime's `api`, `_get` and `_errors`)."""

    api: Any

    def _errors(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def _get(self, path: str, params: dict[str, Any] | None, sdk: Callable[[], Any]) -> Any:
        raise NotImplementedError

    def make_volumes(self, spec: ContainerSpec, project: str) -> None:
        """Each named volume `spec` mounts, made with our labels before the container is (a volume that
        exists already is left as it is)."""
        for mount in spec.mounts:
            if not mount.source.startswith("/"):  # a named volume (check_container allowed it)
                image = spec.image if mount.target == CACHE_DIR else None
                self.api.create_volume(name=mount.source, labels=labels.for_volume(project, image))

    def volume_labels(self, name: str) -> dict[str, Any] | None:
        """The labels of the volume `name` ({} when it has none), or None when there is no such volume."""
        import docker.errors

        with self._errors():
            try:
                found = self.api.inspect_volume(name)
            except docker.errors.NotFound:
                return None
        return found.get("Labels") or {} if isinstance(found, dict) else {}

    def list_volumes(self, project: str) -> list[dict[str, Any]]:
        """The volumes whose labels say aigo-apply made them for `project`, as Docker lists them: one
        GET over the bare socket, as the plan's reads (an apply that changed nothing imports no SDK)."""
        found = self._get(*LIST_VOLUMES, lambda: self.api.volumes())
        volumes = found.get("Volumes") if isinstance(found, dict) else None
        return [
            v
            for v in (volumes if isinstance(volumes, list) else [])
            if isinstance(v, dict) and isinstance(v.get("Labels"), dict) and labels.is_ours(v["Labels"], project)
        ]

    def remove_volume(self, name: str) -> bool:
        """Remove a named volume; False when there is none (Docker refuses one a container uses)."""
        import docker.errors

        try:
            self.api.remove_volume(name, force=True)
        except docker.errors.NotFound:
            return False
        except Exception:
            with self._errors():
                raise
        return True
