"""Where a file deploys: this machine's Docker (the default) or a Kubernetes cluster (`platform:`).
Its own small module, so that choosing the platform loads nothing of the Kubernetes path."""

from __future__ import annotations

from collections.abc import Mapping

PLATFORMS = ("docker", "kubernetes")
DEFAULT_PLATFORM = "docker"


def platform_of(data: Mapping[str, object]) -> str:
    platform = data.get("platform", DEFAULT_PLATFORM)
    return platform if platform in PLATFORMS else DEFAULT_PLATFORM
