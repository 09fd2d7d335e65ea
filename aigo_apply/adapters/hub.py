"""The Hugging Face adapter: the one module that talks to the Hub (through huggingface_hub, at
HF_ENDPOINT when set). It resolves a revision to a commit, lists the files an engine needs with
their sizes, and downloads them into the model store on the host, resumably, verifying every
large file's SHA-256 against the Hub's record before it marks the folder complete.

The token comes from HF_TOKEN or huggingface_hub's token file (`hf auth login`), read by
adapters/hub_env.py (bounded, never waiting) and handed to huggingface_hub explicitly; it is used here
on the host only, and is never printed, stored or passed to a container. What huggingface_hub parses
from the environment is checked there first too. Every Hub error becomes an AigoError that says what
to do.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import stat
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from aigo_apply import safe_read, safe_write
from aigo_apply.adapters import hub_env
from aigo_apply.adapters.urls import shown_url
from aigo_apply.desired.model_store import MARKER, foreign_source, select_files, source_of, store_depth
from aigo_apply.errors import AigoError, HubError
from aigo_apply.json_types import JsonValue
from aigo_apply.observe.markers import read_marker, store_link

INFO_TIMEOUT = 10.0


@dataclass(frozen=True)
class Remote:
    """A repo revision as the Hub describes it: the commit and the files an engine needs."""

    repo: str
    revision: str
    commit: str
    files: dict[str, int]  # path -> bytes, only the selected files
    sha256: dict[str, str]  # path -> SHA-256 of LFS files (the weights)
    config: JsonValue = None  # config.json as parsed, when asked for (the VRAM estimate reads it)

    @property
    def bytes(self) -> int:
        return sum(self.files.values())


def offline() -> bool:
    """HF_HUB_OFFLINE as huggingface_hub reads it: then the Hub is not asked at all."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


token = hub_env.token  # this host's token, read bounded; pass it on as `token() or False`
_endpoint = hub_env.endpoint  # HF_ENDPOINT, checked


def remote(
    repo: str,
    revision: str,
    file: str | None = None,
    timeout: float = INFO_TIMEOUT,
    with_config: bool = False,
    kind: str = "model",
) -> Remote:
    """Resolve `revision` and list the files to download, with sizes (and, with `with_config`, the
    content of config.json, or of adapter_config.json for a LoRA adapter, whose rank sizes its
    engine): a model's, or a LoRA adapter's with `kind` "adapter" (model_store.select_files).
    Raises HubError."""
    hub_env.prepared()  # before huggingface_hub parses the environment
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile

    with _errors(repo, revision):
        api = HfApi(endpoint=_endpoint(), token=token() or False)
        info = api.repo_info(repo, revision=revision, timeout=timeout)
        entries = [f for f in api.list_repo_tree(repo, revision=info.sha, recursive=True) if isinstance(f, RepoFile)]
    sizes = {f.path: int(f.size) for f in entries}
    wanted = select_files(repo, sorted(sizes), file, kind)
    sha = {f.path: f.lfs.sha256 for f in entries if f.lfs is not None and f.path in wanted}
    config: JsonValue = None
    config_name = "adapter_config.json" if kind == "adapter" else "config.json"
    if with_config and config_name in wanted:
        from huggingface_hub import get_session
        from huggingface_hub.utils._headers import build_hf_headers

        with _errors(repo, revision):
            reply = get_session().get(
                f"{_endpoint()}/{repo}/resolve/{info.sha}/{config_name}",
                timeout=timeout,
                headers=build_hf_headers(token=token() or False),
                follow_redirects=True,
            )
            reply.raise_for_status()
            try:
                config = json.loads(reply.content)
            except ValueError:
                config = None
    return Remote(repo, revision, str(info.sha), {p: sizes[p] for p in wanted}, sha, config)


def resolve(repo: str, revision: str, timeout: float = INFO_TIMEOUT) -> str:
    """The commit `revision` names on the Hub now."""
    hub_env.prepared()  # before huggingface_hub parses the environment
    from huggingface_hub import HfApi

    with _errors(repo, revision):
        return str(
            HfApi(endpoint=_endpoint(), token=token() or False).repo_info(repo, revision=revision, timeout=timeout).sha
        )


def download(
    repo: str,
    revision: str,
    dest: Path,
    file: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    pin: str | None = None,
    kind: str = "model",
) -> dict[str, object]:
    """Download what the engine needs of repo@revision (a model's files, or a LoRA adapter's with
    `kind` "adapter"; at commit `pin` when given: aigo.lock) into `dest` and mark it complete. Resumes a
    partial download (huggingface_hub keeps .incomplete files under .cache/). When `dest` holds another
    commit, the new one is assembled beside it (in `.NAME.COMMIT.partial`: no store folder's name
    starts with a dot) and swapped in whole, so no folder ever mixes two commits. A `dest` whose marker
    records another source is refused: it is never written over."""
    hub_env.prepared()  # before huggingface_hub parses the environment
    from huggingface_hub import snapshot_download

    previous = read_marker(dest) or {}
    other = foreign_source(previous, {"repo": repo, "revision": revision, "kind": kind})
    if other:  # before the Hub is asked anything
        raise HubError(
            f"{repo}@{revision}: not downloaded, because {dest} holds {other} by its download marker (an older "
            "aigo-apply gave both one folder); it is never written over: move it away or remove it"
        )
    found = remote(repo, pin or revision, file, kind=kind)
    if source_of(previous) is None:  # a marker that records no source: none of it counts
        previous = {}
    target = dest
    if previous.get("commit") and previous["commit"] != found.commit:
        target = dest.with_name(f".{dest.name}.{found.commit[:12]}.partial")
        previous = {}
    old = dest.with_name(f".{dest.name}.old")
    swapped = {target, old} if target != dest else set()
    for folder in {dest} | swapped:  # checked again where it is written: the plan's check came before
        # the folder written into; the others are only renamed
        why = store_link(folder, inside=folder == target, depth=store_depth(kind))
        if why:
            raise HubError(
                f"{repo}@{revision}: not downloaded, because {why}; aigo-apply downloads only into real folders "
                "below defaults.models_dir: remove the link"
            )
    target.mkdir(parents=True, exist_ok=True)
    bar = _Progress(found.bytes, progress)
    with _errors(repo, revision):
        snapshot_download(
            repo,
            revision=found.commit,
            local_dir=str(target),
            allow_patterns=sorted(found.files),
            token=token() or False,
            endpoint=_endpoint(),
            cache_dir=str(target / ".cache" / "huggingface" / "hub"),  # never $HF_HOME's cache: nothing to copy from
            tqdm_class=bar.factory,
        )
    marker = _verify_and_mark(repo, revision, target, found, file, previous, kind)
    if target != dest:
        shutil.rmtree(old, ignore_errors=True)
        dest.rename(old)
        target.rename(dest)
        shutil.rmtree(old, ignore_errors=True)
    return marker


def _verify_and_mark(
    repo: str,
    revision: str,
    dest: Path,
    found: Remote,
    file: str | None,
    previous: Mapping[str, object],
    kind: str = "model",
) -> dict[str, object]:
    for path, size in found.files.items():  # every file arrived whole, and the weights are the Hub's
        actual = (dest / path).stat().st_size if (dest / path).is_file() else None
        if actual != size:
            raise HubError(
                f"{repo}@{revision}: {path} has {actual} bytes after the download, the Hub says {size}; "
                "run the command again to fetch it anew"
            )
    same = previous.get("commit") == found.commit
    digests, sizes = previous.get("sha256", {}), previous.get("files", {})  # marker_shape: each a mapping
    verified = dict(digests) if same and isinstance(digests, dict) else {}
    for path, digest in found.sha256.items():
        if verified.get(path) != digest:
            if _sha256(dest / path) != digest:
                (dest / path).unlink()
                raise HubError(
                    f"{repo}@{revision}: {path} does not match the Hub's SHA-256 (a damaged download); "
                    "it was deleted: run the command again"
                )
            verified[path] = digest
    files = dict(sizes) if same and isinstance(sizes, dict) else {}  # other GGUF files
    files.update(found.files)
    marker: dict[str, object] = {
        "repo": repo,
        "revision": revision,
        "commit": found.commit,
        "files": files,
        "sha256": verified,
        "complete_repo": file is None or bool(previous.get("complete_repo") and previous.get("commit") == found.commit),
        "downloaded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "kind": kind,  # with repo and revision: the source, checked before the folder is used
    }
    text = json.dumps(marker, indent=1) + "\n"  # the one safe way: never through a link the download left
    safe_write.write(dest / MARKER, text, expect=safe_write.ANY, new_mode=0o644, what="download marker")
    return marker


def _sha256(path: Path) -> str:
    """The digest of a file the download wrote, whole (weights are GiBs), opened by the one bounded
    reader's rules (safe_read.judged): a regular file, never waiting (the folder written into was
    checked for links and special files before the download: observe/markers.store_link)."""
    digest = hashlib.sha256()

    def regular(info: os.stat_result) -> None:
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, f"{path} is {safe_read.file_kind(info.st_mode)}, not a regular file")

    with safe_read.judged(path, True, regular) as f:
        for block in iter(lambda: f.read(8 * 1024 * 1024), b""):
            digest.update(block)
    return digest.hexdigest()


if TYPE_CHECKING:
    from tqdm.asyncio import tqdm_asyncio

    # the class snapshot_download takes (tqdm.auto's, outside notebooks): generic in its stubs only
    _ProgressBase = tqdm_asyncio[object]


class _Progress:
    """Collects the byte count of huggingface_hub's snapshot_download: `factory` is a silent tqdm
    class (tqdm's whole interface, no output) that forwards the "Reconstructing" bar's bytes."""

    def __init__(self, total: int, sink: Callable[[int, int], None] | None):

        if not TYPE_CHECKING:  # imported here (start-up time); the checker reads the alias at the top
            from tqdm.asyncio import tqdm_asyncio as _ProgressBase

        self.total_bytes, self.done, self.sink, self.lock = total, 0, sink, threading.Lock()
        owner = self

        class Bar(_ProgressBase):
            def __init__(self, *args: Any, **kwargs: Any) -> None:  # tqdm's own: whatever huggingface_hub passes
                self._counts = str(kwargs.get("desc", "")).startswith("Reconstructing")
                kwargs["disable"] = True
                super().__init__(*args, **kwargs)

            def update(self, n: float | None = 1) -> bool | None:
                if self._counts and owner.sink is not None and n:
                    with owner.lock:
                        owner.done += int(n)
                        owner.sink(owner.done, owner.total_bytes)
                shown: bool | None = super().update(n)
                return shown

        self.factory = Bar


class _errors:
    """Turns huggingface_hub's exceptions into HubError with the step that fixes them."""

    def __init__(self, repo: str, revision: str):
        self.repo, self.revision = repo, revision

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        if exc is None or isinstance(exc, AigoError):
            return False
        from huggingface_hub.errors import (
            GatedRepoError,
            HfHubHTTPError,
            LocalEntryNotFoundError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )

        where = f"{self.repo}@{self.revision}"
        page = f"{_endpoint()}/{self.repo}"
        if isinstance(exc, GatedRepoError):
            raise HubError(
                f"{where}: the repo is gated and this machine's token has no access",
                f"request access on {page}, then make a token available on this host: export "
                "HF_TOKEN=hf_... or `hf auth login` (the token stays on the host: containers never get it)",
                access=True,
            ) from None
        if isinstance(exc, RevisionNotFoundError):
            raise HubError(
                f"{where}: the revision does not exist",
                f"check source.revision (a branch, tag or commit of {page})",
                access=True,
            ) from None
        if isinstance(exc, RepositoryNotFoundError):
            raise HubError(
                f"{where}: no such repo, or it is private and this machine's token cannot see it",
                "check source.repo, or export HF_TOKEN=hf_... with access to it",
                access=True,
            ) from None
        if isinstance(exc, HfHubHTTPError):
            status = exc.response.status_code if exc.response is not None else "?"
            raise HubError(f"{where}: the Hub answered HTTP {status}", "try again later") from None
        if isinstance(exc, (LocalEntryNotFoundError, OSError)) or "httpx" in type(exc).__module__:
            raise HubError(
                f"{where}: cannot reach the Hub at {_endpoint()} ({type(exc).__name__})",
                "check the network (or HF_ENDPOINT), then run the command again: a partial download resumes",
            ) from None
        if isinstance(exc, (ValueError, ImportError)):  # the client refused a setting (UnicodeError: a host name)
            detail = shown_url(str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__)
            raise HubError(
                f"{where}: the Hub's client cannot use this host's settings ({type(exc).__name__}: {detail})",
                "check HF_ENDPOINT and the proxy variables (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, NO_PROXY)",
            ) from None
        return False


SMALL_FILE_BYTES = 16 * 1024 * 1024  # a config, tokenizer config or chat template: KiBs (a large one a few MiB)


def small_files(
    repo: str, revision: str, names: tuple[str, ...], timeout: float = INFO_TIMEOUT
) -> tuple[Remote, dict[str, bytes]]:
    """What the Hub lists for repo@revision (remote(): the commit, the files an engine needs and their
    sizes), and the contents of those of `names` it has at its top level, each at most
    SMALL_FILE_BYTES by the Hub's listing and by what arrives (`aigo-apply add` reads a model's own
    metadata this way: never a weight file). Asked with the token plan uses. Raises HubError."""
    found = remote(repo, revision, timeout=timeout)
    from huggingface_hub import get_session
    from huggingface_hub.utils._headers import build_hf_headers

    out: dict[str, bytes] = {}
    for name in names:
        size = found.files.get(name)
        if size is None or "/" in name or size > SMALL_FILE_BYTES:
            continue
        with (
            _errors(repo, revision),
            get_session().stream(
                "GET",
                f"{_endpoint()}/{repo}/resolve/{found.commit}/{name}",
                timeout=timeout,
                headers=build_hf_headers(token=token() or False),
                follow_redirects=True,
            ) as reply,
        ):
            reply.raise_for_status()
            data = b""
            for chunk in reply.iter_bytes():  # what arrives is bounded too, whatever the listing said
                data += chunk
                if len(data) > SMALL_FILE_BYTES:
                    break
            if len(data) <= SMALL_FILE_BYTES:
                out[name] = data
    return found, out
