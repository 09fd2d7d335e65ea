"""observe/tokenizer_vocab.py: the ordinary token ids of a model folder's tokenizer.json (BPE and
Unigram), added and byte tokens left out, and every other shape of file an empty list with the
reason, never an exception."""

from __future__ import annotations

import json
import os

import pytest

from aigo_apply.observe.tokenizer_vocab import vocabulary


def write(folder, data) -> None:
    (folder / "tokenizer.json").write_text(json.dumps(data))


def test_bpe_and_unigram_vocabularies_without_added_and_byte_tokens(tmp_path):
    write(tmp_path, {"model": {"vocab": {"a": 0, "b": 1, "<0x0A>": 2, "c": 3}}, "added_tokens": [{"id": 0}]})
    assert vocabulary(tmp_path) == ([1, 3], "")
    write(tmp_path, {"model": {"vocab": [["x", 0.0], ["y", -1.0], "junk"]}})
    assert vocabulary(tmp_path) == ([0, 1], "")


@pytest.mark.parametrize(
    "data, expected",
    [
        ([], []),
        ({"model": "x"}, []),
        ({"model": {"vocab": {"a": True, "b": "1"}}}, []),
        ({"model": {"vocab": {"a": 1}}, "added_tokens": 5}, [1]),  # an odd added list is no list
        ({"model": {"vocab": {"a": 1}}, "added_tokens": [{"id": [1]}]}, [1]),
    ],
)
def test_other_shapes_are_read_as_far_as_they_go_never_raising(tmp_path, data, expected):
    write(tmp_path, data)
    ids, why = vocabulary(tmp_path)
    assert ids == expected and (ids or "no vocabulary" in why)


def test_no_file_a_fifo_and_a_broken_file_say_why(tmp_path):
    assert vocabulary(tmp_path)[0] == [] and "tokenizer.json" in vocabulary(tmp_path)[1]
    os.mkfifo(tmp_path / "tokenizer.json")
    ids, why = vocabulary(tmp_path)
    assert ids == [] and why.startswith(f"{tmp_path / 'tokenizer.json'} is a FIFO (named pipe), not a regular file")
    (tmp_path / "tokenizer.json").unlink()
    (tmp_path / "tokenizer.json").write_text("{not json")
    assert vocabulary(tmp_path)[0] == []
