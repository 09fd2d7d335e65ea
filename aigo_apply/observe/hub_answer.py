"""What the Hugging Face Hub said about one download (repo, revision, file), as a typed value: the
commit and files it resolves to with their sizes and config.json, or why it could not say. Made by
app/planning.py through the Hub adapter; read by the planner (download actions) and the VRAM
estimate (a model not downloaded yet)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

HubKey = tuple[str, str, str | None]  # (repo, revision, file)


@dataclass(frozen=True)
class HubAnswer:
    commit: str | None = None
    bytes: int | None = None
    files: tuple[str, ...] = ()
    weights: int | None = None  # bytes of the weight files among `files`
    config: dict[str, Any] | None = None  # the repo's config.json, when it has one
    pin: str | None = None  # the commit aigo.lock records (apply --locked)
    error: str | None = None  # why the Hub could not say
    fix: str = ""
    access: bool = False  # an error no retry fixes (gated, missing, not in aigo.lock): it blocks the plan
    blocker: str = "hub.access"  # the blocker's id when `access`

    @property
    def known(self) -> bool:
        """The Hub answered with a commit and files (not an error, not nothing at all)."""
        return self.error is None and self.commit is not None
