"""Portable model definitions (`.baimodel`): `aigo-apply export ALIAS` writes one model as the file
has it, minus the settings that belong to a machine (GPU memory fraction, tensor parallelism, MoE
and Mamba kernels, llama.cpp's GPU layers, GPU selection, port); its LoRA adapters (`adapters:`, and
`vllm.max_loras` / `vllm.max_lora_rank`, which size the engine for them) travel with it. `aigo-apply
import` prints the YAML entry for another file, or adds it there with --write (refusing an alias,
the model's or one of its adapters', that the file already has, and writing only a file that
validates)."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from pathlib import Path

from aigo_apply.config import rules, schema
from aigo_apply.config.adapter_rules import adapters_of
from aigo_apply.config.doc_path import dotted
from aigo_apply.config.engine_kinds import ENGINES
from aigo_apply.config.machine_text import yaml_comment, yaml_text
from aigo_apply.config.secret_values import unquoted
from aigo_apply.config.yaml_source import Source, load, load_bytes, load_text
from aigo_apply.edit.config_write import read_config, replace_validated
from aigo_apply.errors import AigoError, ConfigFileError, ConfigInvalid, Problem, Unreadable, UsageProblem
from aigo_apply.observe.config_file import load_config
from aigo_apply.observe.host_paths import file_facts
from aigo_apply.plan.text import shown
from aigo_apply.safe_read import MODEL_DEFINITION
from aigo_apply.safe_read import read as read_file

FORMAT = "aigo-apply/model/1"
HOST_FIELDS = ("gpus", "port", "kubernetes")  # kubernetes: node pinning and storage size, per cluster
# per engine settings block: what depends on the machine's GPUs (config/engine_kinds.py)
HOST_ENGINE_FIELDS = {name: kind.host_settings for name, kind in ENGINES.items()}


def portable(model: Mapping[str, object]) -> dict[str, object]:
    """The model entry without the host-dependent settings."""
    out = {k: copy.deepcopy(v) for k, v in model.items() if k not in HOST_FIELDS}
    for engine, fields in HOST_ENGINE_FIELDS.items():
        block = out.get(engine)
        if isinstance(block, dict):
            out[engine] = {k: v for k, v in block.items() if k not in fields}
            if not out[engine]:
                del out[engine]
    return out


def host_settings(model: Mapping[str, object]) -> list[str]:
    """The dotted names of the host-dependent settings `model` carries (what `portable` leaves out)."""
    found = [k for k in HOST_FIELDS if k in model]
    for engine, fields in HOST_ENGINE_FIELDS.items():
        block = model.get(engine)
        if isinstance(block, dict):
            found += [f"{engine}.{k}" for k in fields if k in block]
    return found


def local_paths(model: Mapping[str, object]) -> list[tuple[str, str]]:
    """(dotted setting, path) for each file the model reads from this machine's disk: its source, a
    speculative draft and each LoRA adapter given as `path:`; another machine will not have them."""
    places: list[tuple[str, object]] = [("source", model.get("source"))]
    blocks = {engine: model.get(engine) for engine in HOST_ENGINE_FIELDS}
    places += [
        (f"{engine}.speculative.draft", block["speculative"].get("draft"))
        for engine, block in blocks.items()
        if isinstance(block, dict) and isinstance(block.get("speculative"), dict)
    ]
    places += [
        (f"adapters.{name}.source", a.get("source") if isinstance(a, dict) else None)
        for name, a in adapters_of(model).items()
    ]
    return [(f"{where}.path", str(p["path"])) for where, p in places if isinstance(p, dict) and "path" in p]


def alias_clash(models: Mapping[str, object], alias: str, model: Mapping[str, object]) -> str | None:
    """Why adding `model` as `alias` to a file's `models` would reuse a name it already has (None when
    it would not): the model's alias or one of its adapters' against every model and adapter there,
    ignoring case, as validation compares them (clients send either as `model`)."""
    taken: dict[str, str] = {}
    for other, entry in models.items():
        if isinstance(other, str):
            taken.setdefault(other.lower(), f"model '{other}'")
        for name in adapters_of(entry):
            if isinstance(name, str):
                taken.setdefault(name.lower(), f"adapter '{name}' of model '{other}'")
    if alias.lower() in taken:
        return f"the alias '{alias}' is taken by {taken[alias.lower()]}"
    for name in adapters_of(model):
        if isinstance(name, str) and name.lower() in taken:
            return f"its adapter '{name}' has the alias of {taken[name.lower()]}"
    return None


def export_model(config_file: str, alias: str) -> tuple[str, list[str]]:
    """The definition's text, and warnings about what in it will not carry over to another machine."""
    config = load_config(config_file)
    models = config.data.get("models", {})
    if alias not in models:
        raise UsageProblem(f"no model '{alias}' in {config_file}; models: {', '.join(models) or 'none'}")
    document = {"format": FORMAT, "alias": alias, "model": portable(models[alias])}
    local = local_paths(models[alias])
    header = (
        f"# aigo-apply portable model definition, exported from {yaml_comment(Path(config_file).name)}.\n"
        "# Host settings (GPU memory, tensor parallelism, MoE/Mamba kernels, GPUs, port) are left out:\n"
        "# `aigo-apply import` adds it to another aigo.yaml, where those come from that machine.\n"
    )
    header += "".join(
        f"# Not portable: {where} is a folder or file on the machine it came from.\n" for where, _ in local
    )
    warnings = [
        f"model '{alias}': {where} is a local path ({path}), so this definition is not portable: another "
        "machine needs the same files at that path (or change it after import, e.g. to source: {repo: ORG/NAME})"
        for where, path in local
    ]
    return header + yaml_text(document), warnings


def read_definition(
    path: str, alias: str | None = None, config_file: str | None = None
) -> tuple[str, dict[str, object], list[str]]:
    """(alias, the portable entry, notes): host settings a hand-made definition carries are left out,
    with a note, as `export` leaves them out; a local source path gets a note too. A definition is
    input from elsewhere: its alias and entry are checked as the config checks a model (schema,
    names, hidden characters, mounts, secrets) before anything is printed or written, and a refusal
    names the definition's line; relative paths are read against `config_file`'s folder."""
    try:  # the one bounded reader: a regular file (a link to one is followed: it is named here), 1 MiB
        raw = read_file(Path(path), MODEL_DEFINITION, shown(path))
    except Unreadable as exc:
        if exc.missing:
            raise AigoError(
                f"{shown(path)}: no such file; give the path of a definition that `aigo-apply export ALIAS --out "
                "NAME.baimodel` wrote (the first argument of import; -f/--file names the aigo.yaml to add it to)"
            ) from None
        raise
    assert raw is not None
    source = load_bytes(raw, path)
    data = source.data
    model = data.get("model") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(model, dict):
        raise AigoError(f"{shown(path)}: not an aigo-apply model definition (expected `format: {FORMAT}` and `model:`)")
    if source.problems:  # duplicate keys and the like: which of two values is meant is not clear
        raise ConfigInvalid(path, unquoted(source.problems))
    name = alias or data.get("alias")
    if not isinstance(name, str) or not name:
        raise AigoError(f"{shown(path)}: the definition names no alias; pass --as ALIAS")
    _check_entry(path, source, name, portable(model), alias is not None, config_file)
    notes = []
    dropped = host_settings(model)
    if dropped:
        notes.append(
            f"{shown(path)} sets {', '.join(dropped)}, which belong to each machine: left out (set them for this "
            "machine in the config file if the defaults do not fit)"
        )
    notes += [
        f"{where} is a local path ({shown(p)}): this machine needs the files there" for where, p in local_paths(model)
    ]
    return name, portable(model), notes


_PROJECT = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
# A document around the entry, valid on its own: every engine has a tag, so only the entry can fail.
_PROBE_HEAD = (
    "version: 1\nproject: aigo-import-check\nengines:\n  sglang: {image_tag: probe}\n"
    "  llama.cpp: {image_tag: probe}\nmodels:\n"
)


def _check_entry(
    path: str, source: Source, alias: str, model: Mapping[str, object], from_option: bool, config_file: str | None
) -> None:
    """Refuse the entry, with the definition's lines, when the config would refuse it as a model."""
    base = Path(config_file).expanduser().absolute().parent if config_file else Path.cwd()
    head = _PROBE_HEAD.replace("aigo-import-check", _project_of(config_file))  # names in messages are this file's
    try:
        probe = load_text(head + entry_text(alias, model), str(base / ".aigo-import-check.yaml"))
    except ConfigFileError as exc:  # the entry breaks the YAML itself
        raise AigoError(
            f"{shown(path)}: the model entry cannot be read back as YAML ({exc}); fix the definition"
        ) from None
    found = probe.problems + schema.validate(probe) + rules.check(probe, file_facts(probe.file, probe.data))
    if found:
        raise ConfigInvalid(path, unquoted([_in_definition(p, probe, source, alias, from_option, path) for p in found]))


def _project_of(config_file: str | None) -> str:
    """The target file's project when it names a valid one (for the container names messages show)."""
    try:
        path = Path(config_file).expanduser() if config_file else None  # a regular file only: never wait on a FIFO
        data = load(path, config_file).data if path is not None and path.is_file() else None
    except (AigoError, OSError):
        data = None
    project = data.get("project") if isinstance(data, dict) else None
    return project if isinstance(project, str) and _PROJECT.fullmatch(project) else "aigo-import-check"


def _in_definition(
    problem: Problem, probe: Source, source: Source, alias: str, from_option: bool, path: str
) -> Problem:
    """A problem of the probe document, placed where the definition writes the same value."""
    at = {pos: key for key, pos in probe.marks.values.items()}
    at.update({pos: key for key, pos in probe.marks.keys.items()})
    where = at.get((problem.line, problem.column), ())
    prefix = dotted(("models", alias))
    shown_path = problem.path
    about_alias = shown_path == prefix and "alias" in problem.message  # else about the entry as a whole
    if shown_path == prefix or shown_path.startswith(prefix + "."):
        shown_path = ("--as" if from_option else "alias") if about_alias else "model" + shown_path[len(prefix) :]
    if tuple(where[:2]) == ("models", alias) and len(where) > 2:
        line, column = source.marks.of_value(("model", *where[2:]))
    elif not about_alias:
        line, column = source.marks.of_key(("model",))
    elif from_option:
        line, column = 1, 1
    else:
        line, column = (
            source.marks.of_value(("alias",))
            if isinstance(source.data, dict) and "alias" in source.data
            else source.marks.of_key(("model",))
        )
    message = problem.message.replace(probe.file, path)
    return Problem(line, column, shown_path, message, path)


def entry_text(alias: str, model: Mapping[str, object], indent: int = 2) -> str:
    body = yaml_text({alias: model})  # the exact values, and no line a CI runner reads as a command
    return "".join(" " * indent + line if line.strip() else line for line in body.splitlines(keepends=True))


def add_to_file(config_file: str, alias: str, model: Mapping[str, object]) -> None:
    """Insert the entry under `models:` and write the file only if the result validates, the one safe
    way (edit/config_write.py): a regular file only, owner and mode kept, refused if it changed meanwhile."""
    path = Path(config_file).expanduser()
    raw, source = read_config(path, config_file)
    if source.problems:  # duplicate keys: where the entry would go is not clear
        raise ConfigInvalid(config_file, unquoted(source.problems))
    data = source.data if isinstance(source.data, dict) else {}
    models = data.get("models")
    if not isinstance(models, dict):
        raise AigoError(f"{config_file}: has no `models:` mapping to add to")
    if alias in models:
        raise UsageProblem(f"model '{alias}' already exists in {config_file}; import it --as another alias")
    clash = alias_clash(models, alias, model)
    if clash is not None:
        fix = (
            "import it --as another alias"
            if clash.startswith("the alias")
            else "rename the adapter in the definition (or the one in the file): every model and adapter needs "
            "a name of its own"
        )
        raise UsageProblem(f"model '{alias}' cannot be added to {config_file}: {clash} there; {fix}")
    text = raw.decode("utf-8")  # the bytes read_config found valid UTF-8
    bom = "\ufeff" if text.startswith("\ufeff") else ""  # (the marks count from after it)
    added = with_entry(text.removeprefix(bom), source, alias, model, config_file)
    write_checked(path, config_file, alias, bom + added, raw)


_EMPTY = re.compile(r"\{[ \t]*\}")


def with_entry(text: str, source: Source, alias: str, model: Mapping[str, object], display: str) -> str:
    """`text` (what `source` read) with the entry added at the end of `models:` and every other line
    kept as written: each comment (the one on `models: {}  # ...` too, and a comment at the left margin
    above the next section stays with that section), blank lines, and the file's line ends (CRLF stays
    CRLF, a last line without one stays without)."""
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]  # what follows the last line feed: nothing, or a last line without one
    if not lines[-1]:
        lines.pop()
    else:
        lines[-1] += newline
    models = source.data.get("models") if isinstance(source.data, dict) else None
    if not isinstance(models, dict):
        raise AigoError(f"{display}: has no `models:` mapping to add to")
    line, column = source.marks.of_value(("models",))
    flow = lines[line - 1][column - 1 : column] == "{"
    if not models and flow and (empty := _EMPTY.match(lines[line - 1], column - 1)) is not None:
        written, rest = lines[line - 1][: column - 1].rstrip(" \t"), lines[line - 1][empty.end() :]
        comment = rest.rstrip("\r\n")
        lines[line - 1] = written + (comment if comment.strip() else "") + (rest[len(comment) :] or newline)
        at, indent = line, 2
    elif flow or not models:
        raise AigoError(
            f"{display}:{line}: `models:` is written as a {{...}} mapping, and import --write adds a model as a "
            "block below it; write `models:` in block style (one alias per line), or add the entry by hand"
        )
    else:
        models_line = source.marks.of_key(("models",))[0]
        indent = source.marks.of_key(("models", next(iter(models))))[1] - 1
        later = sorted(row for (key,), (row, _) in _top_keys(source).items() if row > models_line)
        at = later[0] - 1 if later else len(lines)
        while at > models_line and (not lines[at - 1].strip() or lines[at - 1].startswith("#")):
            at -= 1  # blank lines and the comments heading the next section stay above that section
    lines.insert(at, entry_text(alias, model, indent).replace("\n", newline))
    out = "".join(lines)
    if not text.endswith("\n") and at < len(lines) - 1:  # the last line kept its missing line end
        out = out.removesuffix(newline)
    return out


def write_checked(target: Path, config_file: str, alias: str, text: str, raw: bytes) -> None:
    """Put the file with the new entry `alias` in place only if it validates (import --write, add)."""
    replace_validated(
        target,
        config_file,
        text,
        raw,
        lambda shown: f"adding '{alias}' would make {shown} invalid, so it was not changed:",
        lambda error: f"adding '{alias}': {error}; so it was not changed",
    )


def _top_keys(source: Source) -> dict[tuple[object, ...], tuple[int, int]]:
    return {k: v for k, v in source.marks.keys.items() if len(k) == 1}
