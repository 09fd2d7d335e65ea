"""A saved plan file is input nobody reviewed: every malformed document (wrong types, wrong version,
duplicate keys, unknown keys, deep nesting, NaN, huge, not UTF-8, a BOM, not a regular file) is a
PlanFileError that names the file and the place in the document, and `apply PLANFILE` ends with
exit 1 and one clean message, before Docker is touched, never with a traceback."""

from __future__ import annotations

import json
import os
import stat

import pytest

from aigo_apply.app.saved_plan import MAX_PLAN_BYTES, read_plan, save_plan
from aigo_apply.errors import PlanFileError
from aigo_apply.plan.planner import build_plan
from aigo_apply.plan.types import Plan

from helpers.planner_inputs import desired, observed, running


@pytest.fixture
def saved(tmp_path):
    """A real plan (alpha runs; beta and the router are to be made), as `plan --out` writes it."""
    d = desired(tmp_path)
    plan = build_plan(d, observed(d, running(d)[:1], downloaded=False))
    path = tmp_path / "plan.json"
    save_plan(plan, path)
    return path


@pytest.fixture
def no_docker(monkeypatch):
    """Fails the test if anything reaches for Docker."""
    import aigo_apply.platforms.docker.platform

    def refuse(*_a, **_k):
        raise AssertionError("Docker was reached")

    monkeypatch.setattr(aigo_apply.platforms.docker.platform, "_docker", refuse)


def _apply(capsys, *args):
    from aigo_apply.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(["apply", *args])
    return exit_info.value.code, capsys.readouterr().err


def _ok(err: str) -> None:
    assert "Traceback" not in err and "internal error" not in err, err
    assert all(c.isprintable() or c == "\n" for c in err), repr(err)


def test_the_written_plan_reads_back(saved):
    plan = read_plan(saved)
    assert isinstance(plan, Plan) and plan.actions
    assert stat.S_IMODE(saved.stat().st_mode) == 0o644


NULL = object()  # an edit that makes the whole document `null`


def _drop(*path):
    def edit(d):
        for key in path[:-1]:
            d = d[key]
        del d[path[-1]]

    return edit


def _set(key, value):
    return lambda d: d.update({key: value})


def _request(**changes):
    return lambda d: d["request"].update(changes)


def _action(**changes):
    return lambda d: d["actions"][0].update(changes)


def _nest(depth):
    def edit(d):
        inner: list = []
        for _ in range(depth):
            inner = [inner]
        d["actions"][0]["spec"] = {"deep": inner}

    return edit


EDITS = {
    # config_file: only a string of printable characters, at most 4096
    "config_file a number": (_set("config_file", 12), "config_file is an integer"),
    "config_file a list": (_set("config_file", ["a.yaml"]), "config_file is a list"),
    "config_file null": (_set("config_file", None), "config_file is null"),
    "config_file an object": (_set("config_file", {"a": 1}), "config_file is an object"),
    "config_file a boolean": (_set("config_file", True), "config_file is a boolean"),
    "config_file empty": (_set("config_file", ""), "config_file is the string ''"),
    "config_file very long": (_set("config_file", "/" + "a" * 5000 + ".yaml"), "config_file is the string"),
    "config_file with NUL": (_set("config_file", "/etc/a\x00.yaml"), "config_file is the string"),
    "config_file with ESC": (_set("config_file", "/tmp/\x1b[2J.yaml"), "config_file is the string"),
    "config_file with a bidi override": (_set("config_file", "/tmp/\u202eaigo.yaml"), "config_file"),
    # format_version: exactly the integer 1
    "format_version true": (_set("format_version", True), "format_version is a boolean"),
    "format_version 1.0": (_set("format_version", 1.0), "format_version is a number"),
    "format_version '1'": (_set("format_version", "1"), "format_version is the string '1'"),
    "format_version 2": (_set("format_version", 2), "format_version is an integer 2"),
    "format_version null": (_set("format_version", None), "format_version is null"),
    "format_version missing": (_drop("format_version"), "format_version is missing"),
    # the other top-level keys
    "project missing": (_drop("project"), "project is missing"),
    "project a path": (_set("project", "../etc"), "project is the string '../etc'"),
    "project with a newline": (_set("project", "lab\nerror: fine"), "project is the string"),
    "fingerprint edited": (_set("fingerprint", "sha256:\x1b[31m"), "fingerprint is the string"),
    "actions not a list": (_set("actions", "all"), "actions is the string 'all', not a list"),
    "actions an object": (_set("actions", {}), "actions is an object, not a list"),
    "an action not an object": (lambda d: d["actions"].append(3), "is an integer 3, not an object"),
    "an unknown kind": (_action(kind="explode"), "actions[0].kind is not one of pull, download"),
    "reasons of numbers": (_action(reasons=[1]), "actions[0].reasons[0] is an integer"),
    "an address with a newline": (_action(address="model.a\n  # fake"), "actions[0].address is the string"),
    "a change with a stray key": (
        _action(changes=[{"path": "p", "before": 1, "after": 2, "effect": "none", "x": 1}]),
        "actions[0].changes[0] has a key this version never writes: 'x'",
    ),
    "ready_timeout a boolean": (_action(ready_timeout=True), "actions[0].ready_timeout is a boolean"),
    "ready_timeout negative": (_action(ready_timeout=-1), "actions[0].ready_timeout is an integer -1"),
    "spec a list": (_action(spec=[1]), "actions[0].spec is a list, not an object"),
    "blockers of strings": (_set("blockers", ["x"]), "blockers[0] is the string 'x', not an object"),
    "warnings of objects": (_set("warnings", [{}]), "warnings[0] is an object"),
    "lanes of numbers": (_set("lanes", [[1]]), "lanes[0][0] is an integer"),
    "gpu_ledger of strings": (_set("gpu_ledger", ["x"]), "gpu_ledger[0] is the string"),
    "summary a list": (_set("summary", []), "summary is a list"),
    "an unknown top-level key": (_set("run", "rm -rf /"), "the document has a key this version never writes: 'run'"),
    "an unknown action key": (_action(command="sh"), "actions[0] has a key this version never writes: 'command'"),
    # request: required, all five options, typed, and only aliases and known check ids
    "request missing": (_drop("request"), "request is missing"),
    "request null": (_set("request", None), "request is null"),
    "request a list": (_set("request", []), "request is a list"),
    "request without pull": (_drop("request", "pull"), "request.pull is missing"),
    "request with a stray key": (_request(force=True), "request has a key this version never writes: 'force'"),
    "request target not an alias": (_request(target=["\x1b]0;pwned\x07"]), "request.target[0] is the string"),
    "request replace a path": (_request(replace=["../x"]), "request.replace[0] is the string '../x'"),
    "request ignore an unknown check": (_request(ignore=["everything"]), "request.ignore[0] is the string"),
    "request locked a string": (_request(locked="yes"), "request.locked is the string 'yes', not true or false"),
    "request pull unknown": (_request(pull="sometimes"), "request.pull is not one of missing, always, never"),
    # depth
    "a spec 40 levels deep": (_nest(40), "nests deeper than 32 levels"),
    "a spec 900 levels deep": (_nest(900), "nests deeper than 32 levels"),
    # the document itself
    "a list": (lambda d: [d], "the document is a list, not an object"),
    "a string": (lambda d: "plan", "the document is the string 'plan'"),
    "null": (lambda d: NULL, "the document is null"),
    "a number": (lambda d: 1, "the document is an integer 1"),
}


@pytest.mark.parametrize("name", sorted(EDITS))
def test_each_malformed_document_is_refused_saying_where(saved, capsys, no_docker, name):
    edit, expected = EDITS[name]
    data = json.loads(saved.read_text())
    result = edit(data)
    saved.write_text(json.dumps(data if result is None else None if result is NULL else result), encoding="utf-8")
    with pytest.raises(PlanFileError) as caught:
        read_plan(saved)
    message = str(caught.value)
    assert message.startswith(f"{saved}: ") and expected in message, message
    assert "aigo-apply plan --out" in message
    code, err = _apply(capsys, str(saved))
    assert code == 1 and f"error: {saved}: " in err, err
    _ok(err)


def _duplicate(where):
    def text(original: str) -> str:
        data = json.loads(original)
        if where == "top":
            return original.replace('"project": ', '"project": "lab", "project": ', 1)
        if where == "action":
            return original.replace('"kind": ', '"kind": "noop", "kind": ', 1)
        if where == "request":
            return original.replace('"pull": ', '"pull": "never", "pull": ', 1)
        assert where == "spec" and data
        return original.replace('"spec": {', '"spec": {"image": "evil", ', 1).replace(
            '"image": "evil", ', '"image": "evil", "image": "evil", ', 1
        )

    return text


RAW = {
    "a duplicate top-level key": (_duplicate("top"), "has the key 'project' twice in one object"),
    "a duplicate key in an action": (_duplicate("action"), "has the key 'kind' twice"),
    "a duplicate key in the request": (_duplicate("request"), "has the key 'pull' twice"),
    "a duplicate key in a spec": (_duplicate("spec"), "has the key 'image' twice"),
    "100000 levels of nesting": (
        lambda t: t.replace('"actions": [', '"actions": [' + "[" * 100_000 + "]" * 100_000 + ",", 1),
        "nests deeper than 32 levels",
    ),
    "NaN": (lambda t: t.replace('"format_version": 1', '"format_version": NaN'), "holds NaN, which is not a number"),
    "Infinity": (
        lambda t: t.replace('"format_version": 1', '"format_version": -Infinity'),
        "holds -Infinity, which is not",
    ),
    "1e999": (
        lambda t: t.replace('"format_version": 1', '"format_version": 1e999'),
        "holds 1e999, which is not a finite number",
    ),
    "a 5000-digit integer": (lambda t: t.replace('"format_version": 1', '"format_version": ' + "9" * 5000), "digits"),
    "truncated JSON": (lambda t: t[: len(t) // 2], "not a JSON plan file"),
    "trailing garbage": (lambda t: t + "\n{}", "not a JSON plan file (Extra data)"),
    "an empty file": (lambda t: "", ":1:1: not a JSON plan file"),
    "comments": (lambda t: "// approved\n" + t, ":1:1: not a JSON plan file"),
}


@pytest.mark.parametrize("name", sorted(RAW))
def test_each_malformed_json_text_is_refused(saved, capsys, no_docker, name):
    edit, expected = RAW[name]
    saved.write_text(edit(saved.read_text()), encoding="utf-8")
    with pytest.raises(PlanFileError) as caught:
        read_plan(saved)
    assert str(caught.value).startswith(f"{saved}") and expected in str(caught.value), str(caught.value)
    code, err = _apply(capsys, str(saved))
    assert code == 1 and str(saved) in err, err
    _ok(err)


BYTES = {
    "invalid UTF-8": (lambda b: b.replace(b'"lab"', b'"l\xffb"', 1), "is not UTF-8 text"),
    "a lone continuation byte on line 1": (lambda b: b"\x80" + b, ":1: the plan file is not UTF-8 text (byte 0)"),
    "a UTF-8 byte order mark": (lambda b: b"\xef\xbb\xbf" + b, ":1: the plan file starts with a byte order mark"),
    "UTF-16": (lambda b: b.decode().encode("utf-16"), "is not UTF-8 text"),
    "a NUL byte": (lambda b: b.replace(b"{", b"{\x00", 1), "not a JSON plan file"),
}


@pytest.mark.parametrize("name", sorted(BYTES))
def test_bytes_that_are_not_strict_utf8_json_are_refused(saved, capsys, no_docker, name):
    edit, expected = BYTES[name]
    saved.write_bytes(edit(saved.read_bytes()))
    with pytest.raises(PlanFileError, match="make a new one") as caught:
        read_plan(saved)
    assert expected in str(caught.value), str(caught.value)
    code, err = _apply(capsys, str(saved))
    assert code == 1 and "Traceback" not in err
    _ok(err)


def test_a_huge_file_is_refused_before_it_is_read(tmp_path, capsys, no_docker):
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as f:
        f.truncate(1 << 30)  # 1 GiB, sparse: reading it would take the memory
    with pytest.raises(PlanFileError, match=r"is larger than 16 MiB; a plan file is a few KiB"):
        read_plan(huge)
    just_over = tmp_path / "over.json"
    just_over.write_bytes(b" " * (MAX_PLAN_BYTES + 1))
    with pytest.raises(PlanFileError, match="is larger than 16 MiB"):
        read_plan(just_over)
    code, err = _apply(capsys, str(huge))
    assert code == 1 and "is larger than 16 MiB" in err
    _ok(err)


def test_a_file_that_grows_while_read_is_still_bounded(tmp_path, monkeypatch):
    """The size is checked on what is read too, not only on what stat said."""
    path = tmp_path / "plan.json"
    path.write_bytes(b"{}")
    real_fstat = os.fstat

    class Small:
        def __init__(self, info):
            self.st_mode, self.st_size, self.st_dev, self.st_ino = info.st_mode, 2, info.st_dev, info.st_ino

    path.write_bytes(b" " * (MAX_PLAN_BYTES + 10))
    monkeypatch.setattr(os, "fstat", lambda fd: Small(real_fstat(fd)))
    with pytest.raises(PlanFileError, match="is larger than 16 MiB"):
        read_plan(path)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path, capsys, no_docker):
    fifo = tmp_path / "plan.fifo"
    os.mkfifo(fifo)
    with pytest.raises(PlanFileError, match="is not a regular file; pass the file"):
        read_plan(fifo)
    link = tmp_path / "link.json"
    link.symlink_to(fifo)
    with pytest.raises(PlanFileError, match="is not a regular file"):
        read_plan(link)
    code, err = _apply(capsys, str(fifo))
    assert code == 1 and "is not a regular file" in err
    _ok(err)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null", "/dev/urandom"])
def test_a_device_is_refused(capsys, no_docker, device):
    with pytest.raises(PlanFileError, match="is not a regular file"):
        read_plan(__import__("pathlib").Path(device))
    code, err = _apply(capsys, device)
    assert code == 1 and f"error: {device} is not a regular file" in err
    _ok(err)


def test_a_directory_missing_file_and_unreadable_file_are_refused(tmp_path, capsys, no_docker):
    with pytest.raises(PlanFileError, match="is not a regular file"):
        read_plan(tmp_path)
    code, err = _apply(capsys, str(tmp_path))
    assert code == 64 and "is a directory" in err  # click's own check of PLANFILE: a usage error
    with pytest.raises(PlanFileError, match="cannot read the plan file: No such file or directory"):
        read_plan(tmp_path / "nope.json")
    code, err = _apply(capsys, str(tmp_path / "nope.json"))
    assert code == 1 and "No such file or directory" in err
    _ok(err)


def test_a_config_file_that_is_not_a_regular_yaml_file_is_refused(saved, tmp_path, capsys, no_docker):
    """config_file passes the shape check but names a FIFO (reading it would wait) or a name too
    long for the system: refused with the fix, before Docker."""
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for config_file in (str(fifo), "/" + "a/" * 2040 + "x.yaml", "/etc/passwd"):
        data = json.loads(saved.read_text())
        data["config_file"] = config_file
        saved.write_text(json.dumps(data))
        code, err = _apply(capsys, str(saved))
        assert code == 1 and "which is not a .yaml file here; pass the config file with -f" in err, err
        _ok(err)


@pytest.mark.parametrize(
    ("in_file", "on_command_line", "refused"),
    [
        (["gpu.fit"], [], True),  # a waiver added by hand: the actions digest cannot show it
        (["gpu.fit", "model.path"], ["gpu.fit"], True),
        ([], ["gpu.fit"], True),  # a waiver the reviewed plan did not have
        (["gpu.fit"], ["gpu.fit"], False),
        ([], [], False),
    ],
)
def test_waivers_in_a_saved_plan_are_confirmed_on_the_apply_command_line(
    saved, capsys, no_docker, in_file, on_command_line, refused
):
    data = json.loads(saved.read_text())
    data["request"]["ignore"] = in_file
    saved.write_text(json.dumps(data))
    args = [a for i in on_command_line for a in ("--ignore-readiness", i)]
    code, err = _apply(capsys, *args, "-y", str(saved))
    if refused:
        _ok(err)
        assert code != 0 and "waives the readiness checks" in err and "nothing was changed" in err, err
        if in_file:
            assert "--ignore-readiness " + in_file[0] in err
    else:  # past the waiver check, on to Docker (which the fixture refuses)
        assert "waives" not in err and "Docker was reached" in err, err
