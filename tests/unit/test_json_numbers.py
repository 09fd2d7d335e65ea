"""A number read from one of aigo-apply's own JSON files (aigo.lock, a saved plan, a failed start's
record) is a number of the kind it must be: JSON's `true` is no 1 (Python's bool is an int), nor
is `1.0` the integer version 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aigo_apply.errors import AigoError, PlanFileError
from aigo_apply.plan import lockfile
from aigo_apply.plan.types import DownloadSpec
from aigo_apply.platforms.docker import failed_starts


@pytest.mark.parametrize("version", ["true", "1.0", '"1"', "null", "false", "[1]"])
def test_a_lock_whose_version_is_not_the_integer_1_is_refused(version):
    raw = b'{"version": ' + version.encode() + b', "images": {}, "models": {}}'
    with pytest.raises(AigoError, match="not an aigo-apply lock file of version 1"):
        lockfile.parse(raw, Path("aigo.lock"))
    assert lockfile.parse(b'{"version": 1}', Path("aigo.lock"))["models"] == {}


@pytest.mark.parametrize("count", [True, False, 1.5, "5"])
def test_a_saved_downloads_byte_count_is_a_whole_number(count):
    spec = DownloadSpec("org/m", "main", None, "/store/org--m/main", ("m",), "a" * 40, 5).to_spec()
    assert DownloadSpec.from_spec(spec).bytes == 5
    with pytest.raises(PlanFileError, match="damaged or edited"):
        DownloadSpec.from_spec({**spec, "bytes": count})


def test_a_failed_starts_exit_code_and_line_count_are_integers_or_nothing(tmp_path):
    record = failed_starts.keep(
        tmp_path, "chat", container="c", image="i", command=("vllm",), why="exited", exit_code=1, log_lines=iter(["x"])
    )
    meta = record.log.with_suffix(".json")
    data = json.loads(meta.read_text())
    meta.write_text(json.dumps({**data, "exit_code": True, "lines": True}))
    found = failed_starts.newest(tmp_path, "chat")
    assert found is not None and found.exit_code is None and found.lines == 0
