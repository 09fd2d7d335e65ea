"""The payload of each action kind (the plan JSON's `spec`): a model's or the router's canonical spec, one
download, or aigo.lock's image put back. PAYLOADS says which types each kind takes; plan/types.Action
checks it when an action is made, and a saved plan's payload is read back by it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aigo_apply.desired.model_store import KINDS as DOWNLOAD_KINDS
from aigo_apply.desired.spec import ModelSpec, RouterSpec
from aigo_apply.errors import PlanFileError
from aigo_apply.json_types import JsonObject
from aigo_apply.plan.lockfile import LockRestore
from aigo_apply.plan.plan_file import ActionKind


@dataclass(frozen=True)
class DownloadSpec:
    """A download action's payload: one model (or LoRA adapter: `kind` "adapter") folder from the
    Hub, and the models that need it. A model's spec has no `kind` key (saved plans as before)."""

    repo: str
    revision: str
    file: str | None
    dest: str
    models: tuple[str, ...]
    commit: str | None = None  # what the Hub resolved the revision to
    bytes: int | None = None
    pin: str | None = None  # the commit aigo.lock records (apply --locked)
    kind: str = "model"  # "model" | "adapter" (desired/model_store.KINDS)

    def to_spec(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "repo": self.repo,
            "revision": self.revision,
            "file": self.file,
            "dest": self.dest,
            "models": list(self.models),
        }
        out.update(
            {k: v for k, v in (("commit", self.commit), ("bytes", self.bytes), ("pin", self.pin)) if v is not None}
        )
        if self.kind != "model":
            out["kind"] = self.kind
        return out

    @classmethod
    def from_spec(cls, data: Any) -> DownloadSpec:
        """Read back from a plan file; its values are checked again before the download runs
        (platforms/docker/fetch_steps.check_download), here only their types."""
        strings = ("repo", "revision", "dest")
        if (
            not isinstance(data, dict)
            or not all(isinstance(data.get(k), str) for k in strings)
            or not all(isinstance(data.get(k), (str, type(None))) for k in ("file", "commit", "pin"))
            or not (data.get("bytes") is None or type(data["bytes"]) is int)  # a bool is no byte count
            or not isinstance(data.get("models"), list)
            or not all(isinstance(m, str) for m in data["models"])
            or data.get("kind", "model") not in DOWNLOAD_KINDS
        ):
            raise PlanFileError("a download's spec in the plan file is damaged or edited; make a new plan")
        return cls(
            data["repo"],
            data["revision"],
            data.get("file"),
            data["dest"],
            tuple(data["models"]),
            data.get("commit"),
            data.get("bytes"),
            data.get("pin"),
            str(data.get("kind", "model")),
        )


class _SpecValues:
    """A spec payload is equal to another of equal values, whichever of the three it is: a plan read back
    from its file (SavedSpec) is the plan that was saved (ModelPayload, RouterPayload)."""

    values: Mapping[str, object]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _SpecValues) and dict(self.values) == dict(other.values)


@dataclass(frozen=True, eq=False)
class ModelPayload(_SpecValues):
    """The payload of a model's create, recreate, start and noop: its desired canonical spec (secrets as
    references), what its container is made from."""

    values: ModelSpec

    def to_spec(self) -> ModelSpec:
        return self.values


@dataclass(frozen=True, eq=False)
class RouterPayload(_SpecValues):
    """The payload of the router's create, recreate, noop and reload: its desired canonical spec."""

    values: RouterSpec

    def to_spec(self) -> RouterSpec:
        return self.values


@dataclass(frozen=True, eq=False)
class SavedSpec(_SpecValues):
    """A model's or the router's spec read back from a plan file (check_shape made it an object):
    apply compares the plan made now with the saved one, so no value of it is acted on, and it
    stays outside data (no ModelSpec or RouterSpec is claimed of it)."""

    values: JsonObject

    def to_spec(self) -> JsonObject:
        return self.values

    @classmethod
    def from_spec(cls, data: object) -> SavedSpec:
        if not isinstance(data, dict):
            raise PlanFileError(DAMAGED)
        return cls(data)


SpecPayload = ModelPayload | RouterPayload | SavedSpec
Payload = SpecPayload | DownloadSpec | LockRestore
SPEC_PAYLOADS = (ModelPayload, RouterPayload, SavedSpec)
# The payload types each kind takes (the JSON has it as the action's `spec`; () where a kind has none), the
# one a saved plan's is read as, and whether one must be there. Action checks it when made; _action_from_dict
# reads a saved one by it.
PAYLOADS: dict[ActionKind, tuple[tuple[type[Payload], ...], type[Payload] | None, bool]] = {
    "pull": ((LockRestore,), LockRestore, False),  # apply --locked: aigo.lock's image put back under its tag
    "download": ((DownloadSpec,), DownloadSpec, True),
    "create": (SPEC_PAYLOADS, SavedSpec, False),  # a model's or the router's desired canonical spec
    "recreate": (SPEC_PAYLOADS, SavedSpec, False),
    "start": (SPEC_PAYLOADS, SavedSpec, False),
    "noop": (SPEC_PAYLOADS, SavedSpec, False),
    "reload_router": (SPEC_PAYLOADS, SavedSpec, False),
    "remove": ((), None, False),
}
DAMAGED = "an action in the plan file is damaged or edited by hand; make a new one with `aigo-apply plan --out`"
