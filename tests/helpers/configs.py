"""Writing aigo.yaml files for a test, and the host context the CLI would read."""

from __future__ import annotations

import socket
import textwrap
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def router_yaml(port: int | None = None) -> str:
    """A router section using the local image with Debian's haproxy, on a free port."""
    return f"router: {{image: aigo-haproxy, image_tag: bookworm, port: {port or free_port()}}}"


def write_config(tmp_path: Path, text: str, name: str = "aigo.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def host_context(models_dir: Path | None = None, **changes):
    """This process's host context (as the CLI reads it), with the model store moved where a test
    wants it (a path that need not exist: desired state reads nothing from the machine) and any
    other field changed (`home=`...): the host's facts are gathered again for its home and store."""
    from dataclasses import replace

    from aigo_apply.observe.host_paths import host_facts
    from aigo_apply.platforms.host_context import current_host

    host = current_host()
    if models_dir is None and not changes:
        return host
    host = replace(host, **({"models_dir": models_dir} if models_dir is not None else {}), **changes)
    return replace(host, paths=host_facts(host.home, host.models_dir))


def regathered(config):
    """`config` with what the host says of its paths read again now (a test that changes a folder
    after the file was loaded: the desired state judges the facts it is given)."""
    from dataclasses import replace

    from aigo_apply.observe.host_paths import file_facts

    return replace(config, paths=file_facts(config.file, config.data))


def with_paths(host, *paths: Path):
    """`host`'s facts with each of `paths` (absolute) resolved now, for a test that calls the
    desired state's helpers directly."""
    from dataclasses import replace

    from aigo_apply.observe.host_paths import resolve_or_why

    return replace(host.paths, real={**host.paths.real, **{p: resolve_or_why(p) for p in paths}})


def model_folder(folder: Path) -> Path:
    """A local model folder as plan requires one: it exists and holds a config.json (the stub
    engine loads nothing from it)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text('{"model_type": "llama"}\n', encoding="utf-8")
    return folder
