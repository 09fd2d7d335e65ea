"""The image an engine (or the router) runs: which reference the file resolves to, whether the tag
is the built-in one, and what Docker has locally. The same `image` object appears in
`aigo-apply image inspect` and in the readiness report, its keys in snake_case like every other JSON
output (before format_version 1 they were imageReference, defaultTag, tagOverridden,
repositoryOverridden, repoDigests and sizeBytes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict

from aigo_apply.config.defaults import ROUTER_DEFAULT_TAG, ROUTER_IMAGE
from aigo_apply.config.document import Document, EngineImage, Router
from aigo_apply.config.engine_kinds import ENGINES
from aigo_apply.errors import UsageProblem
from aigo_apply.json_types import maybe_text

# engine -> (repository, built-in tag), from the engines' records; one without a built-in tag has the
# file name it. The router is no engine kind, but has an image object too.
BUILT_IN: dict[str, tuple[str, str | None]] = {
    **{name: (kind.image, kind.default_tag) for name, kind in ENGINES.items()},
    "router": (ROUTER_IMAGE, ROUTER_DEFAULT_TAG),
}


class ImageObject(TypedDict):
    """An engine's (or the router's) image as the file resolves it."""

    engine: str
    image_reference: str | None
    repository: str
    default_tag: str | None
    tag: str | None
    tag_overridden: bool
    repository_overridden: bool


class LocalImage(ImageObject):
    """The same, with what Docker has of it on this machine."""

    present: bool
    id: str | None
    repo_digests: list[str]
    created: str | None
    size_bytes: int | None


def image_reference(data: Document, engine: str) -> str | None:
    """'repository:tag' for an engine from a validated config; None when its tag is not given."""
    return image_object(data, engine)["image_reference"]


def image_object(data: Document, engine: str) -> ImageObject:
    """Pure: the image object for `engine` ('vllm' or 'router') from a validated config."""
    if engine not in BUILT_IN:
        raise UsageProblem(f"unknown engine {engine!r}; known here: {', '.join(BUILT_IN)}")
    section: EngineImage | Router = (
        data.get("router", {}) if engine == "router" else data.get("engines", {}).get(engine, {})
    )
    repo, tag = BUILT_IN[engine]
    chosen = section.get("image_tag", tag)
    return {
        "engine": engine,
        "image_reference": f"{section.get('image', repo)}:{chosen}" if chosen else None,
        "repository": section.get("image", repo),
        "default_tag": tag,
        "tag": chosen,
        "tag_overridden": tag is not None and "image_tag" in section and section["image_tag"] != tag,
        "repository_overridden": "image" in section and section["image"] != repo,
    }


def with_local(image: ImageObject, inspected: Mapping[str, object] | None) -> LocalImage:
    """Add what Docker has locally (from GET /images/{ref}/json, or None when absent)."""
    found = inspected or {}
    digests = found.get("RepoDigests")
    return {
        **image,
        "present": inspected is not None,
        "id": maybe_text(found.get("Id")),
        "repo_digests": [d for d in digests if isinstance(d, str)] if isinstance(digests, list) else [],
        "created": maybe_text(found.get("Created")),
        "size_bytes": size if type(size := found.get("Size")) is int else None,
    }


def render(image: LocalImage) -> str:
    default = image["default_tag"] or "(none built in: the file names the tag)"
    lines = [
        f"engine:          {image['engine']}",
        f"image_reference: {image['image_reference'] or '(no tag given)'}",
        f"default_tag:     {default}" + ("" if not image["tag_overridden"] else f"  (overridden: {image['tag']})"),
        f"tag_overridden:  {str(image['tag_overridden']).lower()}",
        f"present locally: {'yes' if image['present'] else 'no (apply pulls it; or aigo-apply image pull)'}",
    ]
    if image["present"]:
        lines.append(f"id:              {image['id']}")
        lines += [f"digest:          {d}" for d in image["repo_digests"]] or [
            "digest:          (none: built or imported locally)"
        ]
    return "\n".join(lines)
