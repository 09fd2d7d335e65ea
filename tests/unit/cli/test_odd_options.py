"""Numbers and paths given on the command line or in the environment are bounded where they are parsed:
every number option of every command refuses `nan`, `inf`,
`-inf`, `1e999`, a negative, zero where it must wait, and a number of 5000 digits with a usage error
(exit 64) that names the option (click's FloatRange let `nan` through, and `top --interval nan` ended
in a traceback); `logs --since` of thousands of digits is a usage error; a path or variable whose
`~USER` names no account (`-f ~nobody/aigo.yaml`, HF_HOME, AIGO_STATE_DIR) is one line naming it."""

from __future__ import annotations

import importlib
import pkgutil

import click
import pytest

import aigo_apply.cli
from aigo_apply.cli.group import cli

from helpers.paths import ROOT

DEMO = str(ROOT / "examples" / "demo.yaml")


def _number_options() -> list[tuple[tuple[str, ...], str, click.ParamType]]:
    """(command path, option, type) of every option of every command that takes a number."""
    for module in pkgutil.iter_modules(aigo_apply.cli.__path__):
        importlib.import_module(f"aigo_apply.cli.{module.name}")  # each module registers its commands

    def walk(command: click.Command, path: tuple[str, ...]):
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                yield from walk(sub, (*path, name))
            return
        for param in command.params:
            if isinstance(param, click.Option) and isinstance(
                param.type, (click.types.FloatParamType, click.types.IntParamType)
            ):
                yield path, max(param.opts, key=len), param.type  # its long name: --tail, not -n

    return sorted(walk(cli, ()), key=lambda found: (found[0], found[1]))


NUMBER_OPTIONS = _number_options()


def _main(capsys, *args: str) -> tuple[int, str]:
    from aigo_apply.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    return int(exit_info.value.code or 0), capsys.readouterr().err


def test_the_commands_with_number_options_are_found():
    names = {(" ".join(path), option) for path, option, _ in NUMBER_OPTIONS}
    assert {("top", "--interval"), ("apply", "--lock-timeout"), ("logs", "--tail")} <= names


@pytest.mark.parametrize(("path", "option"), [(p, o) for p, o, _ in NUMBER_OPTIONS])
@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e999", "-1", "9" * 5000, "1" + "0" * 30])
def test_every_number_option_refuses_what_is_no_usable_number(capsys, path, option, value):
    code, err = _main(capsys, *path, option, value, "-f", DEMO)
    assert code == 64, err
    assert option in err and "Traceback" not in err and "internal error" not in err, err


@pytest.mark.parametrize("value", ["0", "0.4", "61"])
def test_top_waits_between_half_a_second_and_a_minute(capsys, value):
    code, err = _main(capsys, "top", "--once", "--interval", value, "-f", DEMO)
    assert code == 64 and "is not a number of seconds from 0.5 to 60" in err, err


@pytest.mark.parametrize("since", ["9" * 5000 + "s", "9" * 400 + "h", "99999999999h", "1" * 70 + "m"])
def test_logs_since_of_an_unbounded_duration_is_a_usage_error(capsys, since):
    code, err = _main(capsys, "logs", "--since", since, "-f", DEMO)
    assert code == 64 and "--since" in err and "Traceback" not in err, err
    assert len(err) < 400


@pytest.mark.parametrize(
    ("variable", "args"),
    [
        (None, ["validate", "-f", "~no-such-account-here/aigo.yaml"]),
        ("HF_HOME", ["plan", "-f", DEMO]),
        ("AIGO_STATE_DIR", ["plan", "-f", DEMO]),
    ],
)
def test_a_home_of_no_account_is_one_line_naming_it(monkeypatch, capsys, variable, args):
    if variable:
        monkeypatch.setenv(variable, "~no-such-account-here/folder")
    code, err = _main(capsys, *args)
    assert code == 1 and err.count("\n") == 1, err
    assert "~no-such-account-here names no account on this host" in err and (variable or "config file") in err, err
