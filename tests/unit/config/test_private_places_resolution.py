"""Paths that cannot be followed (hardening): a symlink loop, a name longer than NAME_MAX, a path
longer than PATH_MAX, a path through /proc/1/root, a part that is a file, any OSError or
RuntimeError from resolving or stat-ing a path the user wrote. Each ends in a clear error where it
is met (located at validation, naming the field when the state is built, a plan blocker for a
local source, a refused mount or secret), never a traceback or exit 3."""

from __future__ import annotations

import errno
import os
from dataclasses import replace
from pathlib import Path

import pytest

from aigo_apply.adapters.create_checks import check_mounts
from aigo_apply.desired import model_store
from aigo_apply.desired.build import build_desired
from aigo_apply.desired.types import ContainerSpec, Mount, SecretRef
from aigo_apply.errors import AigoError, ConfigInvalid, SecretUnavailable, UnsafeSetting
from aigo_apply.observe import local_sources
from aigo_apply.observe.config_file import load_config
from aigo_apply.observe.host_paths import resolve_or_why, try_resolve
from aigo_apply.platforms import secrets
from aigo_apply.platforms.secrets import resolve
from aigo_apply.platforms.state_dir import state_root

from helpers.cli import run_cli
from helpers.configs import host_context, model_folder, regathered, with_paths, write_config


def _loop(tmp: Path) -> str:
    (tmp / "loop").symlink_to("loop")
    return str(tmp / "loop")


def _pair(tmp: Path) -> str:
    (tmp / "a").symlink_to("b")
    (tmp / "b").symlink_to("a")
    return str(tmp / "a" / "model")


def _loop_in_the_middle(tmp: Path) -> str:
    (tmp / "x").mkdir()
    (tmp / "x" / "back").symlink_to("../x/back/again")
    return str(tmp / "x" / "back" / "models" / "q")


def _long_name(tmp: Path) -> str:
    return str(tmp / ("n" * 256) / "model")


def _long_multibyte_name(tmp: Path) -> str:
    return str(tmp / ("é" * 128))  # 256 bytes


def _long_path(tmp: Path) -> str:
    return str(tmp / "/".join(["é" * 100] * 21))  # under 4096 characters, over 4096 bytes


def _through_proc(tmp: Path) -> str:
    return "/proc/1/root/srv/models/x"


HOSTILE = {
    "self-loop": _loop,
    "two-link-loop": _pair,
    "loop-mid-path": _loop_in_the_middle,
    "name-over-255": _long_name,
    "multibyte-name-over-255-bytes": _long_multibyte_name,
    "path-over-4096": _long_path,
}


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("AIGO_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    yield
    secrets._known.clear()


@pytest.mark.parametrize("make", HOSTILE.values(), ids=HOSTILE.keys())
def test_resolving_never_raises_and_says_why(tmp_path, make):
    hostile = Path(make(tmp_path))
    why = resolve_or_why(hostile)
    assert isinstance(why, str) and any(w in why for w in ("loop of symlinks", "longer than")), why
    assert try_resolve(hostile) == hostile  # the host's own folders: as written when they cannot be resolved


@pytest.mark.parametrize("make", HOSTILE.values(), ids=HOSTILE.keys())
def test_validation_locates_a_path_that_cannot_be_resolved(tmp_path, make):
    path = write_config(
        tmp_path,
        f"version: 1\nproject: res\nmodels:\n  a: {{source: {{path: '{make(tmp_path)}'}}, context_length: 4096}}\n",
    )
    with pytest.raises(ConfigInvalid) as caught:
        load_config(str(path))
    text = "\n".join(caught.value.lines())
    assert ":4:" in text and "models.a.source.path" in text and "cannot be resolved" in text, text
    assert len(max(text.splitlines(), key=len)) < 600  # a 4 KiB path is shortened


@pytest.mark.parametrize("make", HOSTILE.values(), ids=HOSTILE.keys())
def test_the_desired_state_names_the_field_when_a_path_broke_after_validation(tmp_path, make, env):
    folder = model_folder(tmp_path / "m")
    config = load_config(str(write_config(tmp_path, "version: 1\nproject: res\nmodels:\n  a: "
                                          "{source: {path: m}, context_length: 4096, gpus: none}\n")))  # fmt: skip
    os.rename(folder, tmp_path / "was-m")
    hostile = make(tmp_path)
    try:
        os.symlink(hostile, folder)
    except OSError:  # a link cannot hold a target over PATH_MAX
        pytest.skip("no link can lead there")
    host = host_context(tmp_path / "store")
    with pytest.raises(UnsafeSetting, match=r"models\.a\.source\.path: 'm' cannot be resolved"):
        build_desired(regathered(config), host)
    with pytest.raises(UnsafeSetting, match="cannot be resolved"):
        model_store.local_dir(tmp_path, hostile, host, with_paths(host, Path(hostile)))


@pytest.mark.parametrize("make", [*HOSTILE.values(), _through_proc], ids=[*HOSTILE.keys(), "proc-1-root"])
def test_a_hostile_local_source_is_a_plan_blocker_not_a_crash(tmp_path, make):
    hostile = make(tmp_path)
    specs = {
        "dir": {"source": {"path": hostile}, "model_dir": hostile},
        "gguf": {"source": {"path": "x"}, "model_dir": hostile, "model_file": "q-00001-of-00002.gguf"},
        "draft": {"source": {"repo": "a/b"}, "model_dir": "/x", "vllm": {"speculative": {"draft": {"path": hostile}}}},
    }
    problems = local_sources.local_source_problems(specs)
    assert sorted(problems) == ["dir", "draft", "gguf"], problems
    assert all(hostile[:20] in p for p in problems["dir"])


@pytest.mark.parametrize("code", [errno.EACCES, errno.EIO, errno.ENOTDIR, errno.ELOOP, errno.EOVERFLOW, errno.ESTALE])
def test_every_os_error_from_stat_is_words(tmp_path, monkeypatch, code):
    model_folder(tmp_path / "m")

    def failing(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(local_sources.os, "stat", failing)
    folder = local_sources._folder_problems(tmp_path / "m", "source.path")
    files = local_sources._file_problems(tmp_path, "q.gguf")
    monkeypatch.undo()
    assert len(folder) == 1 and "cannot be read" in folder[0] and len(files) == 1 and "cannot be read" in files[0]


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError("Symlink loop from 'x'"),
        OSError(errno.EACCES, "Permission denied"),
        OSError(errno.EIO, "Input/output error"),
        OSError(errno.ENOTDIR, "Not a directory"),
        OSError(errno.ELOOP, "Too many levels of symbolic links"),
        OSError(errno.ENOMEM, "Cannot allocate memory"),
        PermissionError(errno.EPERM, "Operation not permitted"),
        ValueError("embedded null byte"),
    ],
    ids=lambda e: type(e).__name__ + str(getattr(e, "errno", "")),
)
def test_every_error_from_resolve_is_words(tmp_path, monkeypatch, env, error):
    secret = tmp_path / "secret"
    secret.write_text("value-1234\n")
    host = host_context()

    def failing(self, strict=False):
        raise error

    monkeypatch.setattr(Path, "resolve", failing)
    why = resolve_or_why(tmp_path / "m")
    mounts = model_store.Mounts(host, with_paths(host, Path("/m")))  # what the host says of /m now
    with pytest.raises(UnsafeSetting, match=r"models\.a\.source\.path: '/m' cannot be resolved"):
        model_store.mountable(tmp_path, "/m", "models.a.source.path", mounts)
    with pytest.raises(SecretUnavailable, match="cannot be resolved"):
        resolve(SecretRef("from_file", str(secret)), "models.a.env.S")
    with pytest.raises(AigoError, match="the state directory .* cannot be resolved"):
        state_root()
    monkeypatch.undo()
    assert isinstance(why, str) and why


def _spec(source: str) -> ContainerSpec:
    return ContainerSpec(
        name="aigo-res-a",
        image="img",
        command=(),
        env=(),
        mounts=(Mount(source, "/models/a", True),),
        host_ip="127.0.0.1",
        host_port=1,
        container_port=8000,
        gpus="none",
    )


@pytest.mark.parametrize("make", [*HOSTILE.values(), _through_proc], ids=[*HOSTILE.keys(), "proc-1-root"])
def test_the_adapter_refuses_a_hostile_mount_with_why(tmp_path, make):
    with pytest.raises(UnsafeSetting, match="refusing to mount"):
        check_mounts(_spec(make(tmp_path)))


@pytest.mark.parametrize("make", [*HOSTILE.values(), _through_proc], ids=[*HOSTILE.keys(), "proc-1-root"])
def test_a_hostile_secret_file_is_refused_with_why(tmp_path, make, env):
    with pytest.raises(SecretUnavailable) as caught:
        resolve(SecretRef("from_file", make(tmp_path)), "models.a.env.S")
    assert str(caught.value).startswith("models.a.env.S: the secret file ")


@pytest.mark.parametrize("make", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_state_folder_is_an_error_that_says_how_to_choose_another(tmp_path, monkeypatch, make):
    monkeypatch.setenv("AIGO_STATE_DIR", make(tmp_path))
    with pytest.raises(AigoError, match="set AIGO_STATE_DIR"):
        state_root()


@pytest.mark.parametrize("command", [("validate",), ("render", "a"), ("destroy", "-y")])
@pytest.mark.parametrize("make", [_loop, _long_name], ids=["loop", "long-name"])
def test_the_cli_gives_a_located_error_never_a_traceback(tmp_path, command, make):
    path = write_config(
        tmp_path,
        f"version: 1\nproject: res\nmodels:\n  a: {{source: {{path: '{make(tmp_path)}'}}, context_length: 4096}}\n",
    )
    result = run_cli(command[0], "-f", str(path), *command[1:], env={"AIGO_STATE_DIR": str(tmp_path / "state")})
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "Traceback" not in output and ":4:" in output and "cannot be resolved" in output, output


def test_a_model_folder_reached_through_a_plain_link_still_works(tmp_path):
    folder = model_folder(tmp_path / "real")
    (tmp_path / "link").symlink_to(folder)
    config = load_config(
        str(
            write_config(
                tmp_path, "version: 1\nproject: res\nmodels:\n  a: {source: {path: link}, context_length: 4096}\n"
            )
        )
    )
    desired = build_desired(config, replace(host_context(tmp_path / "store"), state_root=tmp_path / "state"))
    assert desired.models["a"].spec["model_dir"] == str(folder)
