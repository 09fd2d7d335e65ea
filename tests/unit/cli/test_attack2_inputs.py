"""Second attacker pass, by class: env names that load code (beyond LD_*/PYTHON*), portable model
definitions (.baimodel) as hostile input, commands that rewrite or write files (FIFOs, symlinks,
file mode), `render` of a split GGUF file with a symlinked part, split-file names that are not
part i of n, and a model store that another account could write into."""

from __future__ import annotations

import os
import stat
import struct
import time

import pytest

from aigo_apply.config.env_names import refused_name
from aigo_apply.desired.model_store import gguf_parts

from helpers.cli import run_cli
from helpers.configs import model_folder, write_config

HEAD = 'version: 1\nproject: atk2\nengines:\n  vllm: {image: aigo-stub-engine, image_tag: "1"}\n'
MODEL = "  m1: {source: {path: m1}, context_length: 4096, gpus: none}\n"


def _config(tmp_path, models=MODEL, name="aigo.yaml", extra=""):
    model_folder(tmp_path / "m1")
    return write_config(tmp_path, HEAD + extra + "models:\n" + models, name)


@pytest.mark.parametrize(
    "name",
    [
        "CUDA_INJECTION64_PATH",
        "GCONV_PATH",
        "NCCL_NET_PLUGIN",
        "NCCL_TUNER_PLUGIN",
        "VLLM_NCCL_SO_PATH",
        "VLLM_CUDART_SO_PATH",
        "VLLM_LOGGING_CONFIG_PATH",
        "VLLM_TEST_FORCE_LOAD_FORMAT",
        "TRITON_LIBCUDA_PATH",
        "TRITON_PTXAS_PATH",
        "TRITON_CACHE_DIR",
        "TORCHINDUCTOR_CACHE_DIR",
        "LIBRARY_PATH",
        "CPATH",
        "HOME",
        "CC",
        "NODE_OPTIONS",
        "PERL5OPT",
    ],
)
def test_env_names_that_load_code_are_refused_at_their_line(tmp_path, name):
    assert refused_name(name)
    path = _config(tmp_path, models=f"  m1: {{source: {{path: m1}}, context_length: 4096, env: {{{name}: x}}}}\n")
    result = run_cli("validate", "-f", str(path))
    assert result.returncode == 1 and ":6:" in result.stderr and name in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("name", ["VLLM_LOGGING_LEVEL", "OMP_NUM_THREADS", "NCCL_DEBUG", "VLLM_ATTENTION_BACKEND"])
def test_ordinary_engine_settings_stay_allowed(name):
    assert refused_name(name) is None


def _definition(tmp_path, text, name="x.baimodel"):
    path = tmp_path / name
    path.write_text("format: aigo-apply/model/1\n" + text, encoding="utf-8")
    return path


def test_import_checks_the_definition_like_a_model_and_echoes_no_escape(tmp_path):
    config = _config(tmp_path)
    definition = _definition(
        tmp_path,
        'alias: "x\\e]0;title\\a"\nmodel:\n  source: {path: "/etc\\e[2J"}\n  context_length: 4096\n'
        "  env: {A: {from_file: /etc/shadow}}\n",
    )
    result = run_cli("import", str(definition), "-f", str(config))
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "\x1b" not in out and "\x07" not in out
    assert "x.baimodel:2:" in out and "x.baimodel:4:" in out, out
    assert "models:" not in result.stdout


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ("alias: router\nmodel: {source: {path: m1}, context_length: 4096}\n", "x.baimodel:2:"),
        ("alias: a\nalias: b\nmodel: {source: {path: m1}, context_length: 4096}\n", "x.baimodel:3:"),
        ("alias: a\nmodel: {source: {path: /root/.ssh}, context_length: 4096}\n", "x.baimodel:3:"),
        ("alias: a\nmodel: {}\n", "x.baimodel:3:"),
    ],
)
def test_import_refuses_what_the_config_would_refuse_before_printing(tmp_path, body, where):
    config = _config(tmp_path)
    result = run_cli("import", str(_definition(tmp_path, body)), "-f", str(config))
    assert result.returncode == 1 and where in result.stderr, result.stderr
    assert "models:" not in result.stdout and "Traceback" not in result.stderr


def test_import_refuses_a_bad_as_alias(tmp_path):
    config = _config(tmp_path)
    definition = _definition(tmp_path, "alias: a\nmodel: {source: {path: m1}, context_length: 4096}\n")
    result = run_cli("import", str(definition), "--as", "Bad Name", "-f", str(config))
    assert result.returncode == 1 and "--as" in result.stderr, result.stderr


def test_import_write_keeps_the_file_mode_and_never_writes_through_a_symlink(tmp_path):
    config = _config(tmp_path, name="real.yaml")
    os.chmod(config, 0o640)
    link = tmp_path / "aigo.yaml"
    link.symlink_to("real.yaml")
    definition = _definition(tmp_path, "alias: m2\nmodel: {source: {path: m1}, context_length: 4096}\n")
    before = config.read_text()
    refused = run_cli("import", str(definition), "-f", str(link), "--write")
    assert refused.returncode == 1 and "is a symbolic link (it points to real.yaml)" in refused.stderr, refused.stderr
    assert link.is_symlink() and config.read_text() == before
    result = run_cli("import", str(definition), "-f", str(config), "--write")  # the file itself, as the error says
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(os.stat(config).st_mode) == 0o640 and "m2:" in config.read_text()


@pytest.mark.parametrize("command", [("import", "DEF", "--write"), ("image", "tag", "vllm", "v9")])
def test_commands_that_rewrite_the_config_refuse_a_fifo_at_once(tmp_path, command):
    definition = _definition(tmp_path, "alias: m2\nmodel: {source: {path: m1}, context_length: 4096}\n")
    fifo = tmp_path / "aigo.fifo"
    os.mkfifo(fifo)
    args = [str(definition) if a == "DEF" else a for a in command]
    started = time.monotonic()
    result = run_cli(*args, "-f", str(fifo))
    assert time.monotonic() - started < 8
    assert result.returncode == 1 and "not a regular file" in result.stderr, result.stderr


def test_export_never_writes_through_a_symlink(tmp_path):
    config = _config(tmp_path)
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    out = tmp_path / "m1.baimodel"
    out.symlink_to(victim)
    result = run_cli("export", "m1", "-f", str(config), "--out", str(out))
    assert result.returncode == 1 and "symbolic link" in result.stderr, result.stderr
    assert victim.read_text() == "keep\n" and out.is_symlink()


def test_render_refuses_a_split_gguf_part_that_is_a_symlink(tmp_path):
    folder = tmp_path / "g"
    folder.mkdir()
    (folder / "m-00001-of-00002.gguf").write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 0))
    (folder / "m-00002-of-00002.gguf").symlink_to("/etc/hostname")
    config = write_config(
        tmp_path,
        'version: 1\nproject: atk2\nengines:\n  llama.cpp: {image: aigo-stub-engine, image_tag: "1"}\n'
        "models:\n  g1: {source: {path: g/m-00001-of-00002.gguf}, context_length: 4096, gpus: none}\n",
    )
    result = run_cli("render", "g1", "-f", str(config))
    assert result.returncode == 1 and "symlink" in result.stderr, result.stdout + result.stderr
    assert "docker run" not in result.stdout


@pytest.mark.parametrize(
    ("name", "parts"),
    [
        ("m-00001-of-00000.gguf", ["m-00001-of-00000.gguf"]),
        ("m-00003-of-00002.gguf", ["m-00003-of-00002.gguf"]),
        ("m-00000-of-00002.gguf", ["m-00000-of-00002.gguf"]),
        ("m-00001-of-99999.gguf", ["m-00001-of-99999.gguf"]),
        ("m-00002-of-00002.gguf", ["m-00001-of-00002.gguf", "m-00002-of-00002.gguf"]),
    ],
)
def test_a_split_name_that_is_not_part_i_of_n_is_one_file(name, parts):
    assert gguf_parts(name) == parts


def test_a_model_store_others_can_write_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    for store in (shared, shared / "not-yet", "/tmp"):
        config = _config(tmp_path, extra=f"defaults: {{models_dir: '{store}'}}\n")
        result = run_cli("validate", "-f", str(config))
        assert result.returncode == 1 and "every account may write" in result.stderr, result.stderr
    mine = tmp_path / "store"
    mine.mkdir(mode=0o755)
    config = _config(tmp_path, extra=f"defaults: {{models_dir: '{mine}'}}\n")
    assert run_cli("validate", "-f", str(config)).returncode == 0


def test_a_model_store_another_account_owns_is_refused(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to give a folder to another account")
    other = tmp_path / "theirs"
    other.mkdir()
    os.chown(other, 65534, 65534)
    config = _config(tmp_path, extra=f"defaults: {{models_dir: '{other / 'models'}'}}\n")
    result = run_cli("validate", "-f", str(config))
    assert result.returncode == 1 and "another account owns" in result.stderr, result.stderr


def test_two_merge_keys_in_one_mapping_are_refused_at_the_second(tmp_path):
    from aigo_apply.errors import ConfigInvalid
    from aigo_apply.observe.config_file import load_config

    text = (
        "version: 1\nproject: p\nmodels:\n  m1: &m {source: {repo: a/b}, context_length: 4096, gpus: none}\n"
        "  m2: {<<: *m, <<: {port: 20005}}\n"
    )
    path = tmp_path / "aigo.yaml"
    path.write_text(text)
    with pytest.raises(ConfigInvalid) as refused:
        load_config(str(path))
    assert any(p.line == 5 and "second merge key" in p.message for p in refused.value.problems)
    path.write_text(text.replace("<<: *m, <<: {port: 20005}", "<<: *m, port: 20005"))
    assert load_config(str(path))


@pytest.mark.parametrize(
    ("name", "refused"),
    [
        ("m-00001-of-00000.gguf", True),
        ("m-00003-of-00002.gguf", True),
        ("m-00001-of-99999.gguf", True),
        ("m-00000-of-00002.gguf", True),
        ("m-00001-of-00003.gguf", False),
        ("m-00003-of-00003.gguf", False),
        ("m.gguf", False),
    ],
)
def test_a_split_gguf_name_no_split_has_is_refused_at_its_line(tmp_path, name, refused):
    from aigo_apply.errors import ConfigInvalid
    from aigo_apply.observe.config_file import load_config

    path = tmp_path / "aigo.yaml"
    path.write_text(
        "version: 1\nproject: p\nengines: {llama.cpp: {image_tag: server}}\nmodels:\n"
        f"  g: {{source: {{path: /srv/g/{name}}}, context_length: 4096, engine: llama.cpp, gpus: none}}\n"
    )
    if not refused:
        assert load_config(str(path))
        return
    with pytest.raises(ConfigInvalid) as err:
        load_config(str(path))
    assert any(
        p.line == 5 and "split GGUF" in p.message and p.path == "models.g.source.path" for p in err.value.problems
    )
