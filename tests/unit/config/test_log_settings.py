"""`logs:` in the file (defaults.logs, router.logs, models.ALIAS.logs): every size Docker's json-file
driver reads as one validates, in each place; whatever it would refuse, or read as bytes, is refused at
the key, with its line, the units it takes and an example; an unknown key gets its near name."""

from __future__ import annotations

import pytest

from aigo_apply.errors import ConfigInvalid
from aigo_apply.observe.config_file import load_config

from helpers.configs import write_config

PLACES = {
    # where `logs:` goes, the file around it, and the line its value starts on
    "defaults.logs": ("version: 1\nproject: lab\ndefaults:\n  logs: {L}\nmodels: {{}}\n", 4),
    "router.logs": ("version: 1\nproject: lab\nrouter:\n  logs: {L}\nmodels: {{}}\n", 4),
    "models.a.logs": (
        "version: 1\nproject: lab\nmodels:\n  a:\n    source: {{repo: org/a}}\n    context_length: 4096\n"
        "    logs: {L}\n",
        7,
    ),
}
SIZE = (
    "must be a size with a unit, as Docker's json-file driver takes it: a whole number from 1 and k, m or g, "
    "such as 50m, 512k or 1g (a number alone would be bytes)"
)


def problems(tmp_path, place: str, logs: str) -> list[str]:
    text, _ = PLACES[place]
    path = write_config(tmp_path, text.format(L=logs))
    try:
        load_config(str(path))
    except ConfigInvalid as exc:
        return [p.format().replace(str(path), "F") for p in exc.problems]
    return []


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize(
    "logs",
    [
        "{}",
        "{max_size: 50m}",
        "{max_files: 1}",
        "{max_size: 10k, max_files: 2}",
        "{max_size: 512K, max_files: 100}",
        "{max_size: 1g}",
        "{max_size: 2G}",
        "{max_size: 100M}",
        "{max_size: 100MB}",
        "{max_size: 100mb}",
        "{max_size: 100MiB}",
        '{max_size: "50m", max_files: 5}',
        "{max_size: 999999m}",
    ],
)
def test_what_docker_takes_validates_everywhere(tmp_path, place, logs):
    assert problems(tmp_path, place, logs) == []


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize(
    "logs, message",
    [
        ("{max_size: 50}", f"{SIZE} (got 50)"),  # YAML's integer: bytes to Docker
        ('{max_size: "50"}', f"{SIZE} (got '50')"),
        ("{max_size: 0m}", f"{SIZE} (got '0m')"),
        ("{max_size: 1.5g}", f"{SIZE} (got '1.5g')"),
        ("{max_size: 50t}", f"{SIZE} (got '50t')"),
        ("{max_size: 50 m}", f"{SIZE} (got '50 m')"),
        ("{max_size: -5m}", f"{SIZE} (got '-5m')"),
        ("{max_size: 1000000m}", f"{SIZE} (got '1000000m')"),
        ("{max_size: m}", f"{SIZE} (got 'm')"),
        ("{max_size: }", f"{SIZE} (got empty)"),
        ("{max_files: 0}", "must be at least 1, not 0"),
        ("{max_files: 101}", "must be at most 100, not 101"),
        ("{max_files: 2.5}", "must be an integer, not 2.5"),
        ("{max_files: true}", "must be an integer, not true (true/false)"),
    ],
)
def test_what_docker_refuses_or_misreads_is_refused_at_the_key(tmp_path, place, logs, message):
    key = logs.strip("{}").split(":")[0]
    _, line = PLACES[place]
    found = problems(tmp_path, place, logs)
    assert len(found) == 1, found
    assert found[0].startswith(f"F:{line}:") and f": {place}.{key}: {message}" in found[0], found


@pytest.mark.parametrize("place", sorted(PLACES))
def test_a_misspelt_key_names_the_key_meant(tmp_path, place):
    found = problems(tmp_path, place, "{max_file: 3}")
    assert len(found) == 1 and f"{place}.max_file: unknown key 'max_file' (did you mean 'max_files'?)" in found[0]
    found = problems(tmp_path, place, "50m")
    assert len(found) == 1 and f"{place}: must be a mapping, not '50m'" in found[0], found
