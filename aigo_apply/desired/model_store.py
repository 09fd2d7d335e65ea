"""Where a model's files live on the host, and which of a repo's files an engine needs.

A repo source maps to one folder per kind, repo and revision under the models directory
(`ORG--NAME/REVISION`, a LoRA adapter's below `adapters/`), named by a reversible escaping
(`store_name`), so two sources never share a folder; a path source is used as it is (relative to the
config file). A downloaded folder holds a marker file written only after every selected file arrived
and was verified: its presence is what "downloaded" means, so an interrupted download is never
mistaken for a complete one, and it records the source (kind, repo, revision, files), which is
compared with the wanted one before the folder counts. The marker's shape is here; it is read by
observe/markers.py. Pure: where a path source leads is looked up in the host's facts, gathered
before (config/path_facts.HostPaths, read by observe/host_paths.py).
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Literal, NotRequired, TypedDict, TypeVar

from aigo_apply.config.defaults import MAX_GGUF_PARTS
from aigo_apply.config.host_paths import UNRESOLVABLE_FIX, path_text_problem, short, unsafe_mount
from aigo_apply.config.path_facts import HostPaths
from aigo_apply.config.vllm_flags import DraftSettings
from aigo_apply.desired.spec import ModelSpec, SourceSpec
from aigo_apply.desired.types import HostContext
from aigo_apply.errors import UnsafeSetting, UnsupportedModel

MARKER = ".aigo-download.json"
MAX_MARKER_BYTES = 16 * 1024 * 1024  # a marker lists a repo's files: a few KiB
# Besides the weights: what vLLM, SGLang and transformers read to serve a model.
ENGINE_FILES = frozenset(
    {
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "tokenizer.model",
        "special_tokens_map.json",
        "added_tokens.json",
        "vocab.json",
        "vocab.txt",
        "merges.txt",
        "chat_template.json",
        "chat_template.jinja",
        "preprocessor_config.json",
        "processor_config.json",
        "tiktoken.model",
        "model.safetensors.index.json",
        "pytorch_model.bin.index.json",
        "params.json",
    }
)
ENGINE_SUFFIXES = (".jinja", ".tiktoken", ".py")  # chat templates, tiktoken vocabularies, trust_remote_code modules
# A LoRA adapter (kind "adapter"): what vLLM's LoRA loader reads, and the tokenizer files some carry.
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_FILES = (
    ENGINE_FILES
    - {"config.json", "generation_config.json", "params.json"}
    - {"model.safetensors.index.json", "pytorch_model.bin.index.json"}
) | {ADAPTER_CONFIG}
KINDS = ("model", "adapter")  # what a download is: a model's folder, or a LoRA adapter's
_P = TypeVar("_P", bound=PurePath)  # repo_dir lays out a real folder, or a pure path to compare with
_SPLIT_GGUF = re.compile(r"^(?P<stem>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf\Z")
# llama.cpp's gguf-split writes a few dozen parts for the largest models; a name claiming more (up to
# 99999) would make as many mounts and checks. Such a name, or one that is not part i of n with
# 1 <= i <= n, is taken as one plain file: only it is mounted, and nothing else is looked for.


ADAPTERS = "adapters"  # the store's folder of LoRA adapters: no repo's folder is named so (those hold "--")
_KEPT = frozenset(string.ascii_letters + string.digits + "._-")
MAX_NAME = 200  # bytes: a folder name, with room under 255 for the download's staging names (".NAME.COMMIT.partial")


def store_name(text: str) -> str:
    """`text` (a repo id or a revision) as one folder name, reversibly: `/` is `--`; a `-` beside another
    `-` or a `/`, a leading `.`, and every character but letters, digits, `.`, `_` and `-` are `%XX` (the
    UTF-8 bytes), so a lone `-` is a `-` and an even run of them is that many `/` halved. `Qwen/Qwen3-8B`
    stays `Qwen--Qwen3-8B` and `refs/pr/1` stays `refs--pr--1`, as the older layout named them, while
    `feature/x` (`feature--x`) and `feature--x` (`feature%2D%2Dx`) differ. A name over MAX_NAME bytes (or
    an empty one) keeps its start and ends in `%%` and a SHA-256 of the text: no escaped name holds `%%`."""
    out = []
    for i, char in enumerate(text):
        if char == "/":
            out.append("--")
        elif char in _KEPT and not (
            (char == "-" and (text[i - 1 : i] in ("-", "/") or text[i + 1 : i + 2] in ("-", "/")))
            or (char == "." and i == 0)
        ):
            out.append(char)
        else:
            out.append("".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass")))
    name = "".join(out)
    if 0 < len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{name[: MAX_NAME - 34]}%%{digest}"


def repo_dir(models_dir: _P, repo: str, revision: str, kind: str = "model") -> _P:
    """The folder of a download of `kind` ("model" or "adapter") of repo@revision: one folder per
    source, and never another's (store_name; an adapter's below ADAPTERS)."""
    base = models_dir / ADAPTERS if kind == "adapter" else models_dir
    return base / store_name(repo) / store_name(revision)


def store_depth(kind: str) -> int:
    """How many folders of a download's path the store lays out below its root (repo_dir)."""
    return 3 if kind == "adapter" else 2


def legacy_dir(need: Mapping[str, object]) -> str | None:
    """Where the older layout (before store_name: `ORG--NAME/REVISION` with `/` as `--`, adapters
    beside models) put the download `need` (from `downloads`), when that is not its folder now, or
    None. Used only when its marker records exactly `need`'s source: many sources shared such a folder."""
    dest = PurePath(str(need["dest"]))
    kind = kind_of(need)
    depth = store_depth(kind)
    if len(dest.parts) <= depth:
        return None
    store = dest.parents[depth - 1]
    if repo_dir(store, str(need["repo"]), str(need["revision"]), kind) != dest:
        return None  # not a folder the store lays out
    org, name = str(need["repo"]).split("/", 1)
    old = store / f"{org}--{name}" / str(need["revision"]).replace("/", "--")
    return str(old) if old != dest else None


def local_dir(base_dir: Path, path: str, host: HostContext, paths: HostPaths) -> Path:
    """A `source.path` as an absolute, resolved folder: relative to the config file's folder, `~`
    against the desired state's HostContext, looked up in the host's facts (`paths`). A path that
    cannot be followed (a symlink loop, a name too long, a folder that cannot be searched) is an
    UnsafeSetting that says why, never RuntimeError or OSError."""
    resolved = paths.real_of(base_dir / host.expand_home(path))
    if isinstance(resolved, str):
        raise UnsafeSetting(f"{short(path)!r} cannot be resolved: {resolved}; {UNRESOLVABLE_FIX}")
    return resolved


class Mounts:
    """One build's view of the host for model mounts: your home resolved and the protected folders
    (the same for every model), and each folder the file names looked up and judged once (models
    often share one, and a draft may be a model's own folder). Lives for one build only: the next
    plan gathers the host's facts again. `paths`: the host's facts for the build (its HostContext's
    with the file's added)."""

    def __init__(self, host: HostContext, paths: HostPaths, store: Path | None = None):
        self.host = host
        self.paths = paths
        self.home = paths.home_real
        self.mine = paths.mine(self.home)
        self.protected = host.protected(store)
        self.seen: dict[tuple[Path, str], tuple[Path | None, str | None]] = {}

    def check(self, base_dir: Path, path: str) -> tuple[Path | None, str | None]:
        """(the resolved folder, why it may not be mounted or None), or (None, why it cannot be resolved)."""
        key = (base_dir, path)
        if key not in self.seen:
            try:
                resolved = local_dir(base_dir, path, self.host, self.paths)
            except UnsafeSetting as exc:
                self.seen[key] = None, str(exc)
                return self.seen[key]
            why = unsafe_mount(resolved, self.home, self.protected, homes=self.paths.homes, mine=self.mine)
            text = path_text_problem(str(resolved))
            self.seen[key] = resolved, (why or "a path that " + str(text)) if why or text else None
        return self.seen[key]


def mountable(base_dir: Path, path: str, where: str, mounts: Mounts) -> Path:
    """`local_dir`, refused (UnsafeSetting, naming `where`) when it is not a path a model mount may
    take on this host: checked again here, with the host's own folders (its HostContext's state
    root, Hugging Face cache and model store), which validation knows only from the environment.
    `mounts`: the build's (model_store.Mounts)."""
    resolved, why = mounts.check(base_dir, path)
    if resolved is None:
        raise UnsafeSetting(f"{where}: {why}")
    if why:
        raise UnsafeSetting(
            f"{where}: {path!r} is {why} ({resolved}); engines get it mounted, "
            "so it must be the model's own folder or file: point it there"
        )
    return resolved


def classify(paths: list[str]) -> str:
    """'safetensors-repo' (config.json with safetensors or .bin weights), 'gguf', or 'unsupported'."""
    top = [p for p in paths if "/" not in p]
    if "config.json" in top and any(p.endswith((".safetensors", ".bin")) for p in top):
        return "safetensors-repo"
    if any(p.endswith(".gguf") for p in paths):
        return "gguf"
    return "unsupported"


def select_files(repo: str, paths: list[str], file: str | None = None, kind: str = "model") -> list[str]:
    """The files of a repo an engine needs. A GGUF `file`: that file (all parts of a split file).
    Else the top-level weights (the shards the index names, safetensors preferred over .bin), the
    config, tokenizer and chat template files. An adapter (`kind` "adapter"): select_adapter_files.
    Raises UnsupportedModel naming what was found."""
    if kind == "adapter":
        return select_adapter_files(repo, paths)
    if file is not None:
        split = _SPLIT_GGUF.match(file)
        wanted = [
            p
            for p in paths
            if p == file or (split and (part := _SPLIT_GGUF.match(p)) and part.group("stem") == split.group("stem"))
        ]
        if file not in paths:
            ggufs = sorted(p for p in paths if p.endswith(".gguf"))[:8]
            raise UnsupportedModel(
                f"{repo} has no file {file}"
                + (f"; its .gguf files: {', '.join(ggufs)}" if ggufs else "; it has no .gguf file at all")
            )
        return sorted(wanted)
    kind = classify(paths)
    if kind != "safetensors-repo":
        found = ", ".join(sorted(paths)[:8]) or "no files"
        hint = " (a GGUF repo: name the file with source.file and run it on llama.cpp)" if kind == "gguf" else ""
        raise UnsupportedModel(
            f"{repo} is not a model vLLM or SGLang can serve: it needs config.json and "
            f".safetensors (or .bin) weights at its top level; found {found}{hint}"
        )
    top = [p for p in paths if "/" not in p]
    weights = [p for p in top if p.endswith(".safetensors")] or [p for p in top if p.endswith(".bin")]
    index_name = (
        "model.safetensors.index.json" if weights[0].endswith(".safetensors") else "pytorch_model.bin.index.json"
    )
    if index_name in top:  # the index names the shards the engine loads (a consolidated copy is skipped)
        weights = [w for w in weights if not w.startswith("consolidated")]
    extras = [p for p in top if p in ENGINE_FILES or p.endswith(ENGINE_SUFFIXES)]
    return sorted(set(weights) | set(extras))


def select_adapter_files(repo: str, paths: list[str]) -> list[str]:
    """The files of a LoRA adapter's repo vLLM loads: adapter_config.json, the top-level weights
    (.safetensors, else .bin), and the tokenizer and chat template files it may carry. Raises
    UnsupportedModel naming what was found when it has no adapter_config.json or no weights."""
    top = [p for p in paths if "/" not in p]
    weights = [p for p in top if p.endswith(".safetensors")] or [p for p in top if p.endswith(".bin")]
    if ADAPTER_CONFIG not in top or not weights:
        found = ", ".join(sorted(paths)[:8]) or "no files"
        raise UnsupportedModel(
            f"{repo} is not a LoRA adapter vLLM can load: it needs adapter_config.json and .safetensors "
            f"(or .bin) weights at its top level; found {found}"
        )
    extras = [p for p in top if p in ADAPTER_FILES or p.endswith((".jinja", ".tiktoken"))]
    return sorted(set(weights) | set(extras))


def gguf_parts(name: str) -> list[str]:
    """The file names of a split GGUF file (`x-00001-of-00003.gguf` -> all three), or the name alone
    (also for a name that is not part i of n, or claims more than MAX_GGUF_PARTS parts)."""
    split = _SPLIT_GGUF.match(name)
    if split is None or not 1 <= int(split.group("index")) <= int(split.group("count")) <= MAX_GGUF_PARTS:
        return [name]
    count = int(split.group("count"))
    return [f"{split.group('stem')}-{i:05d}-of-{count:05d}.gguf" for i in range(1, count + 1)]


def marker_shape(data: object) -> dict[str, object] | None:
    """`data` as a marker: `files` maps names to sizes (whole non-negative numbers); repo, revision,
    commit and downloaded_at are text (a commit 40 hex digits), sha256 maps names to digests,
    complete_repo is a boolean. Any other shape is no marker (None); unknown keys are dropped."""
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
        return None
    files = data["files"]
    if not all(isinstance(k, str) and type(v) is int and v >= 0 for k, v in files.items()):
        return None
    out: dict[str, object] = {"files": dict(files)}
    for key in ("repo", "revision", "downloaded_at", "kind"):
        if isinstance(data.get(key), str):
            out[key] = data[key]
    if isinstance(data.get("commit"), str) and is_commit(data["commit"]):
        out["commit"] = data["commit"]
    digests = data.get("sha256")
    if isinstance(digests, dict):
        out["sha256"] = {k: v for k, v in digests.items() if isinstance(k, str) and isinstance(v, str)}
    out["complete_repo"] = data.get("complete_repo") is True
    return out


def is_commit(revision: str) -> bool:
    """A revision that names one commit (40 hex digits): it never moves, unlike a branch or tag."""
    return re.fullmatch(r"[0-9a-f]{40}", revision) is not None


def source_of(marker: Mapping[str, object] | None) -> tuple[str, str, str] | None:
    """The source a marker records, (kind, repo, revision), or None when it records none (a marker
    the tool wrote always does; "model" where it names no kind, as the tool wrote a model's)."""
    repo, revision = (marker.get("repo"), marker.get("revision")) if marker else (None, None)
    if not marker or not isinstance(repo, str) or not isinstance(revision, str):
        return None
    return str(marker.get("kind", "model")), repo, revision


def wanted_source(need: Mapping[str, object]) -> tuple[str, str, str]:
    """(kind, repo, revision) of a download (from `downloads`, or a download step's spec)."""
    return kind_of(need), str(need["repo"]), str(need.get("revision", "main"))


def source_text(source: tuple[str, str, str]) -> str:
    """How plans and errors name a source: repo@revision, "LoRA adapter repo@revision" for an adapter."""
    kind, repo, revision = source
    return {"model": "", "adapter": "LoRA adapter "}.get(kind, f"{kind} ") + f"{repo}@{revision}"


def foreign_source(marker: Mapping[str, object] | None, need: Mapping[str, object]) -> str | None:
    """How the source `marker` records is named (source_text), when it is another than `need`'s: the
    folder must not be used for `need`, nor written over. None when it records `need`'s or none."""
    recorded = source_of(marker)
    return source_text(recorded) if recorded is not None and recorded != wanted_source(need) else None


def is_complete(marker: Mapping[str, object] | None, need: Mapping[str, object], commit: str | None = None) -> bool:
    """Whether a folder's marker says it holds what the download `need` (from `downloads`: kind, repo,
    revision, file) needs: the marker records exactly that source (a model's selection is not an
    adapter's, nor another revision's), with `need`'s GGUF file or the whole selection, and, when
    `commit` is given (aigo.lock's pin), at that commit."""
    files = marker.get("files") if marker else None
    if not marker or not isinstance(files, dict) or source_of(marker) != wanted_source(need):
        return False
    if commit is not None and marker.get("commit") != commit:
        return False
    file = need.get("file")
    return file in files if file is not None else bool(marker.get("complete_repo"))


def marker_for(markers: Mapping[str, Mapping[str, object]], need: Mapping[str, object]) -> Mapping[str, object]:
    """The marker of `need`'s folder when it records `need`'s source, else {} (nothing of it is here)."""
    marker = markers.get(str(need["dest"])) or {}
    return marker if source_of(marker) == wanted_source(need) else {}


class Download(TypedDict):
    """One Hub download the models' specs name (`downloads`, which says what each key holds)."""

    repo: str
    revision: str
    file: str | None
    dest: str
    models: list[str]
    kind: NotRequired[Literal["adapter"]]
    adapters: NotRequired[list[str]]


def downloads(specs: Mapping[str, ModelSpec]) -> list[Download]:
    """Every Hub download the models' specs name (weights, speculative draft models and LoRA
    adapters given by repo), one per repo, revision, file and folder, with the aliases of the models
    that need it (an adapter's: the models it is served with, so a model's plan, lock entry and
    `models pull` name it like the model's own files). An adapter's has `kind` "adapter" and an
    `adapters` list of its aliases; a model's has no `kind` (it is "model"). A model and an adapter of
    one repo@revision are two downloads, in two folders (repo_dir). Pure."""
    found: dict[tuple[str, str, str | None, str, bool], Download] = {}
    for alias, spec in sorted(specs.items()):
        sources: list[tuple[SourceSpec | DraftSettings, str | None, str | None]]
        sources = [(spec["source"], spec.get("model_dir"), None)]
        draft = spec.get("vllm", {}).get("speculative", {}).get("draft")
        if draft:
            sources.append((draft, draft.get("model_dir"), None))
        for name, adapter in sorted((spec.get("adapters") or {}).items()):
            sources.append((adapter["source"], adapter.get("adapter_dir"), name))
        for source, dest, adapter_alias in sources:
            if "repo" not in source or not dest:
                continue
            file = source.get("file")  # a model's GGUF file (a draft or an adapter has none)
            named = file if isinstance(file, str) else None
            key = (source["repo"], source.get("revision", "main"), named, dest, adapter_alias is not None)
            entry = found.setdefault(
                key, {"repo": key[0], "revision": key[1], "file": key[2], "dest": dest, "models": []}
            )
            if adapter_alias is None or alias not in entry["models"]:
                entry["models"].append(alias)
            if adapter_alias is not None:
                entry["kind"] = "adapter"
                entry.setdefault("adapters", []).append(adapter_alias)
    return list(found.values())


def kind_of(need: Mapping[str, object]) -> str:
    """What a download (from `downloads`) is: "model" or "adapter"."""
    return str(need.get("kind", "model"))


ADAPTER_LABEL = "adapter:"  # before a LoRA adapter's label: a model of the same repo@revision is another download


def label(need: Mapping[str, object]) -> str:
    """repo@revision (and /file for a GGUF model), `adapter:repo@revision` for a LoRA adapter's: how
    plan addresses, `models pull`, the journal and aigo.lock's keys name a download. A model and an
    adapter of one repo@revision are two downloads (two folders, two commits): never one name."""
    return (ADAPTER_LABEL if kind_of(need) == "adapter" else "") + repo_text(need)


def repo_text(need: Mapping[str, object]) -> str:
    """repo@revision (and /file for a GGUF model): a download in a sentence that says what kind it is."""
    return f"{need['repo']}@{need['revision']}" + (f"/{need['file']}" if need.get("file") else "")
