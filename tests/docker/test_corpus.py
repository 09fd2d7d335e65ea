"""The hostile-input corpus (tests/corpus/, expected.json): every file is refused by the real
`aigo-apply apply -y` with exit 1 and a clear message that says where (line, column, path in the
document) and what, no traceback, within a second, and the Docker daemon's containers are exactly
as before (compared around the whole corpus)."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import pytest

from helpers.cli import run_cli
from helpers.paths import CORPUS

EXPECTED = {
    k: v for k, v in json.loads((CORPUS / "expected.json").read_text(encoding="utf-8")).items() if not k.startswith("_")
}
TIMES: dict[str, float] = {}


def generated(tmp_path: Path, name: str) -> Path:
    """Files too big to keep in git: over 1 MiB of valid-looking YAML, and one 2 MiB line."""
    path = tmp_path / name
    if name == "huge-many-models.yaml":
        body = "".join(f"  m{i}: {{source: {{path: m}}, context_length: 4096, gpus: none}}\n" for i in range(25000))
        path.write_text("version: 1\nproject: corpus\nmodels:\n" + body)
    else:
        path.write_text('version: 1\nproject: corpus\nmodels: {}\nx: "' + "a" * 2_100_000 + '"\n')
    return path


@pytest.fixture(scope="module")
def containers_unchanged(runtime):
    def snapshot():
        return sorted((c["Id"], c["State"]) for c in runtime.list_containers())

    before = snapshot()
    yield
    assert snapshot() == before, "a refused file changed containers on the Docker daemon"


def refuse(path: Path, tmp_path: Path) -> str:
    start = time.perf_counter()
    result = run_cli("apply", "-f", str(path), "-y", env={"AIGO_STATE_DIR": str(tmp_path / "state")})
    TIMES[path.name] = time.perf_counter() - start
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "Traceback" not in output and "internal error" not in output, output
    assert TIMES[path.name] < 3.0, f"{path.name} took {TIMES[path.name]:.2f} s"
    return output


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file_is_refused_where_and_why(name, tmp_path, containers_unchanged):
    output = refuse(CORPUS / name, tmp_path)
    assert EXPECTED[name] in output, output


@pytest.mark.parametrize(
    "name, expected",
    [
        ("huge-many-models.yaml", "is larger than 1048576 bytes (1 MiB)"),
        ("huge-one-line.yaml", "is larger than 1048576 bytes (1 MiB)"),
    ],
)
def test_huge_files_are_refused_before_parsing(name, expected, tmp_path, containers_unchanged):
    assert expected in refuse(generated(tmp_path, name), tmp_path)


def test_the_corpus_is_big_and_answered_within_a_second():
    assert len(EXPECTED) >= 40
    assert len(TIMES) >= 40, "run with the corpus tests"
    assert statistics.median(TIMES.values()) < 1.0, sorted(TIMES.items(), key=lambda kv: -kv[1])[:5]
