"""Numbers read from files on this machine are bounded where they are parsed: a download marker whose
size has 401 digits (or 5000, or is negative, a float, 1e999, NaN or text) is no marker, and `models list` shows its folder as invalid with why, never a traceback
(a size of 401 digits passed the marker's shape and overflowed into a float); a model's config.json or
safetensors header with such numbers is unknown with the reason; a GGUF header whose sizes are float32
NaN or infinity (or negative) gives no size instead of an int() traceback."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from aigo_apply.app.models import listing, render
from aigo_apply.desired.model_store import MARKER
from aigo_apply.observe import gguf
from aigo_apply.observe.docker_answers import container_list
from aigo_apply.observe.markers import marker_or_why, read_marker
from aigo_apply.observe.model_files import model_facts

SIZES = {
    "401 digits": "9" * 401,
    "5000 digits": "9" * 5000,
    "a negative": "-5",
    "a float": "1.5",
    "1e999": "1e999",
    "NaN": "NaN",
    "text": '"12 GB"',
}


class NoModels:
    def specs(self) -> dict:
        return {}


def _marker(store: Path, size: str) -> Path:
    folder = store / "org--m" / "main"
    folder.mkdir(parents=True)
    (folder / MARKER).write_text(
        '{"repo": "org/m", "revision": "main", "commit": "' + "1" * 40 + '", "kind": "model", '
        '"complete_repo": true, "files": {"model.safetensors": ' + size + "}}"
    )
    return folder


@pytest.mark.parametrize("size", sorted(SIZES))
def test_a_marker_with_a_size_that_is_no_byte_count_is_shown_as_invalid(tmp_path, size):
    store = tmp_path / "store"
    folder = _marker(store, SIZES[size])
    assert read_marker(folder) is None
    marker, why = marker_or_why(folder)
    assert marker is None and why
    (row,) = listing(NoModels(), store)
    assert row["folder"] == str(folder) and row["invalid"] == why
    text = render([row])
    assert text.startswith("invalid ") and str(folder) in text and "models pull" in text, text
    json.dumps(row)  # the JSON view's rows


def test_a_good_marker_still_lists(tmp_path):
    store = tmp_path / "store"
    folder = _marker(store, "16000000000")
    (row,) = listing(NoModels(), store)
    assert "invalid" not in row and row["bytes"] == 16_000_000_000
    assert "16.00 GB in 1 files" in render([row]) and str(folder) in render([row])


def test_models_list_on_the_command_line(tmp_path, capsys):
    from aigo_apply.cli.main import main

    store = tmp_path / "store"
    _marker(store, "9" * 401)
    config = tmp_path / "aigo.yaml"
    config.write_text(
        "version: 1\nproject: lab\n"
        f"defaults: {{models_dir: {store}}}\n"
        "engines:\n  vllm: {image: aigo-stub-engine, image_tag: '1'}\n"
        "models:\n  m: {source: {repo: org/m, revision: main}, context_length: 4096, gpus: none}\n"
    )
    for output in ("text", "json"):
        with pytest.raises(SystemExit) as exit_info:
            main(["models", "list", "-f", str(config), "--output", output])
        out, err = capsys.readouterr()
        assert exit_info.value.code == 0 and "Traceback" not in err, err
        assert "invalid" in out and "digits" in out, out


NUMBERS = {
    "401 digits": "9" * 401,
    "5000 digits": "9" * 5000,
    "1e999": "1e999",
    "a float of 400 digits": "9" * 400 + ".0",
}


@pytest.mark.parametrize("number", sorted(NUMBERS))
def test_a_model_config_with_a_number_out_of_bounds_is_unknown_with_why(tmp_path, number):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text('{"num_hidden_layers": ' + NUMBERS[number] + ', "hidden_size": 8}')
    header = json.dumps({"w": {"dtype": "F16", "shape": [1], "data_offsets": [0, 2]}}).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0\0")
    facts = model_facts({"model_dir": str(folder)})
    assert facts["config"] is None and "config.json" in facts["problem"], facts
    assert facts["weights"] == 2


@pytest.mark.parametrize("number", sorted(NUMBERS))
def test_a_safetensors_header_with_offsets_out_of_bounds_is_unknown_with_why(tmp_path, number):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text('{"num_hidden_layers": 2}')
    header = ('{"w": {"dtype": "F16", "shape": [1], "data_offsets": [0, ' + NUMBERS[number] + "]}}").encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    facts = model_facts({"model_dir": str(folder)})
    assert facts["weights"] is None and "model.safetensors" in facts["problem"], facts


@pytest.mark.parametrize("offsets", [[5, 2], [-1, 2], [0.5, 2], ["0", "2"]])
def test_safetensors_offsets_that_are_no_byte_range_are_unknown(tmp_path, offsets):
    folder = tmp_path / "m"
    folder.mkdir()
    header = json.dumps({"w": {"dtype": "F16", "shape": [1], "data_offsets": offsets}}).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    facts = model_facts({"model_dir": str(folder)})
    assert facts["weights"] is None and "byte range" in facts["problem"], facts


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), -4.0])
def test_gguf_sizes_that_are_no_finite_count_give_no_size(value):
    meta = {
        "general.architecture": "llama",
        "llama.block_count": value,
        "llama.attention.head_count": 8,
        "llama.embedding_length": 64,
        "llama.attention.key_length": value,
    }
    config, notes = gguf.as_config(meta)
    assert config is None and "lacks llama.block_count" in notes[0]
    meta["llama.block_count"] = 2
    config, _ = gguf.as_config(meta)
    assert config is not None and "head_dim" not in config
    meta["llama.attention.head_count"] = [value, 8.0]
    config, _ = gguf.as_config(meta)
    assert config is not None and config["num_attention_heads"] == 8


@pytest.mark.parametrize("created", [10**400, -1, 2**63, 1.5, "2024-01-01", True, None])
def test_a_container_time_that_is_no_unix_time_is_left_out(created):
    """`logs` orders containers by their Created time with float(): 10**400 overflowed it."""
    (container,) = container_list([{"Id": "a" * 64, "Created": created}])
    assert "Created" not in container
    (container,) = container_list([{"Id": "a" * 64, "Created": 1_700_000_000}])
    assert container["Created"] == 1_700_000_000 and float(container["Created"])
