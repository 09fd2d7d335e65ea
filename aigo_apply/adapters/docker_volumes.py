"""The named volumes of the Docker adapter (a part of adapters/docker_engine.DockerRuntime, kept in a
module of its own): a volume a container of ours mounts is made first, with the project's volume labels
and, for the compile cache, the image whose compiled code it keeps (Docker would make it unlabelled);
the project's volumes are listed by those labels in one call; a volume is read and removed by name.
Pruning and destroy (platforms/docker/cache_volumes.py) remove only what observe/cache_volumes.py says is ours."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager

from aigo_apply.adapters.docker_sdk import DockerAPI
from aigo_apply.desired import labels
from aigo_apply.desired.engines.common import CACHE_DIR
from aigo_apply.desired.types import ContainerSpec
from aigo_apply.json_types import JsonObject, JsonValue

LIST_VOLUMES = ("/volumes", None)  # every volume; the label filter is applied here (one call, no SDK)


class DockerVolumes:
    """What DockerRuntime does with volumes, through its SDK client, its light reads and its one error
    mapping (DockerRuntime's `api`, `_get` and `_errors`)."""

    @property
    def api(self) -> DockerAPI:
        raise NotImplementedError

    def _errors(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def _get(self, path: str, params: Mapping[str, object] | None, sdk: Callable[[], JsonValue]) -> JsonValue:
        raise NotImplementedError

    def make_volumes(self, spec: ContainerSpec, project: str) -> None:
        """Each named volume `spec` mounts, made with our labels before the container is (a volume that
        exists already is left as it is)."""
        for mount in spec.mounts:
            if not mount.source.startswith("/"):  # a named volume (check_container allowed it)
                image = spec.image if mount.target == CACHE_DIR else None
                self.api.create_volume(name=mount.source, labels=labels.for_volume(project, image))

    def volume_labels(self, name: str) -> JsonObject | None:
        """The labels of the volume `name` ({} when it has none), or None when there is no such volume."""
        import docker.errors

        with self._errors():
            try:
                found = self.api.inspect_volume(name)
            except docker.errors.NotFound:
                return None
        marks = found.get("Labels") if isinstance(found, dict) else None
        return marks if isinstance(marks, dict) else {}

    def list_volumes(self, project: str) -> list[JsonObject]:
        """The volumes whose labels say aigo-apply made them for `project`, as Docker lists them: one
        GET over the bare socket, as the plan's reads (an apply that changed nothing imports no SDK)."""
        found = self._get(*LIST_VOLUMES, lambda: self.api.volumes())
        volumes = found.get("Volumes") if isinstance(found, dict) else None
        return [
            v
            for v in (volumes if isinstance(volumes, list) else [])
            if isinstance(v, dict)
            and isinstance(marks := v.get("Labels"), dict)
            and labels.is_ours(_texts(marks), project)
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


def _texts(marks: JsonObject) -> dict[str, str]:
    """The labels whose values are text (is_ours compares text: no other value could match)."""
    return {k: v for k, v in marks.items() if isinstance(v, str)}
