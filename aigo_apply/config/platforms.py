"""Where a file deploys: this machine's Docker (the default) or a Kubernetes cluster (`platform:`).
Its own small module, so that choosing the platform loads nothing of the Kubernetes path."""

from __future__ import annotations

from collections.abc import Mapping

from aigo_apply.config.document import Platform

PLATFORMS: tuple[Platform, ...] = ("docker", "kubernetes")
DEFAULT_PLATFORM: Platform = "docker"


def platform_of(data: Mapping[str, object]) -> Platform:
    """`platform:` as written when it names one of PLATFORMS, else the default."""
    written = data.get("platform", DEFAULT_PLATFORM)
    return next((platform for platform in PLATFORMS if platform == written), DEFAULT_PLATFORM)
