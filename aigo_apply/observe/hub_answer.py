"""What the Hugging Face Hub said about one download (repo, revision, file), as a typed value: the
commit and files it resolves to with their sizes and config.json, or why it could not say. Made by
platforms/docker/planning.py through the Hub adapter; read by the planner (download actions) and the VRAM
estimate (a model not downloaded yet)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aigo_apply.json_types import JsonValue

# (repo, revision, file) for a model's download; (repo, revision, None, "adapter") for a LoRA adapter's
HubKey = tuple[str, str, str | None] | tuple[str, str, str | None, str]


def hub_key(need: Mapping[str, object]) -> HubKey:
    """The key of a download (desired/model_store.downloads) in what the Hub said."""
    file = need.get("file")
    base = (str(need["repo"]), str(need["revision"]), file if isinstance(file, str) else None)
    kind = str(need.get("kind", "model"))
    return base if kind == "model" else (*base, kind)


def key_kind(key: HubKey) -> str:
    """What a key's download is: "model" or "adapter"."""
    return key[3] if len(key) == 4 else "model"


@dataclass(frozen=True)
class HubAnswer:
    commit: str | None = None
    bytes: int | None = None
    files: tuple[str, ...] = ()
    weights: int | None = None  # bytes of the weight files among `files`
    config: JsonValue = None  # the repo's config.json (an adapter's adapter_config.json), if any
    pin: str | None = None  # the commit aigo.lock records (apply --locked)
    error: str | None = None  # why the Hub could not say
    fix: str = ""
    access: bool = False  # an error no retry fixes (gated, missing, not in aigo.lock): it blocks the plan
    blocker: str = "hub.access"  # the blocker's id when `access`

    @property
    def known(self) -> bool:
        """The Hub answered with a commit and files (not an error, not nothing at all)."""
        return self.error is None and self.commit is not None
