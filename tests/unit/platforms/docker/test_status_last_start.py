"""`status` shows each model's last measured start: `models[].last_start` in its JSON (null before any),
a line in its text."""

from __future__ import annotations

from aigo_apply.observe.start_log import StartRecord
from aigo_apply.platforms.docker import start_records
from aigo_apply.platforms.docker.status import collect, render

from helpers.planner_inputs import desired, observed

WARM = StartRecord(
    "2026-12-06T17:13:10Z",
    42.9,
    {"weights": 0.25, "compile": 14.0, "engine_init": 2.01, "other": 26.64},
    "warm",
    "sha256:" + "c" * 64,
    "local/engine:1",
)


def test_the_last_start_of_each_model_and_null_before_any(tmp_path):
    d = desired(tmp_path)
    state = tmp_path / "state"
    start_records.keep(state, "alpha", StartRecord("2026-12-06T17:12:26Z", 65.2, {"compile": 19.6}, "cold"))
    start_records.keep(state, "alpha", WARM)
    report = collect(d, observed(d, []), state=state)
    rows = {r["model"]: r for r in report["models"]}
    assert rows["alpha"]["last_start"] == {
        "seconds": 42.9,
        "phases": {"weights": 0.25, "compile": 14.0, "engine_init": 2.01, "other": 26.64},
        "cache": "warm",
        "image_id": "sha256:" + "c" * 64,
        "at": "2026-12-06T17:13:10Z",
    }
    assert rows["beta"]["last_start"] is None
    text = render(report)
    assert (
        "alpha: its last start took 42.9 s, warm (weights 0.2 s, compile 14.0 s, engine init 2.0 s, other 26.6 s), "
        "at 2026-12-06T17:13:10Z" in text
    )
    assert "beta: its last start" not in text


def test_without_a_state_folder_no_start_is_known(tmp_path):
    d = desired(tmp_path)
    assert all(r["last_start"] is None for r in collect(d, observed(d, [])).get("models"))
