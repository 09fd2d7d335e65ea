"""`status` shows what each engine runs, read from the engine and its container, and flags each field
that differs from the file, on the real Docker engine with stub engines: a context length the engine
capped, and a tag that came to name another image."""

from __future__ import annotations

import json
import textwrap

import pytest

from helpers.cli import run_cli
from helpers.configs import free_port, model_folder, write_config


@pytest.fixture
def proj(tmp_path, project, runtime):
    model_folder(tmp_path / "m")
    env = {"AIGO_STATE_DIR": str(tmp_path / "state")}
    tag = f"aigo-stub-drift:{project}"
    runtime.api.tag("aigo-stub-engine:1", *tag.split(":"))
    path = write_config(
        tmp_path,
        textwrap.dedent(f"""
        version: 1
        project: {project}
        engines: {{vllm: {{image: aigo-stub-drift, image_tag: "{project}"}}}}
        router: {{port: {free_port()}, image: aigo-haproxy, image_tag: bookworm}}
        models:
          capped:
            source: {{path: m}}
            context_length: 4096
            gpus: none
            env: {{AIGO_STUB_MAX_MODEL_LEN_CAP: "2048"}}
          plain:
            source: {{path: m}}
            context_length: 4096
            gpus: none
        """),
    )
    result = run_cli("apply", "-f", str(path), "-y", env=env, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    yield path, env, tag
    run_cli("destroy", "-f", str(path), "-y", env=env)
    try:
        runtime.api.remove_image(tag, force=True)
    except Exception:
        pass


def status(path, env):
    result = run_cli("status", "-f", str(path), "-o", "json", env=env)
    assert result.returncode == 0, result.stderr
    return {r["model"]: r for r in json.loads(result.stdout)["models"]}


def test_status_reads_what_each_engine_runs_and_flags_a_capped_context_length(proj):
    path, env, _ = proj
    rows = status(path, env)
    capped, plain = rows["capped"], rows["plain"]
    assert plain["drift"] == [] and plain["effective"]["max_model_len"] == 4096
    assert plain["effective"]["served_names"] == ["plain"]
    assert plain["effective"]["kv_cache_tokens"] == 512 * 16 and plain["effective"]["gpu_memory_utilization"] == 0.9
    assert plain["effective"]["command"][:3] == ["/models/plain", "--served-model-name", "plain"]
    assert [(d["field"], d["file"], d["effective"]) for d in capped["drift"]] == [("max_model_len", 4096, 2048)]
    assert "capped it" in capped["drift"][0]["why"]
    text = run_cli("status", "-f", str(path), env=env).stdout
    assert "capped: max_model_len: the file asks 4096, the engine runs 2048" in text
    assert "No drift" not in text


def test_status_flags_a_tag_that_names_another_image_now(proj, runtime):
    path, env, tag = proj
    before = status(path, env)["plain"]["effective"]["image_id"]
    runtime.api.tag("aigo-test-idle:1", *tag.split(":"), force=True)  # the tag moves; the containers stay
    rows = status(path, env)
    for alias in ("capped", "plain"):
        image = [d for d in rows[alias]["drift"] if d["field"] == "image"]
        assert image and image[0]["effective"] == before[:19], rows[alias]["drift"]
        assert "names another image now" in image[0]["why"]
