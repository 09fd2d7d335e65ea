"""Real pulls through the real Docker engine from a local registry (tests/helpers/registry.py):
per-layer progress as JSON lines, the plan's pull action, and --pull always / never."""

from __future__ import annotations

import json
import uuid

import pytest

from helpers.cli import run_cli
from helpers.configs import free_port, model_folder, router_yaml, write_config
from helpers.registry import Registry, blobs_of_saved, tiny_rootfs


@pytest.fixture
def registry(runtime):
    source = f"aigo-pull-source:{uuid.uuid4().hex[:8]}"
    runtime.api.import_image_from_data(tiny_rootfs(), repository=source.split(":")[0], tag=source.split(":")[1])
    saved = b"".join(runtime.api.get_image(source))
    runtime.api.remove_image(source, force=True)
    reg = Registry("aigo/pulltest", "v1", *blobs_of_saved(saved))
    yield reg
    reg.close()
    try:
        runtime.api.remove_image(reg.reference, force=True)
    except Exception:
        pass


def test_image_pull_streams_layer_progress_and_plan_stops_planning_a_pull(registry, runtime, project, tmp_path):
    repo = registry.reference.rsplit(":", 1)[0]
    path = write_config(
        tmp_path,
        f"version: 1\nproject: {project}\nengines: {{vllm: {{image: {repo}, image_tag: v1}}}}\n"
        f"models:\n  m: {{source: {{path: /m}}, context_length: 9, gpus: none}}\n",
    )
    plan = json.loads(run_cli("plan", "-f", str(path), "-o", "json").stdout)
    assert [a["address"] for a in plan["actions"] if a["kind"] == "pull"][0] == f"image.{registry.reference}"
    never = run_cli("apply", "-f", str(path), "-y", "--pull", "never")
    assert (
        never.returncode == 1
        and f"--pull never, but {registry.reference}, haproxy:3.2 are not on this machine" in never.stderr
    )
    result = run_cli("image", "pull", "vllm", "-f", str(path), "-o", "json")
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert events[0]["event"] == "pull_start" and events[-1]["event"] == "pull_done"
    statuses = {e["status"] for e in events if e["event"] == "pull_progress"}
    assert {"Pull complete"} <= statuses, statuses
    assert any(r.startswith("GET /v2/aigo/pulltest/blobs/sha256:") for r in registry.requests)
    assert runtime.inspect_image(registry.reference) is not None
    plan = json.loads(run_cli("plan", "-f", str(path), "-o", "json").stdout)
    assert [a for a in plan["actions"] if a["kind"] == "pull" and registry.reference in a["address"]] == []
    info = json.loads(run_cli("image", "inspect", "vllm", "-f", str(path), "-o", "json").stdout)
    assert info["present"] and info["repo_digests"][0].startswith(f"{repo}@sha256:")


def test_pull_of_a_missing_tag_is_a_clear_error(registry, project, tmp_path):
    repo = registry.reference.rsplit(":", 1)[0]
    path = write_config(
        tmp_path, f"version: 1\nproject: {project}\nengines: {{vllm: {{image: {repo}, image_tag: v9}}}}\nmodels: {{}}\n"
    )
    result = run_cli("image", "pull", "vllm", "-f", str(path))
    assert result.returncode == 1 and f"pulling {repo}:v9 failed:" in result.stderr
    assert "Traceback" not in result.stderr


def test_apply_pulls_before_it_stops_the_old_container(runtime, project, tmp_path, monkeypatch):
    """A recreate onto an image that must be pulled: the journal shows the pull done before the stop."""
    saved = b"".join(runtime.api.get_image("aigo-stub-engine:1"))
    reg = Registry("aigo/stub", "v2", *blobs_of_saved(saved))
    state = {"AIGO_STATE_DIR": str(tmp_path / "state")}
    model_folder(tmp_path / "m")
    router = router_yaml(free_port())

    def write(image: str, tag: str):
        return write_config(
            tmp_path,
            f"version: 1\nproject: {project}\n{router}\n"
            f'engines: {{vllm: {{image: {image}, image_tag: "{tag}"}}}}\n'
            f"models:\n  m: {{source: {{path: m}}, context_length: 99, gpus: none}}\n",
        )

    try:
        assert run_cli("apply", "-f", str(write("aigo-stub-engine", "1")), "-y", env=state).returncode == 0
        result = run_cli("apply", "-f", str(write(reg.reference.rsplit(":", 1)[0], "v2")), "-y", env=state)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "(because image changed)" in result.stdout and "Apply complete: 1 replaced." in result.stdout
        journal = [
            json.loads(line) for line in (tmp_path / "state" / project / "journal.jsonl").read_text().splitlines()
        ]
        steps = [(j["step"], j["outcome"]) for j in journal if j["run"] == journal[-1]["run"]]
        assert steps.index(("pull", "ok")) < steps.index(("recreate", "begin"))
    finally:
        reg.close()
        try:
            runtime.api.remove_container(f"aigo-{project}-m", force=True)
            runtime.api.remove_image(reg.reference, force=True)
        except Exception:
            pass


def test_pull_by_digest_and_tag_put_back_an_image_as_apply_locked_does(registry, runtime):
    """The Docker adapter's two steps behind `apply --locked` for an image no longer on this machine:
    pull `repo@sha256:...` from the registry, then point the tag at it."""
    repo = registry.reference.rsplit(":", 1)[0]
    runtime.pull(registry.reference)
    image = runtime.inspect_image(registry.reference)
    digest = next(d for d in image["RepoDigests"] if d.startswith(repo + "@"))
    runtime.api.remove_image(registry.reference, force=True)
    assert runtime.inspect_image(registry.reference) is None
    runtime.pull(digest)
    assert f"GET /v2/aigo/pulltest/manifests/{digest.split('@')[1]}" in registry.requests
    runtime.tag(image["Id"], registry.reference)
    assert runtime.inspect_image(registry.reference)["Id"] == image["Id"]
