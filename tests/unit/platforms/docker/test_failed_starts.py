"""The evidence of a failed start: kept whole (within bounds), redacted, private, the newest few per model."""

from __future__ import annotations

import json
import os
import stat
from datetime import UTC, datetime, timedelta

import pytest

from aigo_apply.errors import AigoError
from aigo_apply.platforms.docker import failed_starts
from aigo_apply.platforms.secrets import remember


def _keep(state, alias="chat", lines=("boot", "ValueError: bad"), now=None, why="exited with code 1"):
    return failed_starts.keep(
        state,
        alias,
        container=f"aigo-lab-{alias}",
        image="vllm/vllm-openai:v0.31.0",
        command=("vllm", "serve", "/model", "--served-model-name", alias),
        why=why,
        exit_code=1,
        log_lines=iter(lines),
        now=now,
    )


def test_the_whole_log_and_what_it_was_are_kept_and_read_back(tmp_path):
    lines = [f"line {i}" for i in range(500)] + ["ValueError: the cause", *[f"  frame {i}" for i in range(60)]]
    record = _keep(tmp_path, lines=lines)
    assert record.log.read_text().splitlines() == lines  # every line, not the last 20
    again = failed_starts.newest(tmp_path, "chat")
    assert again is not None and again.error == "ValueError: the cause" and again.lines == len(lines)
    assert again.command == ("vllm", "serve", "/model", "--served-model-name", "chat")
    assert failed_starts.read_log(again).splitlines() == lines
    for path in record.log.parent.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_secrets_are_redacted_in_the_log_the_reason_and_the_command(tmp_path):
    remember("s3cr3t-token-value")
    record = _keep(
        tmp_path,
        lines=["token is s3cr3t-token-value", "RuntimeError: auth s3cr3t-token-value refused"],
        why="exited: s3cr3t-token-value",
    )
    folder = record.log.parent
    text = "".join(p.read_text() for p in folder.iterdir())
    assert "s3cr3t-token-value" not in text and "***" in text


def test_bounded_by_lines_line_length_and_bytes_keeping_the_end(tmp_path):
    many = (f"{i} " + "y" * 20_000 for i in range(failed_starts.MAX_LINES * 3))
    record = _keep(tmp_path, lines=many)
    kept = record.log.read_text().splitlines()
    assert record.log.stat().st_size <= failed_starts.MAX_LOG_BYTES
    assert all(len(line) <= failed_starts.MAX_LINE_CHARS for line in kept)
    assert kept[-1].startswith(f"{failed_starts.MAX_LINES * 3 - 1} ")  # the end is what is kept


def test_only_the_newest_few_per_model_are_kept(tmp_path):
    start = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
    for i in range(failed_starts.KEEP + 3):
        _keep(tmp_path, lines=[f"ValueError: attempt {i}"], now=start + timedelta(minutes=i))
    _keep(tmp_path, alias="other", now=start)
    folder = tmp_path / failed_starts.FOLDER / "chat"
    assert len(list(folder.glob("*.log"))) == failed_starts.KEEP == len(list(folder.glob("*.json")))
    newest = failed_starts.newest(tmp_path, "chat")
    assert newest is not None and newest.error == f"ValueError: attempt {failed_starts.KEEP + 2}"
    assert failed_starts.newest(tmp_path, "other") is not None


def test_nothing_kept_reads_as_none_and_a_damaged_record_is_skipped(tmp_path):
    assert failed_starts.newest(tmp_path, "chat") is None
    _keep(tmp_path, lines=["ValueError: first"], now=datetime(2026, 1, 1, tzinfo=UTC))
    later = _keep(tmp_path, lines=["ValueError: second"], now=datetime(2026, 1, 2, tzinfo=UTC))
    later.log.with_suffix(".json").write_text("{not json")
    found = failed_starts.newest(tmp_path, "chat")
    assert found is not None and found.error == "ValueError: first"


def test_a_link_in_place_of_a_record_or_log_is_not_followed(tmp_path):
    record = _keep(tmp_path)
    secret = tmp_path / "elsewhere"
    secret.write_text(json.dumps({"alias": "chat"}))
    record.log.unlink()
    os.symlink(secret, record.log)
    with pytest.raises(AigoError, match="cannot read the kept log"):
        failed_starts.read_log(record)


@pytest.mark.parametrize("alias", ["../x", "a/b", "", ".hidden"])
def test_a_name_that_would_leave_the_folder_is_refused(tmp_path, alias):
    with pytest.raises(AigoError):
        _keep(tmp_path, alias=alias)
