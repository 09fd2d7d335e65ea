"""The one bounded reader (aigo_apply/safe_read.py), held for every kind of file it reads and for every
caller that reads a file from outside: a FIFO or device is refused without waiting,
a file over its kind's limit is refused before it is read (a committed link to a 1 GiB file took
`plan` to 830 MiB), a link is followed only where the kind says, and JSON or YAML nested a hundred
thousand levels deep, holding a number of hundreds of digits or 1e999, or multiplying through aliases,
is one clear error naming the file, never RecursionError, a digit-limit ValueError or a hang."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
import yaml

from aigo_apply import safe_read
from aigo_apply.errors import AigoError
from aigo_apply.safe_read import BadData, Kind, Unreadable

KINDS = {name: value for name, value in vars(safe_read).items() if isinstance(value, Kind)}
GIB = 1 << 30


def _within(seconds: float, work: Callable[[], Any]) -> Any:
    """`work()`'s result or exception, failing the test when it takes longer (a FIFO that waits)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # handed back to the test
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    began = time.monotonic()
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still reading after {seconds} s (a FIFO opened, or a huge file read?)"
    assert time.monotonic() - began < seconds
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _sparse(path: Path, size: int) -> Path:
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def test_every_kind_is_tested_and_bounded():
    assert set(KINDS) >= {"CONFIG", "LOCK", "PLAN", "MODEL_DEFINITION", "KUBECONFIG", "KUBE_CREDENTIAL", "SECRET"}
    assert "MARKER" in KINDS
    for kind in KINDS.values():
        assert 0 < kind.limit <= 64 << 20 and 1 <= kind.depth <= 64 and kind.fix and kind.what
    assert {f.name for f in fields(Kind)} == {"what", "limit", "links", "fix", "depth"}


# -- the rules, for every kind --------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(KINDS))
def test_a_fifo_is_refused_without_waiting_through_a_link_too(tmp_path, name):
    kind = KINDS[name]
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(Unreadable) as caught:
        _within(3, lambda: safe_read.read(fifo, kind))
    assert caught.value.why == "kind" and "FIFO" in str(caught.value) and str(fifo) in str(caught.value)
    link = tmp_path / "link"
    link.symlink_to(fifo)
    with pytest.raises(Unreadable) as caught:
        _within(3, lambda: safe_read.read(link, kind))
    assert caught.value.why == ("kind" if kind.links else "link")


@pytest.mark.parametrize("name", sorted(KINDS))
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null", "/dev/urandom"])
def test_a_device_or_a_folder_is_never_read(tmp_path, name, device):
    with pytest.raises(Unreadable) as caught:
        _within(3, lambda: safe_read.read(Path(device), KINDS[name]))
    assert caught.value.why == "kind" and "a device" in str(caught.value)
    with pytest.raises(Unreadable, match="is a directory, not a regular file"):
        safe_read.read(tmp_path, KINDS[name])


@pytest.mark.parametrize("name", sorted(KINDS))
def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path, name):
    kind = KINDS[name]
    huge = _sparse(tmp_path / "huge", GIB)  # reading it would take a GiB of memory
    with pytest.raises(Unreadable) as caught:
        _within(3, lambda: safe_read.read(huge, kind))
    assert caught.value.why == "size" and safe_read.size_text(kind.limit) in str(caught.value)
    over = _sparse(tmp_path / "over", kind.limit + 1)
    with pytest.raises(Unreadable, match="is larger than"):
        safe_read.read(over, kind)
    at = tmp_path / "at"
    at.write_bytes(b"x" * 100)
    assert safe_read.read(at, kind) == b"x" * 100


@pytest.mark.parametrize("name", sorted(KINDS))
def test_a_link_is_followed_only_where_the_kind_says(tmp_path, name):
    kind = KINDS[name]
    real = tmp_path / "real"
    real.write_bytes(b"{}")
    link = tmp_path / "link"
    link.symlink_to(real)
    if kind.links:
        assert safe_read.read(link, kind) == b"{}"
    else:
        with pytest.raises(Unreadable) as caught:
            safe_read.read(link, kind)
        assert caught.value.why == "link" and f"(to {real})" in str(caught.value)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_a_missing_file_is_none_or_a_refusal(tmp_path, name):
    assert safe_read.read(tmp_path / "nope", KINDS[name], missing_ok=True) is None
    with pytest.raises(Unreadable) as caught:
        safe_read.read(tmp_path / "nope", KINDS[name])
    assert caught.value.missing and str(tmp_path / "nope") in str(caught.value)


def test_a_file_swapped_after_it_was_judged_is_refused(tmp_path):
    path, other = tmp_path / "f", tmp_path / "other"
    path.write_bytes(b"first")
    other.write_bytes(b"second")
    seen = []

    def swap(info: os.stat_result) -> None:
        if not seen:
            os.replace(other, path)  # between the stat and the open
        seen.append(info)
        return None

    with pytest.raises(Unreadable, match="was replaced while it was read"):
        with safe_read.opened(path, safe_read.LOCK, judge=swap):
            pass


def test_a_file_that_grows_while_it_is_read_is_still_bounded(tmp_path, monkeypatch):
    path = tmp_path / "f"
    path.write_bytes(b"x" * (safe_read.SECRET.limit + 10))
    real = os.fstat

    class Small:  # what fstat said before the file grew
        def __init__(self, info: os.stat_result):
            self.st_mode, self.st_dev, self.st_ino, self.st_size = info.st_mode, info.st_dev, info.st_ino, 2

    monkeypatch.setattr(os, "stat", lambda p: Small(real(os.open(p, os.O_RDONLY))))
    monkeypatch.setattr(os, "lstat", lambda p: Small(real(os.open(p, os.O_RDONLY))))
    monkeypatch.setattr(os, "fstat", lambda fd: Small(real(fd)))
    with pytest.raises(Unreadable, match="is larger than 64 KiB"):
        safe_read.read(path, safe_read.SECRET)


def test_an_error_of_the_callers_block_is_its_own():
    with pytest.raises(ZeroDivisionError):
        with safe_read.opened(Path(__file__), safe_read.PLAN):
            raise ZeroDivisionError


# -- parsing: depth, numbers, aliases -------------------------------------------------------------

NUMBERS = {
    "401 digits": "9" * 401,
    "5000 digits (over Python's own limit)": "9" * 5000,
    "a negative 401 digits": "-" + "9" * 401,
    "1e999": "1e999",
    "-1e999": "-1e999",
    "a float of 5000 digits": "9" * 5000 + ".5",
    "NaN": "NaN",
    "Infinity": "Infinity",
    "-Infinity": "-Infinity",
}


@pytest.mark.parametrize("name", sorted(NUMBERS))
def test_a_number_out_of_bounds_is_bad_data_in_words(name):
    with pytest.raises(BadData) as caught:
        safe_read.json_value(f'{{"size": {NUMBERS[name]}}}')
    assert (
        "digits" in str(caught.value)
        or "not a finite number" in str(caught.value)
        or "not a number" in str(caught.value)
    )
    assert len(str(caught.value)) < 200


def test_bounded_numbers_still_read():
    assert safe_read.json_value('{"a": 123456789012345678901234567890, "b": -1.5e300, "c": 0}') == {
        "a": 123456789012345678901234567890,
        "b": -1.5e300,
        "c": 0,
    }
    assert safe_read.json_value("[NaN, Infinity, 1]", constants=True) == [None, None, 1]


@pytest.mark.parametrize("deep", [33, 1000, 100_000])
def test_deep_nesting_is_bad_data_never_recursion_error(deep):
    for text in ("[" * deep + "]" * deep, '{"a":' * deep + "1" + "}" * deep):
        with pytest.raises(BadData, match="nests deeper than 32 levels"):
            safe_read.json_value(text, 32)
    assert safe_read.json_value("[" * 32 + "]" * 32, 32) is not None


def test_other_refusals_say_where():
    with pytest.raises(BadData) as caught:
        safe_read.json_value('{\n "a": 1,\n "a": 2}', unique=True)
    assert "has the key 'a' twice" in str(caught.value)
    with pytest.raises(BadData) as caught:
        safe_read.json_value('{\n "a": }')
    assert (caught.value.line, caught.value.column) == (2, 7) and str(caught.value).startswith("is not JSON")
    with pytest.raises(BadData, match="is not UTF-8 text"):
        safe_read.json_value(b'{"a": "\xff"}')


def test_aliases_that_multiply_are_refused_before_anything_walks_them():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]  # 10**10 values
    bomb = yaml.safe_load("\n".join(lines))
    with pytest.raises(BadData, match="holds more than"):
        _within(5, lambda: safe_read.check_tree(bomb, 64, safe_read.MAX_VALUES))


# -- every caller that reads a file from outside --------------------------------------------------


def _lock(path: Path) -> Any:
    from aigo_apply.platforms import lock_file

    return lock_file.read(path)


def _plan(path: Path) -> Any:
    from aigo_apply.app.saved_plan import read_plan

    return read_plan(path)


def _definition(path: Path) -> Any:
    from aigo_apply.edit.portable import read_definition

    return read_definition(str(path))


def _kubeconfig(path: Path) -> Any:
    from aigo_apply.adapters.kubeconfig import read_kubeconfig

    return read_kubeconfig(str(path))


def _secret(path: Path) -> Any:
    from aigo_apply.desired.types import SecretRef
    from aigo_apply.platforms.secrets import resolve

    return resolve(SecretRef("from_file", str(path)), "models.m.env.MY_SECRET")


def _marker(path: Path) -> Any:
    from aigo_apply.observe.markers import marker_or_why

    marker, why = marker_or_why(path.parent)
    assert marker is None and why, (marker, why)  # a marker that is not one reads as none, with why
    raise AigoError(f"{path}: {why}")


def _model_config(path: Path) -> Any:
    from aigo_apply.observe.model_files import MAX_CONFIG, read_folder_json

    try:
        return read_folder_json(path.parent, path.name, MAX_CONFIG)
    except ValueError as exc:  # model_files' Unreadable: a plan warning naming the file
        raise AigoError(str(exc)) from None


def _config(path: Path) -> Any:
    from aigo_apply.config.yaml_source import load

    source = load(path, str(path))
    if source.problems:  # what validate reports at its line (a date that is none: "quote it")
        raise AigoError("; ".join(p.format() for p in source.problems))
    return source


# name: (reader, the file's name, whether it is JSON (else YAML), whether a FIFO is refused)
CALLERS: dict[str, tuple[Callable[[Path], Any], str, bool, bool]] = {
    "aigo.lock": (_lock, "aigo.lock", True, True),
    "a saved plan": (_plan, "plan.json", True, True),
    "a .baimodel": (_definition, "m.baimodel", False, True),
    "a kubeconfig": (_kubeconfig, "config", False, True),
    "a secret file": (_secret, "secret", False, True),
    "a download marker": (_marker, ".aigo-download.json", True, True),
    "a model's config.json": (_model_config, "config.json", True, True),
    "aigo.yaml (a pipe is read, within 10 s)": (_config, "aigo.yaml", False, False),
}


def _refused(caller: str, path: Path) -> str:
    reader = CALLERS[caller][0]
    with pytest.raises(AigoError) as caught:
        _within(12, lambda: reader(path))
    text = str(caught.value)
    assert str(path) in text or path.name in text, text
    return text


@pytest.mark.parametrize("caller", sorted(CALLERS))
def test_a_link_to_a_huge_file_is_refused_before_it_is_read(tmp_path, caller):
    huge = _sparse(tmp_path / "huge", 4 * GIB)
    path = tmp_path / CALLERS[caller][1]
    path.symlink_to(huge)
    said = _refused(caller, path)
    assert "larger than" in said or "is a symbolic link" in said, said  # refused either way, never read


@pytest.mark.parametrize("caller", sorted(CALLERS))
def test_a_huge_file_is_refused_before_it_is_read(tmp_path, caller):
    path = _sparse(tmp_path / CALLERS[caller][1], 4 * GIB)
    assert "larger than" in _refused(caller, path)


@pytest.mark.parametrize("caller", sorted(c for c in CALLERS if CALLERS[c][3]))
def test_a_fifo_or_a_link_to_a_device_is_refused_without_waiting(tmp_path, caller):
    path = tmp_path / CALLERS[caller][1]
    os.mkfifo(path)
    _refused(caller, path)
    path.unlink()
    path.symlink_to("/dev/zero")
    _refused(caller, path)


HOSTILE_JSON = {
    "100000 levels of lists": "[" * 100_000 + "]" * 100_000,
    "100000 levels of objects": '{"a":' * 100_000 + "1" + "}" * 100_000,
    "a number of 401 digits": '{"version": ' + "9" * 401 + "}",
    "a number of 5000 digits": '{"version": ' + "9" * 5000 + "}",
    "1e999": '{"version": 1e999}',
    "NaN": '{"version": NaN}',
}


@pytest.mark.parametrize("caller", sorted(c for c in CALLERS if CALLERS[c][2] and c != "a model's config.json"))
@pytest.mark.parametrize("content", sorted(HOSTILE_JSON))
def test_hostile_json_is_one_clear_error(tmp_path, caller, content):
    path = tmp_path / CALLERS[caller][1]
    path.write_text(HOSTILE_JSON[content], encoding="utf-8")
    _refused(caller, path)


@pytest.mark.parametrize("content", sorted(c for c in HOSTILE_JSON if c != "NaN"))
def test_a_hostile_model_config_is_a_warning_naming_it(tmp_path, content):
    path = tmp_path / "config.json"
    path.write_text(HOSTILE_JSON[content], encoding="utf-8")
    _refused("a model's config.json", path)


HOSTILE_YAML = {
    "100000 levels of flow lists": "[" * 100_000 + "]" * 100_000,
    "an integer of 5000 digits": "clusters: " + "9" * 5000,
    "a date that is none": "current-context: 2024-13-45",
}


@pytest.mark.parametrize("caller", ["a .baimodel", "a kubeconfig", "aigo.yaml (a pipe is read, within 10 s)"])
@pytest.mark.parametrize("content", sorted(HOSTILE_YAML))
def test_hostile_yaml_is_one_clear_error(tmp_path, caller, content):
    path = tmp_path / CALLERS[caller][1]
    path.write_text(HOSTILE_YAML[content], encoding="utf-8")
    _refused(caller, path)


def test_aigo_lock_is_never_read_through_a_link(tmp_path):
    from aigo_apply.platforms import lock_file

    real = tmp_path / "elsewhere.json"
    real.write_text(json.dumps({"version": 1, "images": {}, "models": {}}))
    (tmp_path / "aigo.lock").symlink_to(real)
    with pytest.raises(AigoError, match="is a symbolic link .*; the lock file is never read through one"):
        lock_file.read(tmp_path / "aigo.lock")
    (tmp_path / "aigo.lock").unlink()
    (tmp_path / "aigo.lock").write_bytes(real.read_bytes())
    assert lock_file.read(tmp_path / "aigo.lock") == {"version": 1, "images": {}, "models": {}}
