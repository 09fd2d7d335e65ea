"""`aigo-apply add SOURCE`: read a model's own files and add the entry they call for to the config
file. The files: config.json, tokenizer_config.json and its chat template (or chat_template.jinja /
chat_template.json), generation_config.json, from a local folder (each read as the VRAM estimate
reads a model folder's files: observe/model_files.py) or from the Hub (only these small files, with
the token `plan` uses: adapters/hub.small_files). What they say (observe/chat_format.py) and where the
model fits beside the file's models on this machine's GPUs (NVML and the planner's GPU ledger:
plan/fit.py) make the proposal (plan/model_proposal.py); it is written with a comment on each choice
saying why, by import --write's editor (edit/portable.with_entry: every other line of the file kept as
written), and only when the file with it validates (edit/config_write.py)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from aigo_apply.adapters import hub
from aigo_apply.adapters.host import nvml_facts
from aigo_apply.config.load import Config
from aigo_apply.config.names import ALIAS_RE
from aigo_apply.config.platforms import platform_of
from aigo_apply.config.vllm_facts import config_release
from aigo_apply.edit.add_entry import entry_lines, insert_entry
from aigo_apply.edit.portable import alias_clash
from aigo_apply.errors import AigoError, UsageProblem
from aigo_apply.json_types import JsonObject, JsonValue, json_object, number
from aigo_apply.observe.chat_format import read_format, template_text
from aigo_apply.observe.config_file import load_config
from aigo_apply.observe.model_files import Unreadable, model_facts, read_folder_file, read_folder_json
from aigo_apply.plan import gpu_ledger
from aigo_apply.plan.fit import MIN_CONTEXT, Fit, context_limit, fit
from aigo_apply.plan.ledger_rows import LedgerRow
from aigo_apply.plan.model_proposal import Proposal, propose
from aigo_apply.plan.text import shown
from aigo_apply.platforms.capabilities import LACKS
from aigo_apply.platforms.docker.planning import observe
from aigo_apply.platforms.host_context import current_host, desired_state
from aigo_apply.safe_read import BadData, json_value

JSON_FILES = ("config.json", "tokenizer_config.json", "chat_template.json", "generation_config.json")
TEMPLATE = "chat_template.jinja"
MAX_FILE = 16 * 1024 * 1024  # each of them: KiBs in a real model (a tokenizer config with its tokens: MiBs)
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
_REVISION = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._/-]{0,127}")


@dataclass(frozen=True, kw_only=True)
class AddRequest:
    source: str  # ORG/NAME[@REVISION] or a local folder
    config_file: str
    alias: str | None = None
    write: bool = True


@dataclass(frozen=True)
class GpuFacts:
    """NVML's facts (adapters/host.nvml_facts) and the ids of this project's running engines, whose
    memory the ledger counts as theirs, not as held by others."""

    nvml: JsonObject
    ours: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ModelFiles:
    source: dict[str, str]  # the entry's source: {repo, revision} or {path}
    shown: str  # the source in messages (with the commit read, for a repo)
    files: dict[str, JsonValue]  # name -> parsed JSON (or the template's text), those the model has
    weights: int | None  # bytes of its weights (safetensors headers, or the Hub's file sizes)

    @property
    def config(self) -> JsonObject | None:
        """config.json (read_model has made sure it is an object), None without one."""
        found = self.files.get("config.json")
        return found if isinstance(found, dict) else None


@dataclass(frozen=True)
class Added:
    proposal: Proposal
    text: str  # the entry as YAML with its comments, below `models:`
    file: str
    written: bool
    release: str
    read: tuple[str, ...]  # the model's files read
    source: str

    def to_dict(self) -> JsonObject:
        """What `add -o json` prints."""
        return {
            "alias": self.proposal.alias,
            "file": self.file,
            "source": self.source,
            "written": self.written,
            "fits": self.proposal.placed,
            "vllm_release": self.release,
            "files_read": list(self.read),
            "entry": json_object(self.proposal.entry),
            "why": dict(self.proposal.why),
            "notes": list(self.proposal.notes),
        }


def add_model(request: AddRequest, gpus: GpuFacts | None = None) -> Added:
    """The proposal for SOURCE, added to the file unless `request.write` is false (see the module's
    docstring). `gpus`: the GPU facts to fit it by (this machine's when None)."""
    config = load_config(request.config_file)  # a file that does not validate is fixed first
    source = parse_source(request.source)
    alias = request.alias or default_alias(source)
    if not ALIAS_RE.match(alias):
        raise UsageProblem(
            f"{alias!r} is not a model alias (a letter or digit, then letters, digits, '.', '_' or '-'); pass --alias NAME"
        )
    clash = alias_clash(config.data.get("models") or {}, alias, {})
    if clash:
        raise UsageProblem(
            f"model '{alias}' cannot be added to {shown(request.config_file)}: {clash}; pass --alias NAME"
        )
    found = read_model(source)
    model_config = found.config
    chat = read_format(model_config, _template(found.files))
    longest = context_limit(model_config)
    placement = _fit(config, found, longest, gpus)
    release = config_release(config.data)
    proposal = propose(
        alias,
        found.source,
        chat,
        placement,
        release,
        longest,
        config.data.get("defaults"),
        model_config,
        found.files.get("generation_config.json"),
    )
    header = f"aigo-apply add: from {found.shown}; each setting says why"
    text = "".join(entry_lines(alias, proposal.entry, proposal.why, 2, header))
    written = False
    if request.write:
        refused = _refusal(proposal)
        if refused:
            raise AigoError(f"'{alias}' was not added to {shown(request.config_file)}: {refused}")
        insert_entry(request.config_file, alias, proposal.entry, proposal.why, header)
        written = True
    read = tuple(sorted(found.files))
    return Added(proposal, text, request.config_file, written, release, read, found.shown)


def _refusal(proposal: Proposal) -> str:
    if not proposal.placed:
        return "; ".join(proposal.notes)
    if "context_length" not in proposal.entry:
        return next(n for n in proposal.notes if n.startswith("context_length"))
    return ""


def parse_source(text: str) -> dict[str, str]:
    """SOURCE as the entry's source: a folder here ({path}, absolute: a relative one is read from the
    current folder, the file's folder may be another), or ORG/NAME[@REVISION] ({repo, revision})."""
    folder = Path(text).expanduser()
    folder = folder if folder.is_absolute() else Path.cwd() / folder
    if text.startswith(("/", ".", "~")) or folder.is_dir():
        if not folder.is_dir():
            raise UsageProblem(
                f"{shown(text)}: no such folder; give a model's folder or a Hugging Face repo (ORG/NAME[@REVISION])"
            )
        return {"path": str(folder.resolve())}
    repo, _, revision = text.partition("@")
    if not _REPO.fullmatch(repo) or not _REVISION.fullmatch(revision or "main"):
        raise UsageProblem(
            f"{shown(text)} is neither a folder here nor a Hugging Face repo: give ORG/NAME, ORG/NAME@REVISION "
            "(a branch, tag or commit) or a model's folder"
        )
    return {"repo": repo, "revision": revision or "main"}


def default_alias(source: dict[str, str]) -> str:
    """The repo's or folder's name, lower case, cut to what an alias may hold."""
    name = source["repo"].rpartition("/")[2] if "repo" in source else Path(source["path"]).name
    name = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-._")[:64].rstrip("-._")
    return name or "model"


def read_model(source: dict[str, str]) -> ModelFiles:
    """The model's small files (and its weights' size) from its folder or the Hub."""
    if "path" in source:
        return _read_folder(source)
    if hub.offline():
        raise AigoError(
            f"{source['repo']}: HF_HUB_OFFLINE is set, and add reads the repo's files from the Hub; unset it, or "
            "give the model's folder instead"
        )
    remote, raw = hub.small_files(source["repo"], source["revision"], (*JSON_FILES, TEMPLATE))
    files: dict[str, JsonValue] = {}
    for name, data in raw.items():
        try:
            files[name] = data.decode("utf-8") if name == TEMPLATE else json_value(data, 64, constants=True)
        except (BadData, UnicodeDecodeError) as exc:
            raise AigoError(f"{source['repo']}@{remote.commit[:12]}: {name} {exc}; a real {name} is UTF-8") from None
    _need_config(files, f"{source['repo']}@{source['revision']}")
    weights = sum(n for p, n in remote.files.items() if p.endswith((".safetensors", ".bin")))
    shown_source = f"{source['repo']}@{source['revision']} (commit {remote.commit[:12]})"
    return ModelFiles(dict(source), shown_source, files, weights or None)


def _read_folder(source: dict[str, str]) -> ModelFiles:
    folder = Path(source["path"])
    files: dict[str, JsonValue] = {}
    for name in (*JSON_FILES, TEMPLATE):
        try:
            if name == TEMPLATE:
                files[name] = read_folder_file(folder, name, MAX_FILE).decode("utf-8")
            else:
                files[name] = read_folder_json(folder, name, MAX_FILE)
        except FileNotFoundError:
            continue
        except (Unreadable, UnicodeDecodeError) as exc:
            raise AigoError(f"{shown(str(folder / name))}: {exc}") from None
        except OSError as exc:
            raise AigoError(f"{shown(str(folder / name))}: {exc.strerror or exc}") from None
    _need_config(files, str(folder))
    weights = number(model_facts({"model_dir": str(folder)}).get("weights"))
    return ModelFiles(dict(source), str(folder), files, weights)


def _need_config(files: Mapping[str, JsonValue], where: str) -> None:
    if not isinstance(files.get("config.json"), dict):
        raise AigoError(
            f"{shown(where)} has no config.json (a JSON object): add reads a vLLM model's config.json; a GGUF model "
            "runs on llama.cpp (write its entry by hand, with source.file)"
        )


def _template(files: Mapping[str, JsonValue]) -> str | None:
    jinja = files.get(TEMPLATE)  # the template's text, as read
    return template_text(
        files.get("tokenizer_config.json"), jinja if isinstance(jinja, str) else None, files.get("chat_template.json")
    )


def _fit(config: Config, found: ModelFiles, longest: int | None, gpus: GpuFacts | None) -> Fit:
    """Where the model fits: on this machine's GPUs (the ledger of the file as it is), or, for a file
    for a cluster, wherever its pod is put (each pod has GPUs of its own)."""
    length = longest or MIN_CONTEXT
    if "this_host" in LACKS[platform_of(config.data)]:  # a cluster's file: no GPUs of this machine to fit
        why = {"context_length": "the longest the model takes (config.json)"}
        return Fit(True, None, 1, length, None, None, why, ("a cluster's file: each pod gets GPUs of its own",))
    desired = desired_state(config, current_host())
    facts = gpus or GpuFacts(nvml_facts(), _running_engines(desired.project))
    rows: list[LedgerRow] = []
    notes: tuple[str, ...] = ()
    if facts.nvml.get("available"):
        files = {a: model_facts(m.spec) for a, m in desired.models.items() if m.spec["gpus"] != "none"}
        rows = gpu_ledger.build(desired, facts.nvml, files, set(facts.ours))
    else:
        rows = []
        problem = facts.nvml.get("problem") or "no GPU found"
        notes = (
            f"no GPU facts on this machine ({problem}): gpus is left out (every GPU), and nothing checked that the "
            "model fits their memory; `aigo-apply plan` on the machine with the GPUs does",
        )
    placed = fit(rows, desired, found.config, found.weights, length)
    return Fit(**{**placed.__dict__, "notes": placed.notes + notes})


def _running_engines(project: str) -> frozenset[str]:
    """The ids of the project's containers, whose GPU memory is their models' budgets, not another
    program's (none when Docker does not answer: the ledger then counts them as others')."""
    try:
        return frozenset(c.id for c in observe(project).ours)
    except AigoError:
        return frozenset()
