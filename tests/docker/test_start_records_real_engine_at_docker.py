"""Every engine start measured, and the downtime of a change predicted, on the real vLLM CPU engine
(image aigo-vllm-cpu, the tiny generated model, torch.compile on: no enforce_eager) driven by the real
`aigo-apply`. Three engine starts in all (about 60 s cold, then 35 s warm each, on 2 cores), in file
order: an apply from empty leaves a cold `last_start` with its phases in `status -o json`; a `--replace`
(the old engine stopped first: update: recreate) is warm and faster, as the plan said; the next
`--replace` is predicted from that warm start and starts within a third of the prediction; destroy
removes the records with the cache volume."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import tiny_model
from helpers.configs import free_port, router_yaml
from helpers.real_engine import ENGINES_YAML, cli, remove_project, require_image

pytestmark = pytest.mark.slow


@dataclass
class Project:
    name: str
    path: Path
    env: dict[str, str]
    state: Path

    def run(self, *args: str) -> str:
        done = cli(self.env, *args, "-f", str(self.path))
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def last_start(self) -> dict:
        (row,) = json.loads(self.run("status", "-o", "json"))["models"]
        return row["last_start"]


@pytest.fixture(scope="module")
def compiled(runtime, docker_missing, tmp_path_factory):
    require_image(runtime, docker_missing)
    root = tmp_path_factory.mktemp("start_records")
    tiny_model.make(root / "tiny", tiny_model.IMAGE)
    name = "starts-" + uuid.uuid4().hex[:6]
    path = root / "aigo.yaml"
    path.write_text(
        f"version: 1\nproject: {name}\n{ENGINES_YAML}\n{router_yaml(free_port())}\n"
        "defaults: {ready_timeout: 900}\nmodels:\n"
        "  chat:\n    source: {path: tiny}\n    context_length: 512\n    gpus: none\n    update: recreate\n"
        '    env: {VLLM_CPU_KVCACHE_SPACE: "1"}\n    vllm: {max_num_seqs: 4}\n',
        encoding="utf-8",
    )
    env = {"AIGO_STATE_DIR": str(root / "state")}
    project = Project(name, path, env, root / "state" / name)
    remove_project(runtime, name, env, path)  # the cache volume too: the first start is cold
    yield project
    remove_project(runtime, name, env, path)


def test_status_gives_the_first_starts_phases_before_any_start_null(compiled):
    assert compiled.last_start() is None  # nothing applied yet
    compiled.run("apply", "-y")
    first = compiled.last_start()
    assert first["cache"] == "cold", first
    assert {"inspect", "weights", "compile", "engine_init", "other"} <= set(first["phases"]), first
    assert first["phases"]["compile"] > 1.0 and first["image_id"].startswith("sha256:")
    assert sum(first["phases"].values()) == pytest.approx(first["seconds"], abs=0.1)
    assert "its last start took" in compiled.run("status")


def replaced(compiled: Project) -> float | None:
    """The plan's expected_downtime_s for a --replace of the model, then the replace applied."""
    plan = json.loads(compiled.run("plan", "--replace", "chat", "-o", "json"))
    (chat,) = [a for a in plan["actions"] if a["address"] == "model.chat"]
    assert chat["kind"] == "recreate" and chat["strategy"]["name"] == "recreate", chat
    compiled.run("apply", "--replace", "chat", "-y")
    return chat["expected_downtime_s"]


def test_a_replace_after_a_cold_start_is_warm_and_faster_than_it(compiled):
    first = compiled.last_start()
    predicted = replaced(compiled)
    # the cold start less its inspection of the model, which the cache volume now serves
    assert predicted == pytest.approx(first["seconds"] - first["phases"]["inspect"], abs=0.1), predicted
    second = compiled.last_start()
    assert second["at"] != first["at"] and second["cache"] == "warm", second
    assert second["seconds"] < first["seconds"] and second["phases"]["inspect"] <= 1.0, (first, second)


def test_the_next_replace_is_predicted_within_a_third_of_its_measured_start(compiled):
    second = compiled.last_start()
    predicted = replaced(compiled)
    assert predicted == second["seconds"]  # its last warm start
    third = compiled.last_start()
    assert third["at"] != second["at"] and third["cache"] == "warm", third
    assert abs(predicted - third["seconds"]) <= third["seconds"] / 3, (predicted, third)


def test_destroy_removes_the_records_with_the_cache_volume(compiled):
    assert (compiled.state / "starts" / "chat.jsonl").is_file()
    compiled.run("destroy", "-y")
    assert not (compiled.state / "starts").exists()
    assert compiled.last_start() is None
