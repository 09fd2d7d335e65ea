"""The one safe way to write a file (aigo_apply/safe_write.py), held for every command that writes one:
`init` (new and --force), `fmt`, `image tag`, `import --write`, `schema --write`, `plan --out`,
`export --out` and aigo.lock. For each: never through a symlink at the target (a dangling one included),
never into a FIFO, device or folder and never waiting on one, the owner, group and mode of an existing
file kept (also when root rewrites a user's file), a temporary file in the same folder renamed over the
target, and a refusal with nothing written when the file changed after the command read it. Each
refusal names the file and what to do. And no other module writes a user's file by itself."""

from __future__ import annotations

import ast
import os
import signal
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

import aigo_apply
from aigo_apply import safe_write
from aigo_apply.app.saved_plan import save_plan as save
from aigo_apply.errors import AigoError, PlanFileError
from aigo_apply.plan.types import Plan
from aigo_apply.platforms import lock_file

from helpers.configs import model_folder, write_config

CONFIG = (
    "version: 1\nproject: lab\nengines:\n  vllm: {image: aigo-stub-engine, image_tag: '1'}\n"
    "models:\n  m1: {source: {path: m1}, context_length: 4096, gpus: none}\n"
)
MESSY = "project: lab\nversion: 1\nmodels:\n    m1: {context_length: 4096, source: {path: m1}, gpus: none}\n"
DEFINITION = "format: aigo-apply/model/1\nalias: m2\nmodel: {source: {repo: org/m2}, context_length: 4096}\n"
ROOT = os.geteuid() == 0


@pytest.fixture(autouse=True)
def _never_hang():
    """A write that opened a FIFO would wait forever: fail instead."""

    def stop(*_):
        raise AssertionError("the command blocked (opened a FIFO?)")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _main(capsys, *args: str) -> tuple[int, str]:
    from aigo_apply.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out = capsys.readouterr()
    return int(exit_info.value.code or 0), out.err


def _config(tmp_path: Path, text: str = CONFIG, name: str = "aigo.yaml") -> Path:
    model_folder(tmp_path / "m1")
    return write_config(tmp_path, text, name)


@dataclass(frozen=True)
class Writer:
    """A command that writes `target`: how to prepare the folder, how to run it, and whether it read
    the target first (then an edit made meanwhile must be kept)."""

    name: str
    target: str  # the file name it writes in tmp_path
    run: Callable[[Path, Path, object], tuple[int, str]]
    existing: str | None  # what an existing target holds for the command to work on (None: created new)
    reads: bool = True


def _cli(*args: str) -> Callable[[Path, Path, object], tuple[int, str]]:
    def run(tmp_path: Path, target: Path, capsys: object) -> tuple[int, str]:
        if not (tmp_path / "aigo.yaml").exists() and target.name != "aigo.yaml":
            _config(tmp_path)
        if not (tmp_path / "m1").exists():
            model_folder(tmp_path / "m1")
        (tmp_path / "def.baimodel").write_text(DEFINITION)
        names = {"T": str(target), "C": str(tmp_path / "aigo.yaml"), "D": str(tmp_path / "def.baimodel")}
        return _main(capsys, *(names.get(a, a) for a in args))

    return run


def _api(call: Callable[[Path], object]) -> Callable[[Path, Path, object], tuple[int, str]]:
    def run(tmp_path: Path, target: Path, capsys: object) -> tuple[int, str]:
        try:
            call(target)
        except AigoError as exc:
            return 1, str(exc)
        return 0, ""

    return run


LOCK = {"version": 1, "project": "lab", "images": {}, "models": {}}
WRITERS = [
    Writer("init", "aigo.yaml", _cli("init", "-f", "T", "--project", "lab"), None, reads=False),
    Writer("init --force", "aigo.yaml", _cli("init", "-f", "T", "--project", "lab", "--force"), "old: 1\n"),
    Writer("fmt", "aigo.yaml", _cli("fmt", "T"), MESSY),
    Writer("image tag", "aigo.yaml", _cli("image", "tag", "vllm", "v9", "-f", "T"), CONFIG),
    Writer("import --write", "aigo.yaml", _cli("import", "D", "-f", "T", "--write"), CONFIG),
    Writer("schema --write", "aigo.schema.json", _cli("schema", "--write", "-f", "C"), "{}\n"),
    Writer("export --out", "m1.baimodel", _cli("export", "m1", "-f", "C", "--out", "T"), "old\n", reads=False),
    Writer(
        "plan --out",
        "plan.json",
        _api(lambda t: save(Plan("lab", "aigo.yaml", "sha256:" + "0" * 64, ()), t)),
        "old\n",
        reads=False,
    ),
    Writer("aigo.lock", "aigo.lock", _api(lambda t: lock_file.write(t, LOCK)), "{}\n"),
]
IDS = [w.name for w in WRITERS]


def _prepare(tmp_path: Path, writer: Writer) -> Path:
    target = tmp_path / writer.target
    if writer.target == "aigo.yaml":
        model_folder(tmp_path / "m1")
    if writer.existing is not None:
        target.write_text(writer.existing)
    return target


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


@pytest.mark.parametrize("writer", WRITERS, ids=IDS)
def test_each_writer_goes_through_the_safe_write_and_renames_a_new_file_in(tmp_path, capsys, monkeypatch, writer):
    target = _prepare(tmp_path, writer)
    twin = tmp_path / "twin"
    if target.exists():
        os.link(target, twin)  # a hard link to the old file keeps the old bytes: the file is replaced, not rewritten
    seen: list[Path] = []
    real = safe_write.write

    def spy(path, *args, **kwargs):
        seen.append(Path(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(safe_write, "write", spy)
    code, err = writer.run(tmp_path, target, capsys)
    assert code == 0, err
    assert target in seen, seen
    assert target.is_file() and not target.is_symlink()
    if twin.exists():
        assert twin.read_text() == writer.existing and target.read_text() != writer.existing
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("writer", WRITERS, ids=IDS)
@pytest.mark.parametrize("dangling", [False, True], ids=["link", "dangling link"])
def test_no_writer_writes_through_a_symlink(tmp_path, capsys, writer, dangling):
    target = _prepare(tmp_path, writer)
    target.unlink(missing_ok=True)
    victim = tmp_path / "elsewhere" / "victim"
    victim.parent.mkdir()
    if not dangling:
        victim.write_text(writer.existing or "keep\n")
    target.symlink_to(victim)
    code, err = writer.run(tmp_path, target, capsys)
    assert code == 1 and writer.target in err and "Traceback" not in err, err
    assert "symbolic link" in err or "already exists" in err, err  # init without --force: exists, edit it
    assert target.is_symlink()
    assert victim.read_text() == (writer.existing or "keep\n") if not dangling else not victim.exists()
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("writer", WRITERS, ids=IDS)
@pytest.mark.parametrize("kind", ["fifo", "folder", "device"])
def test_no_writer_writes_into_a_fifo_folder_or_device_nor_waits_on_one(tmp_path, capsys, writer, kind):
    target = _prepare(tmp_path, writer)
    target.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "folder":
        target.mkdir()
    elif writer.name == "schema --write":
        pytest.skip("schema --write writes one fixed name beside the config")
    else:
        target = Path("/dev/null")
    code, err = writer.run(tmp_path, target, capsys)
    assert code in (1, 64) and "Traceback" not in err, err  # 64: click's own check of -o (a directory)
    assert any(words in err for words in ("not a regular file", "already exists", "is a directory")), err
    assert {"fifo": stat.S_ISFIFO, "folder": stat.S_ISDIR, "device": stat.S_ISCHR}[kind](os.lstat(target).st_mode)
    assert _leftovers(tmp_path) == []


@pytest.mark.skipif(not ROOT, reason="giving a file another owner needs root")
@pytest.mark.parametrize("writer", [w for w in WRITERS if w.existing is not None], ids=lambda w: w.name)
def test_a_root_run_keeps_the_owner_group_and_mode_of_a_users_file(tmp_path, capsys, writer):
    target = _prepare(tmp_path, writer)
    os.chown(target, 4321, 4322)
    os.chmod(target, 0o640)
    code, err = writer.run(tmp_path, target, capsys)
    assert code == 0, err
    info = os.lstat(target)
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (4321, 4322, 0o640)
    assert target.read_text() != writer.existing


@pytest.mark.parametrize("writer", [w for w in WRITERS if w.reads], ids=lambda w: w.name)
def test_an_edit_made_while_a_writer_runs_is_kept_and_nothing_is_written(tmp_path, capsys, monkeypatch, writer):
    target = _prepare(tmp_path, writer)
    real = safe_write.write

    def edit_first(path, *args, **kwargs):  # someone saves the file after the command read it
        if Path(path) == target:
            with open(target, "a") as f:
                f.write("# my edit\n")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(safe_write, "write", edit_first)
    code, err = writer.run(tmp_path, target, capsys)
    assert code == 1 and "changed since aigo-apply read it" in err and "run the command again" in err, err
    assert writer.target in err and "Traceback" not in err
    assert target.read_text() == (writer.existing or "") + "# my edit\n"
    assert _leftovers(tmp_path) == []


def test_a_file_that_appears_while_init_writes_is_kept(tmp_path, capsys, monkeypatch):
    real = safe_write.write
    target = tmp_path / "aigo.yaml"

    def appear(path, *args, **kwargs):
        if Path(path) == target:
            target.write_text("mine\n")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(safe_write, "write", appear)
    code, err = _cli("init", "-f", "T", "--project", "lab")(tmp_path, target, capsys)
    assert code == 1 and "appeared while aigo-apply wrote it" in err, err
    assert target.read_text() == "mine\n"


# -- the module itself ------------------------------------------------------------------------------


def test_an_edit_made_during_the_check_is_kept(tmp_path):
    """The last comparison comes after the (slow) validation, right before the rename."""
    target = tmp_path / "f"
    target.write_text("one\n")
    read = safe_write.read_current(target, "f")

    def check(tmp: str) -> None:
        assert Path(tmp).parent == tmp_path and Path(tmp).read_text() == "two\n"
        target.write_text("mine\n")

    with pytest.raises(AigoError, match="f: changed since aigo-apply read it"):
        safe_write.write(target, "two\n", "f", expect=read, check=check)
    assert target.read_text() == "mine\n" and _leftovers(tmp_path) == []


def test_a_check_that_refuses_leaves_the_file_and_no_temporary_file(tmp_path):
    target = tmp_path / "f"
    target.write_text("one\n")

    def refuse(tmp: str) -> None:
        raise AigoError("f would not validate")

    with pytest.raises(AigoError, match="would not validate"):
        safe_write.write(target, "two\n", expect=b"one\n", check=refuse)
    assert target.read_text() == "one\n" and os.listdir(tmp_path) == ["f"]


def test_a_symlink_swapped_in_just_before_the_rename_is_replaced_not_followed(tmp_path, monkeypatch):
    target, victim = tmp_path / "f", tmp_path / "victim"
    victim.write_text("keep\n")
    real = os.rename

    def swap_then_rename(src, dst):
        os.symlink(victim, dst)
        real(src, dst)

    monkeypatch.setattr(safe_write.os, "rename", swap_then_rename)
    safe_write.write(target, "new\n", expect=safe_write.ANY)
    assert victim.read_text() == "keep\n" and target.read_text() == "new\n" and not target.is_symlink()


def test_a_new_file_gets_the_umask_and_an_owner_that_cannot_be_kept_is_refused(tmp_path, monkeypatch):
    old = os.umask(0o077)
    try:
        safe_write.write(tmp_path / "new", "x", expect=None)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "new").st_mode) == 0o600
    target = tmp_path / "theirs"
    target.write_text("theirs\n")
    real_lstat = safe_write._lstat
    monkeypatch.setattr(safe_write, "_lstat", lambda path, *a: _owned_by(4321, real_lstat(path, *a)))

    def refuse(*_):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(safe_write.os, "fchown", refuse)  # as for an account that is not root
    with pytest.raises(AigoError, match="theirs: belongs to uid 4321 .* cannot give the rewritten file that owner"):
        safe_write.write(target, "mine\n", "theirs", expect=safe_write.ANY)
    assert target.read_text() == "theirs\n" and _leftovers(tmp_path) == []


def _owned_by(uid: int, info: os.stat_result | None) -> os.stat_result | None:
    if info is None:
        return None
    fields = list(info)
    fields[stat.ST_UID] = uid
    return os.stat_result(fields)


def test_errors_keep_the_callers_type_and_name_the_file(tmp_path):
    with pytest.raises(PlanFileError, match="cannot write the plan file: No such file or directory"):
        safe_write.write(tmp_path / "no" / "p.json", "x", expect=safe_write.ANY, error=PlanFileError, what="plan file")
    assert safe_write.read_current(tmp_path / "none", "none") is None


# -- one way ------------------------------------------------------------------------------------------

# Modules that write files another way, each for a reason of another kind than a user's file.
OTHER_WRITERS = {
    "aigo_apply.platforms.docker.router_deploy": "the router's files: each configuration in a fresh generation folder it "
    "creates itself (0700, in the state folder), and a `live` link swapped by rename",
    "aigo_apply.platforms.journal": "the apply journal: appended to, in the state folder",
    "aigo_apply.platforms.project_lock": "the project's lock file (flock), in the state folder",
    "aigo_apply.platforms.docker.hold_lease": "the router's hold files, in the state folder: each written whole beside "
    "itself and renamed into place, renewed every few seconds while the apply that holds runs",
    "aigo_apply.platforms.state_dir": "the project's state-folder mark, in the folder it made: a new file only "
    "(O_EXCL, O_NOFOLLOW, 0600), written once",
    "aigo_apply.platforms.docker.failed_starts": "the logs of failed starts, in the state folder: new files only "
    "(O_EXCL, O_NOFOLLOW, 0600), never one that exists",
    "aigo_apply.platforms.docker.legacy_store": "hard-links an older layout's download into its folder in the model store "
    "(the marker is a safe write)",
    "aigo_apply.adapters.hub": "moves whole download folders within the model store (the marker is a safe write)",
    "aigo_apply.platforms.docker.sleep_replace": "a link from the new engine's socket path to the old engine's, in the "
    "project's sockets folder, while the router's held requests are answered (no file's contents)",
}
PACKAGE = Path(aigo_apply.__file__).parent


def _writes(tree: ast.AST) -> list[int]:
    """Lines that create, replace or open for writing a file: os.replace/rename, Path.rename/replace,
    tempfile, shutil's copies and moves, Path.write_text/write_bytes, open(..., 'w'/'a'/'x'), os.open
    with O_CREAT."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = ast.unparse(node.func)
        if name in ("os.replace", "os.rename", "os.link", "shutil.move", "shutil.copy", "shutil.copyfile"):
            lines.append(node.lineno)
        elif name.startswith("tempfile.") or name.endswith((".write_text", ".write_bytes")):
            lines.append(node.lineno)
        elif name.endswith((".rename", ".replace")) and len(node.args) == 1 and not node.keywords:
            lines.append(node.lineno)  # Path.rename/replace (str.replace takes two arguments)
        elif name in ("open", "os.fdopen") and len(node.args) > 1:
            mode = node.args[1]
            if isinstance(mode, ast.Constant) and any(c in str(mode.value) for c in "wax+"):
                lines.append(node.lineno)
        elif name == "os.open" and "O_CREAT" in ast.unparse(node):
            lines.append(node.lineno)
    return lines


def test_no_module_but_safe_write_writes_a_file_by_itself():
    found = {}
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if module in ("aigo_apply.safe_write", *OTHER_WRITERS):
            continue
        if lines := _writes(ast.parse(path.read_text(encoding="utf-8"))):
            found[module] = lines
    assert not found, f"write through aigo_apply/safe_write.py instead: {found}"
    assert all(_writes(ast.parse((PACKAGE.parent / (m.replace(".", "/") + ".py")).read_text())) for m in OTHER_WRITERS)
