"""The command line's conventions, as other tools have taught users: `logs -n N` is --tail, and a
`logs -f ALIAS` (which `docker logs -f` and `kubectl logs -f` read as follow) says -f is --file
here; `--auto-approve` is -y on apply and destroy; -o is an output format everywhere, so `export`
writes its file with --out only. Through the real command line (a child process) where the
command's outcome matters, through click's own parser where only the options do."""

from __future__ import annotations

import pytest

from aigo_apply.cli.change_commands import apply, destroy
from aigo_apply.cli.check_commands import logs

from helpers.cli import run_cli

CONFIG = """version: 1
project: lab
models:
  chat:
    source: {repo: Qwen/Qwen3-8B}
    context_length: 8192
    gpus: none
  embed.v2:
    source: {repo: Qwen/Qwen3-Embedding-0.6B}
    context_length: 8192
    gpus: none
"""


def _params(command, *args: str) -> dict:
    with command.make_context(command.name, list(args)) as ctx:
        return ctx.params


@pytest.mark.parametrize("args", [("-n", "5"), ("--tail", "5"), ("-n5",), ("chat", "-n", "5")])
def test_logs_n_is_tail(args):
    assert _params(logs, *args)["tail"] == 5


def test_logs_n_takes_what_tail_takes():
    done = run_cli("logs", "-n", "-1")
    assert done.returncode == 64 and "'-n' / '--tail'" in done.stderr


@pytest.mark.parametrize("alias", ["chat", "embed.v2"])
@pytest.mark.parametrize("extra", [(), ("router",), ("--since", "10m")])
def test_logs_f_naming_a_model_asks_whether_follow_was_meant(tmp_path, alias, extra):
    (tmp_path / "aigo.yaml").write_text(CONFIG)
    done = run_cli("logs", "-f", alias, *extra, cwd=tmp_path)
    assert done.returncode == 64, done.stderr
    assert "-f is --file here" in done.stderr and "did you mean --follow?" in done.stderr
    assert f"aigo-apply logs --follow {alias}" in done.stderr
    for value in ("other", "lab.yaml", "conf/aigo.yaml"):  # names of no model: the missing file they are
        done = run_cli("logs", "-f", value, *extra, cwd=tmp_path)
        assert done.returncode == 1 and "no such file" in done.stderr and "--follow" not in done.stderr


def test_logs_f_router_asks_whether_follow_was_meant_with_or_without_a_config(tmp_path):
    for config in (CONFIG, None):
        if config is None:
            (tmp_path / "aigo.yaml").unlink()
        else:
            (tmp_path / "aigo.yaml").write_text(config)
        done = run_cli("logs", "-f", "router", cwd=tmp_path)
        assert done.returncode == 64 and "'router' is no file but the router; did you mean --follow?" in done.stderr


def test_logs_f_names_a_model_of_the_file_aigo_file_names(tmp_path):
    elsewhere = tmp_path / "repo" / "lab.yaml"
    elsewhere.parent.mkdir()
    elsewhere.write_text(CONFIG)
    done = run_cli("logs", "-f", "chat", env={"AIGO_FILE": str(elsewhere)}, cwd=tmp_path)
    assert done.returncode == 64 and "did you mean --follow?" in done.stderr


def test_logs_f_naming_a_file_that_is_also_an_alias_reads_the_file(tmp_path):
    from aigo_apply.cli.check_commands import _a_model_not_a_file

    (tmp_path / "aigo.yaml").write_text(CONFIG)
    (tmp_path / "chat").write_text(CONFIG)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path)
        patch.delenv("AIGO_FILE", raising=False)
        assert not _a_model_not_a_file("chat")
        (tmp_path / "chat").unlink()
        assert _a_model_not_a_file("chat")
        (tmp_path / "aigo.yaml").write_text("version: 1\nmodels: [\n")  # no config to say so
        assert not _a_model_not_a_file("chat")


@pytest.mark.parametrize("command", [apply, destroy])
def test_auto_approve_is_yes_on_apply_and_destroy(command):
    assert [_params(command, flag)["yes"] for flag in ("--auto-approve", "-y", "--yes")] == [True] * 3
    assert _params(command)["yes"] is False


def test_export_writes_its_file_with_out_and_refuses_o(tmp_path):
    (tmp_path / "aigo.yaml").write_text(CONFIG)
    for value in ("chat.baimodel", "json"):
        done = run_cli("export", "chat", "-o", value, cwd=tmp_path)
        assert done.returncode == 64 and "--out NAME.baimodel" in done.stderr
        assert "-o is the output format in every other command" in done.stderr
        assert not (tmp_path / value).exists()
    done = run_cli("export", "chat", "--out", "chat.baimodel", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "repo: Qwen/Qwen3-8B" in (tmp_path / "chat.baimodel").read_text()
    assert " -o" not in run_cli("export", "--help").stdout.replace("--out", "")
