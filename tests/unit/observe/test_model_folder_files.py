"""Files of a model's or adapter's folder are untrusted input (a config from a shared repository names
the folder): observe/ reads each one (config.json, adapter_config.json, tokenizer.json, the index,
safetensors and GGUF headers) only when it is a regular file inside the folder's tree (a Hugging Face
cache snapshot's links into ../../blobs refused), opened without waiting and read up to a limit of its
kind. A FIFO, /dev/zero, an oversized file or a link to a JSON elsewhere on the host is a problem of
that model in words, never a hang, a traceback or a value of a host file in the plan.

A reader that waits on a FIFO fails these tests instead of hanging them: each FIFO read runs in a
thread with a deadline, and a writer is opened afterwards to let a stuck reader go. /dev/zero is read
in a child process with a memory limit, so a reader without a limit fails fast and harmlessly."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from aigo_apply.observe import gguf, model_files
from aigo_apply.observe.adapter_files import read_adapter
from aigo_apply.observe.local_sources import local_source_problems
from aigo_apply.observe.model_files import MAX_CONFIG, model_facts, read_config
from aigo_apply.observe.tokenizer_vocab import vocabulary

DEADLINE_S = 10.0
CONFIG = {"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8, "torch_dtype": "float16"}
PEFT = {"r": 8, "target_modules": ["q_proj"], "base_model_name_or_path": "org/base"}
HOST_JSON = {"r": 16, "quantization_config": {"quant_method": "from-a-host-file"}, "model": {"vocab": {"a": 5}}}


def bounded(call: Any, *fifos: Path) -> Any:
    """call() within DEADLINE_S; a call still waiting (on a FIFO) fails the test, and each FIFO gets a
    writer that closes at once, so the stuck reader sees end of file and its thread ends."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = call()
        except BaseException as exc:  # handed to the test below
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(DEADLINE_S)
    if thread.is_alive():
        for fifo in fifos:
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        thread.join(DEADLINE_S)
        pytest.fail(f"the read waited on a FIFO for more than {DEADLINE_S:g} s")
    if "error" in out:
        raise out["error"]
    return out["value"]


def model_folder(folder: Path, config: Any = CONFIG) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    header = json.dumps({"w": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}}).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 4)
    return folder


def spec(folder: Path) -> dict[str, Any]:
    return {"source": {"path": str(folder)}, "model_dir": str(folder), "gpus": [0]}


def host_json(tmp_path: Path) -> Path:
    outside = tmp_path / "host" / "settings.json"
    outside.parent.mkdir()
    outside.write_text(json.dumps(HOST_JSON))
    return outside


# -- config.json ------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["inside", "outside"])
def test_a_config_json_that_is_or_leads_to_a_fifo_is_a_problem_not_a_hang(tmp_path, where):
    folder = model_folder(tmp_path / "m3", config=None)
    fifo = folder / "pipe" if where == "inside" else tmp_path / "pipe"
    os.mkfifo(fifo)
    os.symlink(fifo, folder / "config.json")
    assert bounded(lambda: read_config(folder), fifo) is None
    facts = bounded(lambda: model_facts(spec(folder)), fifo)
    assert facts["config"] is None and "config.json" in facts["problem"]
    assert ("a FIFO" if where == "inside" else "outside the folder") in facts["problem"]
    (problem,) = bounded(lambda: local_source_problems({"chat": spec(folder)}), fifo)["chat"]
    assert "config.json" in problem and "holds no config.json" not in problem


def test_a_config_json_that_is_a_fifo_itself_is_a_fifo_in_words(tmp_path):
    folder = model_folder(tmp_path / "m", config=None)
    os.mkfifo(folder / "config.json")
    facts = bounded(lambda: model_facts(spec(folder), weights_too=False), folder / "config.json")
    assert facts["config"] is None
    (problem,) = local_source_problems({"chat": spec(folder)})["chat"]
    assert "config.json is a FIFO (named pipe), not a regular file" in problem and "replace it" in problem


def _in_child(code: str) -> subprocess.CompletedProcess[str]:
    """`code` run in a child Python allowed 1 GiB of address space: a reader without a limit meets
    MemoryError within a second instead of eating the machine's memory."""
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
    return subprocess.run(
        [sys.executable, "-c", limit + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_files_that_lead_to_dev_zero_are_refused_unread(tmp_path):
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero here")
    model = model_folder(tmp_path / "m", config=None)
    os.symlink("/dev/zero", model / "config.json")
    os.symlink("/dev/zero", model / "tokenizer.json")
    os.symlink("/dev/zero", model / "model.safetensors.index.json")
    adapter = tmp_path / "a"
    adapter.mkdir()
    os.symlink("/dev/zero", adapter / "adapter_config.json")
    (adapter / "adapter_model.safetensors").write_bytes(b"")
    done = _in_child(
        f"""
        import json
        from pathlib import Path
        from aigo_apply.observe.adapter_files import read_adapter
        from aigo_apply.observe.model_files import model_facts
        from aigo_apply.observe.tokenizer_vocab import vocabulary
        facts = model_facts({{"model_dir": {str(model)!r}}})
        print(json.dumps([facts["problem"], vocabulary({str(model)!r})[1], read_adapter(Path({str(adapter)!r})).problem]))
        """
    )
    assert done.returncode == 0, done.stderr[-2000:]
    problems = json.loads(done.stdout)
    assert all("is a symlink to /dev/zero, outside the folder" in p for p in problems), problems


def test_an_oversized_config_json_is_refused_unread(tmp_path):
    folder = model_folder(tmp_path / "m", config=None)
    (folder / "config.json").write_bytes(json.dumps(CONFIG).encode() + b" " * MAX_CONFIG)  # valid JSON, too big
    assert read_config(folder) is None
    facts = model_facts(spec(folder))
    assert facts["config"] is None and f"is larger than {MAX_CONFIG >> 20} MiB" in facts["problem"]
    (problem,) = local_source_problems({"chat": spec(folder)})["chat"]
    assert "config.json is larger than" in problem


def test_a_config_json_linked_to_a_json_elsewhere_on_the_host_is_not_read(tmp_path):
    folder = model_folder(tmp_path / "m", config=None)
    os.symlink(host_json(tmp_path), folder / "config.json")
    facts = model_facts(spec(folder), weights_too=False)
    assert facts["config"] is None  # no quant_method of a host file in the plan
    (problem,) = local_source_problems({"chat": spec(folder)})["chat"]
    assert "is a symlink to" in problem and "outside the folder" in problem and "from-a-host-file" not in problem


def test_a_config_json_too_deep_for_json_is_a_problem_not_a_traceback(tmp_path):
    folder = model_folder(tmp_path / "m", config=None)
    (folder / "config.json").write_text("[" * 200_000 + "]" * 200_000)
    facts = model_facts(spec(folder))
    assert facts["config"] is None and "nests deeper than any real config.json" in facts["problem"]


# -- links a model folder holds as a matter of course --------------------------------------------------


def test_links_inside_the_folder_are_read_and_a_snapshots_into_blobs_are_not(tmp_path):
    """A Hugging Face cache snapshot's files are links into ../../blobs, which the engine (the snapshot
    mounted alone) could not follow either; and a committed `blobs -> /` would open the whole host."""
    repo = tmp_path / "cache" / "models--org--m"
    snapshot = repo / "snapshots" / "abc123"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "c0ffee").write_text(json.dumps(CONFIG))
    model_folder(snapshot, config=None)
    os.symlink("../../blobs/c0ffee", snapshot / "config.json")
    assert read_config(snapshot) is None
    assert "outside the folder" in local_source_problems({"chat": spec(snapshot)})["chat"][0]
    (repo / "blobs" / "c0ffee").unlink()
    (repo / "blobs").rmdir()
    (repo / "blobs").symlink_to("/")
    os.unlink(snapshot / "config.json")
    os.symlink("../../blobs/etc/passwd", snapshot / "config.json")
    assert "outside the folder" in local_source_problems({"chat": spec(snapshot)})["chat"][0]
    inner = model_folder(tmp_path / "own", config=None)
    (inner / "real").mkdir()
    (inner / "real" / "config.json").write_text(json.dumps(CONFIG))
    os.symlink("real/config.json", inner / "config.json")
    facts = model_facts(spec(inner))
    assert facts["config"] == CONFIG and facts["weights"] == 4 and facts["problem"] is None


def test_another_repos_blobs_are_outside_the_folder(tmp_path):
    cache = tmp_path / "cache"
    snapshot = cache / "models--org--m" / "snapshots" / "abc"
    (cache / "models--org--other" / "blobs").mkdir(parents=True)
    (cache / "models--org--other" / "blobs" / "x").write_text(json.dumps(CONFIG))
    model_folder(snapshot, config=None)
    os.symlink("../../../models--org--other/blobs/x", snapshot / "config.json")
    assert read_config(snapshot) is None
    assert "outside the folder" in local_source_problems({"chat": spec(snapshot)})["chat"][0]


# -- weights: safetensors headers, the index, GGUF ---------------------------------------------------


def test_a_safetensors_file_that_is_a_fifo_is_a_problem_not_a_hang(tmp_path):
    folder = model_folder(tmp_path / "m")
    (folder / "model.safetensors").unlink()
    os.mkfifo(folder / "model.safetensors")
    facts = bounded(lambda: model_facts(spec(folder)), folder / "model.safetensors")
    assert facts["weights"] is None and "model.safetensors is a FIFO (named pipe)" in facts["problem"]


def test_a_safetensors_header_longer_than_its_file_is_refused_unread(tmp_path):
    folder = model_folder(tmp_path / "m")
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", 50 * 1024 * 1024) + b"{}")
    facts = model_facts(spec(folder))
    assert facts["weights"] is None and "is not a safetensors header" in facts["problem"]


def test_an_index_that_names_files_outside_the_folder_reads_none_of_them(tmp_path):
    folder = model_folder(tmp_path / "m")
    elsewhere = model_folder(tmp_path / "elsewhere")
    index = {"weight_map": {"w": str(elsewhere / "model.safetensors")}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    facts = model_facts(spec(folder))
    assert facts["weights"] is None and "outside the folder" in facts["problem"]
    (folder / "model.safetensors.index.json").write_text("[1]")  # another shape: words, not AttributeError
    assert "holds no weight_map" in model_facts(spec(folder))["problem"]


def test_a_gguf_file_that_is_a_fifo_is_a_problem_not_a_hang(tmp_path):
    os.mkfifo(tmp_path / "q.gguf")
    gguf_spec = {"model_dir": str(tmp_path), "model_file": "q.gguf", "gpus": [0]}
    facts = bounded(lambda: model_facts(gguf_spec), tmp_path / "q.gguf")
    assert facts.get("weights") is None and "q.gguf is a FIFO (named pipe)" in facts["problem"]
    with pytest.raises(ValueError, match="not a regular file"):
        bounded(lambda: gguf.read_metadata(tmp_path / "q.gguf"), tmp_path / "q.gguf")


def test_gguf_arrays_nested_past_any_real_file_are_refused_in_words(tmp_path):
    key = b"general.x"
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key + struct.pack("<I", 9)
    nested = struct.pack("<IQ", 9, 1) * 5000  # an array of an array of ... (old reader: RecursionError)
    (tmp_path / "deep.gguf").write_bytes(head + nested)
    with pytest.raises(ValueError, match="deep"):
        gguf.read_metadata(tmp_path / "deep.gguf")
    huge_skip = head[:-4] + struct.pack("<I", 9) + struct.pack("<IQ", 10, (1 << 64) - 1)  # seek past any file
    (tmp_path / "skip.gguf").write_bytes(huge_skip)
    with pytest.raises(ValueError, match="ends early"):
        gguf.read_metadata(tmp_path / "skip.gguf")


# -- adapters and tokenizers ------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["inside", "outside"])
def test_an_adapter_config_that_leads_to_a_fifo_is_a_problem_not_a_hang(tmp_path, where):
    folder = tmp_path / "a"
    folder.mkdir()
    (folder / "adapter_model.safetensors").write_bytes(b"")
    fifo = folder / "pipe" if where == "inside" else tmp_path / "pipe"
    os.mkfifo(fifo)
    os.symlink(fifo, folder / "adapter_config.json")
    found = bounded(lambda: read_adapter(folder), fifo)
    assert found.rank is None and "adapter_config.json" in str(found.problem)
    assert ("a FIFO" if where == "inside" else "outside the folder") in str(found.problem)


def test_an_adapter_config_linked_to_a_host_json_is_not_read(tmp_path):
    folder = tmp_path / "a"
    folder.mkdir()
    (folder / "adapter_model.safetensors").write_bytes(b"")
    os.symlink(host_json(tmp_path), folder / "adapter_config.json")
    found = read_adapter(folder)
    assert found.rank is None and "outside the folder" in str(found.problem)  # not r: 16 from the host file
    (folder / "adapter_config.json").unlink()
    (folder / "real.json").write_text(json.dumps(PEFT))
    os.symlink("real.json", folder / "adapter_config.json")  # a link inside the folder is ordinary
    assert read_adapter(folder).rank == 8 and read_adapter(folder).problem is None


def test_a_tokenizer_json_linked_out_of_the_folder_is_not_read(tmp_path):
    folder = model_folder(tmp_path / "m")
    os.symlink(host_json(tmp_path), folder / "tokenizer.json")
    ids, why = vocabulary(folder)
    assert ids == [] and "outside the folder" in why


def test_every_refusal_is_a_value_error_naming_the_file(tmp_path):
    """What callers catch: Unreadable is a ValueError, so a refusal is never an unexpected exception."""
    folder = model_folder(tmp_path / "m")
    os.mkfifo(folder / "x.json")
    with pytest.raises(ValueError, match="x.json is a FIFO"):
        bounded(lambda: model_files.read_folder_json(folder, "x.json", 1024), folder / "x.json")
