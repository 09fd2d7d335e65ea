"""`aigo-apply apply` / `destroy` against the real Docker daemon with the stub engine."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

import httpx
import pytest

from aigo_apply.desired import labels
from aigo_apply.desired.engines.common import cache_volume

from helpers.cli import run_cli
from helpers.configs import free_port, model_folder, router_yaml, write_config
from helpers.paths import ROOT
from helpers.stub_project import ROUTER_PORTS, chat, config, engine_addresses


@pytest.fixture
def state(tmp_path, monkeypatch):
    path = tmp_path / "state"
    monkeypatch.setenv("AIGO_STATE_DIR", str(path))
    return {"AIGO_STATE_DIR": str(path)}


def stub_variant(runtime, tag: str, label: str) -> str:
    """Build a sibling of the stub engine image (one LABEL apart) under `tag`, moving the tag onto it;
    siblings share no parent, so either can be removed alone. Returns its image id."""
    import io

    dockerfile = f"FROM aigo-stub-engine:1\nLABEL io.aigo-apply.test={label}\n"
    list(runtime.api.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, decode=True))
    return runtime.api.inspect_image(tag)["Id"]


def ids(runtime, project):
    return {
        c["Labels"][labels.MODEL]: c["Id"]
        for c in runtime.list_containers()
        if c["Labels"].get(labels.PROJECT) == project and labels.MODEL in c["Labels"]
    }


def router_id(runtime, project):
    return next(
        (
            c["Id"]
            for c in runtime.list_containers()
            if c["Labels"].get(labels.PROJECT) == project and c["Labels"].get(labels.ROLE) == "router"
        ),
        None,
    )


def test_apply_from_empty_then_no_changes(runtime, project, tmp_path, state):
    path = config(tmp_path, project)
    first = run_cli("apply", "-f", str(path), "-y", env=state)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "Apply complete: 2 created, router created." in first.stdout
    assert "model.chat: created aigo-" in first.stdout and "ready after" in first.stdout
    before = ids(runtime, project)
    assert set(before) == {"chat", "tools"}
    for alias, port in engine_addresses(runtime, project).items():
        assert chat(port, alias)["model"] == alias
    second = run_cli("apply", "-f", str(path), "-y", env=state)
    assert second.returncode == 0 and second.stdout.startswith("No changes.")
    assert ids(runtime, project) == before
    journal = [json.loads(line) for line in (tmp_path / "state" / project / "journal.jsonl").read_text().splitlines()]
    assert [j["outcome"] for j in journal if j["step"] == "apply"] == ["started", "finished"]


def test_changing_a_setting_recreates_only_that_model(runtime, project, tmp_path, state):
    assert run_cli("apply", "-f", str(config(tmp_path, project)), "-y", env=state).returncode == 0
    before = ids(runtime, project)
    result = run_cli("apply", "-f", str(config(tmp_path, project, tools_parser="hermes")), "-y", env=state)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(because vllm.tool_call_parser changed)" in result.stdout
    assert "Apply complete: 1 replaced." in result.stdout
    after = ids(runtime, project)
    assert after["chat"] == before["chat"] and after["tools"] != before["tools"]
    assert not [c for c in runtime.list_containers() if c["Names"][0].endswith("-aigo-previous")]


def test_a_tag_rebuilt_under_the_containers_is_planned_as_a_recreate(runtime, project, tmp_path, state):
    """`docker pull`/`docker build` moved the engine's tag to another image: plan says so and apply
    recreates onto it (as docker compose does), then the machine is at rest again."""
    tag = f"aigo-stub-moving:{project}"
    runtime.api.tag("aigo-stub-engine:1", "aigo-stub-moving", project)
    path = config(tmp_path, project, engine_image=tag)
    try:
        assert run_cli("apply", "-f", str(path), "-y", env=state).returncode == 0
        before = ids(runtime, project)
        new_id = stub_variant(runtime, tag, f"{project}-moved")
        plan = run_cli("plan", "-f", str(path), "-o", "json", env=state)
        actions = {a["address"]: a for a in json.loads(plan.stdout)["actions"]}
        for alias in ("chat", "tools"):
            action = actions[f"model.{alias}"]
            assert action["kind"] == "recreate", action
            assert action["reasons"][0].startswith(
                f"image {tag} on this machine is now {new_id[:19]}; the container runs"
            )
            assert action["changes"][0]["path"] == "image_id" and action["changes"][0]["after"] == new_id
        assert actions["router"]["kind"] == "noop"
        status = run_cli("status", "-f", str(path), "-o", "json", env=state)
        rows = {r["model"]: r["image"] for r in json.loads(status.stdout)["models"]}
        assert rows["chat"].startswith(f"{tag} (outdated: sha256:"), rows
        result = run_cli("apply", "-f", str(path), "-y", env=state)
        assert result.returncode == 0 and "Apply complete: 2 replaced." in result.stdout, result.stdout + result.stderr
        after = ids(runtime, project)
        assert not set(after.values()) & set(before.values())
        assert {runtime.api.inspect_container(i)["Image"] for i in after.values()} == {new_id}
        again = run_cli("plan", "-f", str(path), "--detailed-exitcode", env=state)
        assert again.returncode == 0 and again.stdout.startswith("No changes."), again.stdout
        status = run_cli("status", "-f", str(path), "-o", "json", env=state)
        assert {r["image"] for r in json.loads(status.stdout)["models"]} == {tag}
    finally:
        run_cli("destroy", "-f", str(path), "-y", env=state)
        runtime.api.remove_image(tag, force=True)


def test_locked_apply_puts_back_the_image_aigo_lock_records(runtime, project, tmp_path, state):
    """The tag was rebuilt since aigo.lock was written: apply --locked re-tags the recorded image (still
    here, under the running containers) instead of moving onto the new one; with the recorded image
    gone and no registry digest, it refuses and says why."""
    tag = f"aigo-stub-locked:{project}"
    stub_variant(runtime, tag, f"{project}-recorded")
    path = config(tmp_path, project, engine_image=tag)
    try:
        assert run_cli("apply", "-f", str(path), "-y", env=state).returncode == 0
        recorded = json.loads((tmp_path / "aigo.lock").read_text())["images"][tag]["id"]
        before = ids(runtime, project)
        newer = stub_variant(runtime, tag, f"{project}-newer")
        plan = json.loads(run_cli("plan", "-f", str(path), "-o", "json", env=state).stdout)
        assert {a["address"]: a["kind"] for a in plan["actions"]}["model.chat"] == "recreate"  # the tag moved
        locked = run_cli("apply", "-f", str(path), "-y", "--locked", env=state)
        assert locked.returncode == 0, locked.stdout + locked.stderr
        assert (
            f"aigo.lock records {recorded[:19]}; the tag names {newer[:19]} now; it is still on this machine: re-tag it"
        ) in locked.stdout
        assert f"{tag} names {recorded[:19]} again, as aigo.lock records" in locked.stdout
        assert runtime.api.inspect_image(tag)["Id"] == recorded and ids(runtime, project) == before
        again = run_cli("plan", "-f", str(path), "--detailed-exitcode", env=state)
        assert again.returncode == 0 and again.stdout.startswith("No changes."), again.stdout
        # the recorded image is gone for good (no containers use it, no registry has it)
        run_cli("destroy", "-f", str(path), "-y", env=state)
        runtime.api.tag(newer, "aigo-stub-locked", project, force=True)
        runtime.api.remove_image(recorded, force=True)
        refused = run_cli("apply", "-f", str(path), "-y", "--locked", env=state)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert (
            f"image {tag} is {newer[:19]}, aigo.lock records {recorded[:19]}, which is neither on this machine "
            "nor in a registry (no digest)"
        ) in refused.stdout
        assert ids(runtime, project) == {}
    finally:
        run_cli("destroy", "-f", str(path), "-y", env=state)
        for image in {runtime.api.inspect_image(tag)["Id"], *([recorded] if "recorded" in locals() else [])}:
            try:
                runtime.api.remove_image(image, force=True)
            except Exception:
                pass


@pytest.mark.parametrize(
    "behaviour, expected",
    [
        ('AIGO_STUB_FAIL_START: "1"', "exited with code 1 while loading"),
        ('AIGO_STUB_NEVER_READY: "1"', "was not ready after 3 s"),
    ],
)
@pytest.mark.parametrize(
    "update, kept",
    [
        ("recreate", "the previous version was restored and serves again"),
        ("parallel", "the new engine was removed, and the previous aigo-{project}-chat served throughout"),
    ],
)
def test_failed_replace_keeps_the_previous_container(
    runtime, project, tmp_path, state, behaviour, expected, update, kept
):
    assert run_cli("apply", "-f", str(config(tmp_path, project)), "-y", env=state).returncode == 0
    before = ids(runtime, project)
    # an engine that exits is found out long before its timeout, however busy the machine; one that
    # never serves is found out by it
    timeout = 3 if "NEVER_READY" in behaviour else 60
    bad = config(tmp_path, project, chat_env=", " + behaviour, ready_timeout=timeout)
    bad.write_text(
        bad.read_text().replace(f"ready_timeout: {timeout}}}", f"ready_timeout: {timeout}, update: {update}}}")
    )
    result = run_cli("apply", "-f", str(bad), "-y", env=state)
    assert result.returncode == 1, result.stdout + result.stderr
    assert expected in result.stderr and kept.format(project=project) in result.stderr, result.stderr
    if "FAIL_START" in behaviour:
        assert "RuntimeError: stub engine told to fail at start-up" in result.stdout  # the log tail
    after = ids(runtime, project)
    assert after == before  # the very same containers, the old chat one renamed back
    assert chat(engine_addresses(runtime, project)["chat"], "chat")["model"] == "chat"
    router_port = ROUTER_PORTS[project]  # and it answers through the router again
    assert chat(router_port, "chat")["model"] == "chat"
    listed = json.load(urllib.request.urlopen(f"http://127.0.0.1:{router_port}/v1/models", timeout=5))
    assert sorted(m["id"] for m in listed["data"]) == ["chat", "tools"]
    names = {c["Names"][0] for c in runtime.list_containers()}
    assert f"/aigo-{project}-chat" in names
    assert not [n for n in names if n.endswith(("-aigo-previous", "-aigo-next"))]
    # the failed apply leaves the plan showing the change still to do
    plan = run_cli("plan", "-f", str(bad), "--detailed-exitcode", env=state)
    assert plan.returncode == 2 and "# model.chat will be replaced" in plan.stdout


def test_second_concurrent_apply_is_refused_with_holder_details(runtime, project, tmp_path, state):
    from aigo_apply.platforms.project_lock import ProjectLock
    from aigo_apply.platforms.state_dir import state_dir

    path = config(tmp_path, project)
    with ProjectLock(state_dir(project), project, "apply"):
        refused = run_cli("apply", "-f", str(path), "-y", env=state)
        assert refused.returncode == 1
        assert (
            f"project '{project}' is locked by another aigo-apply run: `aigo-apply apply` (pid {os.getpid()}"
            in refused.stderr
        )
        waited = run_cli("apply", "-f", str(path), "-y", "--lock-timeout", "0.5", env=state)
        assert "after waiting 0.5 s" in waited.stderr
    assert ids(runtime, project) == {}
    assert run_cli("apply", "-f", str(path), "-y", env=state).returncode == 0


def test_two_real_concurrent_applies_do_not_break_anything(runtime, project, tmp_path, state):
    path = config(tmp_path, project, load="1.5")
    cmd = [sys.executable, "-m", "aigo_apply", "apply", "-f", str(path), "-y", "--lock-timeout", "60"]
    procs = [
        subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **state}, cwd=ROOT
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert sorted("Apply complete" in o[0] for o in outs) == [False, True]  # one applied, the other found nothing to do
    assert any(o[0].startswith("No changes.") for o in outs)
    assert set(ids(runtime, project)) == {"chat", "tools"}


@pytest.mark.parametrize("delay", [0.2, 0.9, 1.8, 3.0])
def test_sigint_at_any_moment_then_apply_converges(runtime, project, tmp_path, state, delay):
    assert run_cli("apply", "-f", str(config(tmp_path, project, load="1")), "-y", env=state).returncode == 0
    changed = config(
        tmp_path,
        project,
        load="1",
        tools_parser="hermes",
        extra="  third:\n    source: {path: m}\n    context_length: 2048\n    gpus: none\n",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "aigo_apply", "apply", "-f", str(changed), "-y"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **state},
        cwd=ROOT,
    )
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    # 130 from our handler; -SIGINT when the signal lands while Python is still starting (shells show both as 130)
    assert proc.returncode in (0, 130, -signal.SIGINT), out + err
    assert "Traceback" not in err
    again = run_cli("apply", "-f", str(changed), "-y", env=state)
    assert again.returncode == 0, again.stdout + again.stderr
    final = run_cli("plan", "-f", str(changed), "--detailed-exitcode", env=state)
    assert final.returncode == 0 and final.stdout.startswith("No changes."), final.stdout
    for alias, port in engine_addresses(runtime, project).items():
        assert chat(port, alias)["model"] == alias


def test_destroy_removes_only_the_project(runtime, project, tmp_path, state, foreign):
    path = config(tmp_path, project)
    assert run_cli("apply", "-f", str(path), "-y", env=state).returncode == 0
    other = foreign(f"{project}-bystander")
    result = run_cli("destroy", "-f", str(path), "-y", env=state)
    assert result.returncode == 0 and "Destroy complete: 2 removed, router removed." in result.stdout
    assert ids(runtime, project) == {} and router_id(runtime, project) is None
    assert not (tmp_path / "state" / project / "router").exists()  # no route is left behind
    assert not (tmp_path / "state" / project / "sockets").exists()  # nor an engine's dead socket
    assert other in {c["Id"] for c in runtime.list_containers()}
    assert run_cli("destroy", "--project", project, "-y", env=state).stdout.startswith("No changes.")


def test_a_model_taken_out_of_the_file_leaves_no_socket_folder(runtime, project, tmp_path, state):
    path = config(tmp_path, project)
    assert run_cli("apply", "-f", str(path), "-y", env=state).returncode == 0
    sockets = tmp_path / "state" / project / "sockets"
    assert sorted(p.name for p in sockets.iterdir()) == ["chat", "tools"]
    text = path.read_text()
    path.write_text(text[: text.index("  tools:")])
    result = run_cli("apply", "-f", str(path), "-y", env=state)
    assert result.returncode == 0 and "1 removed" in result.stdout, result.stdout + result.stderr
    assert sorted(p.name for p in sockets.iterdir()) == ["chat"]
    assert chat(str(sockets / "chat" / "engine.sock"), "chat")["choices"]


def test_without_terminal_or_yes_apply_refuses_and_changes_nothing(runtime, project, tmp_path, state):
    result = run_cli("apply", "-f", str(config(tmp_path, project)), env=state)
    assert result.returncode == 1
    assert "there is no terminal to ask on; pass -y/--yes" in result.stderr
    assert ids(runtime, project) == {}


def test_saved_plan_applies_only_while_the_machine_is_unchanged(runtime, project, tmp_path, state):
    path = config(tmp_path, project)
    saved = tmp_path / "plan.json"
    assert run_cli("plan", "-f", str(path), "--out", str(saved), env=state).returncode == 0
    stale = tmp_path / "stale.json"
    stale.write_text(saved.read_text())
    result = run_cli("apply", str(saved), env=state)
    assert result.returncode == 0 and "Apply complete: 2 created, router created." in result.stdout, (
        result.stdout + result.stderr
    )
    refused = run_cli("apply", str(stale), env=state)
    assert refused.returncode == 1 and "the machine changed since this plan was made" in refused.stderr


def test_saved_plan_edited_to_carry_a_bad_value_is_refused(runtime, project, tmp_path, state):
    path = config(tmp_path, project)
    saved = tmp_path / "plan.json"
    run_cli("plan", "-f", str(path), "--out", str(saved), env=state)
    data = json.loads(saved.read_text())
    data["actions"][0]["spec"]["vllm"]["tool_call_parser"] = "hermes --api-key stolen"
    saved.write_text(json.dumps(data))
    result = run_cli("apply", str(saved), env=state)
    assert result.returncode == 1
    assert "the saved plan's actions are not the ones" in result.stderr and "Traceback" not in result.stderr
    assert ids(runtime, project) == {}


def test_a_saved_plan_is_an_approval_never_an_instruction(runtime, project, foreign, tmp_path, state):
    """Edits that kept the fingerprint: each one refused, nothing on the machine changed, the
    foreign container untouched; the unedited plan then applies."""
    bystander = f"{project}-bystander"
    foreign(bystander)
    path = config(tmp_path, project)
    saved = tmp_path / "plan.json"
    assert run_cli("plan", "-f", str(path), "--out", str(saved), env=state).returncode == 0
    original = json.loads(saved.read_text())
    model = next(i for i, a in enumerate(original["actions"]) if a["address"].startswith("model."))

    def mount_root(d):
        d["actions"][model]["spec"]["source"] = {"path": "/"}

    def remove_foreign(d):
        d["actions"].append(
            {
                "address": f"container.{bystander}",
                "kind": "remove",
                "reasons": ["x"],
                "changes": [],
                "notes": [],
                "container": bystander,
            }
        )

    def rename_container(d):
        d["actions"][model]["container"] = bystander

    def drop_an_action(d):
        del d["actions"][model]

    def other_options(d):
        d["request"] = {"replace": [], "target": ["no-such-model"], "ignore": [], "pull": "missing", "locked": False}

    for edit in (mount_root, remove_foreign, rename_container, drop_an_action, other_options):
        data = json.loads(json.dumps(original))
        edit(data)
        saved.write_text(json.dumps(data))
        result = run_cli("apply", str(saved), env=state)
        assert result.returncode in (1, 64) and "Traceback" not in result.stderr, (edit.__name__, result.stderr)
        assert ids(runtime, project) == {}, edit.__name__
        assert runtime.state(bystander).get("Running"), edit.__name__
    saved.write_text(json.dumps(original))
    assert run_cli("apply", str(saved), env=state).returncode == 0
    assert len(ids(runtime, project)) == 2 and runtime.state(bystander).get("Running")


def test_pull_never_and_missing_secret_stop_before_any_change(runtime, project, tmp_path, state):
    path = config(tmp_path, project)
    text = path.read_text().replace('image_tag: "1"', 'image_tag: "no-such-tag"')
    path.write_text(text)
    result = run_cli("apply", "-f", str(path), "-y", "--pull", "never", env=state)
    assert (
        result.returncode == 1
        and "--pull never, but aigo-stub-engine:no-such-tag is not on this machine" in result.stderr
    )
    path = config(tmp_path, project, chat_env=", MY_TOKEN: {from_env: AIGO_TEST_UNSET_TOKEN}")
    result = run_cli("apply", "-f", str(path), "-y", env=state)
    assert result.returncode == 1
    assert "models.chat.env.MY_TOKEN: the environment variable AIGO_TEST_UNSET_TOKEN is not set" in result.stdout
    assert "the plan is blocked" in result.stderr  # a plan blocker now: shown with the plan, before any change
    assert ids(runtime, project) == {}


def test_secret_reaches_the_container_but_no_label_or_output(runtime, project, tmp_path, state):
    path = config(tmp_path, project, chat_env=", MY_TOKEN: {from_env: AIGO_TEST_TOKEN}")
    result = run_cli("apply", "-f", str(path), "-y", "--output", "json", env={**state, "AIGO_TEST_TOKEN": "hf_s3cr3t"})
    assert result.returncode == 0, result.stderr
    assert "hf_s3cr3t" not in result.stdout + result.stderr
    inspected = runtime.api.inspect_container(f"aigo-{project}-chat")
    assert "MY_TOKEN=hf_s3cr3t" in inspected["Config"]["Env"]
    assert "hf_s3cr3t" not in json.dumps(inspected["Config"]["Labels"])
    events = [json.loads(line)["event"] for line in result.stdout.splitlines()]
    assert events[0] == "plan" and events[-1] == "result"


def test_paused_model_is_resumed_and_a_taken_port_fails_cleanly(runtime, project, tmp_path, state):
    import socket

    path = config(tmp_path, project)
    assert run_cli("apply", "-f", str(path), "-y", env=state).returncode == 0
    runtime.api.pause(f"aigo-{project}-chat")
    resumed = run_cli("apply", "-f", str(path), "-y", env=state)
    assert resumed.returncode == 0 and "Apply complete: 1 started." in resumed.stdout, resumed.stdout + resumed.stderr
    assert chat(engine_addresses(runtime, project)["chat"], "chat")["model"] == "chat"
    # a process outside Docker holds the port a new model wants: the plan finds it (host.port) and apply
    # makes nothing; let past the check, Docker refuses the port and the new container is removed
    busy = free_port()
    holder = socket.socket()
    holder.bind(("127.0.0.1", busy))
    holder.listen()
    try:
        extra = f"  extra:\n    source: {{path: m}}\n    context_length: 2048\n    gpus: none\n    port: {busy}\n"
        path = config(tmp_path, project, extra=extra)
        blocked = run_cli("apply", "-f", str(path), "-y", env=state)
        forced = run_cli("apply", "-f", str(path), "-y", "--ignore-readiness", "host.port", env=state)
    finally:
        holder.close()
    assert blocked.returncode == 1 and f"127.0.0.1:{busy}" in blocked.stdout + blocked.stderr
    assert "host.port" in blocked.stdout + blocked.stderr and "nothing was changed" in blocked.stderr
    assert forced.returncode == 1
    assert f"127.0.0.1:{busy}" in forced.stderr and "the container was removed" in forced.stderr
    assert "extra" not in ids(runtime, project)


def test_rendered_docker_run_makes_the_container_apply_would_make(runtime, project, tmp_path, state):
    path = config(tmp_path, project, chat_env=", MY_TOKEN: {from_env: AIGO_TEST_TOKEN}")
    command = run_cli("render", "chat", "-f", str(path), env=state).stdout
    assert 'MY_TOKEN="$AIGO_TEST_TOKEN"' in command and "--served-model-name chat" in command
    subprocess.run(
        ["bash", "-c", command], check=True, capture_output=True, env={**os.environ, "AIGO_TEST_TOKEN": "hf_x"}
    )
    plan = json.loads(run_cli("plan", "-f", str(path), "--output", "json", env=state).stdout)
    kinds = {a["address"]: a["kind"] for a in plan["actions"]}
    assert kinds["model.chat"] == "noop" and kinds["model.tools"] == "create"
    assert "MY_TOKEN=hf_x" in runtime.api.inspect_container(f"aigo-{project}-chat")["Config"]["Env"]


def test_speculative_draft_model_is_mounted_and_the_engine_starts(runtime, project, tmp_path, state):
    model_folder(tmp_path / "draft")
    extra = (
        "  spec:\n    source: {path: m}\n    context_length: 2048\n    gpus: none\n"
        "    vllm: {speculative: {method: eagle3, num_speculative_tokens: 2, draft: {path: draft}}}\n"
    )
    result = run_cli("apply", "-f", str(config(tmp_path, project, extra=extra)), "-y", env=state)
    assert result.returncode == 0, result.stdout + result.stderr
    mounts = runtime.api.inspect_container(f"aigo-{project}-spec")["Mounts"]
    assert {(m["Destination"], m["RW"]) for m in mounts} == {
        ("/models/spec", False),
        ("/models/spec.draft", False),
        ("/run/aigo", True),  # its socket's folder, the one host folder it may write
        ("/root/.cache", True),
    }
    assert chat(ROUTER_PORTS[project], "spec")["model"] == "spec"


def test_sglang_and_llamacpp_models_start_wait_and_route_beside_vllm(runtime, project, tmp_path, state):
    """The stub image stands in for all three engines (its sglang shim and /app/llama-server), so the
    generated entry points and command lines really start, readiness waits through llama.cpp's 503
    "Loading model" phase, and one router serves every alias."""
    router_port = free_port()
    model_folder(tmp_path / "m")
    (tmp_path / "gguf").mkdir()
    (tmp_path / "gguf" / "tiny-Q4_K_M.gguf").write_bytes(b"GGUF")
    stub = '{image: aigo-stub-engine, image_tag: "1"}'
    path = write_config(
        tmp_path,
        f"""
        version: 1
        project: {project}
        engines: {{vllm: {stub}, sglang: {stub}, llama.cpp: {stub}}}
        {router_yaml(router_port)}
        defaults: {{ready_timeout: 60, engine_by_format: {{safetensors-repo: sglang}}}}
        models:
          v: {{engine: vllm, source: {{path: m}}, context_length: 4096, gpus: none}}
          s: {{source: {{path: m}}, context_length: 8192, gpus: none, vllm: {{tool_call_parser: qwen3_coder}}}}
          g:
            source: {{path: gguf/tiny-Q4_K_M.gguf}}
            context_length: 2048
            gpus: none
            env: {{AIGO_STUB_LOAD_SECONDS: "1.5"}}
        """,
    )
    planned = run_cli("plan", "-f", str(path), env=state)
    assert "note: vllm settings (tool_call_parser) are ignored: this model runs on sglang" in planned.stdout
    result = run_cli("apply", "-f", str(path), "-y", env=state)
    assert result.returncode == 0, result.stdout + result.stderr
    for alias in ("v", "s", "g"):
        assert chat(router_port, alias)["model"] == alias
    inspected = {a: runtime.api.inspect_container(f"aigo-{project}-{a}") for a in ("s", "g")}
    assert inspected["s"]["Config"]["Entrypoint"] == ["python3", "-m", "sglang.launch_server"]
    assert inspected["g"]["Config"]["Entrypoint"] == ["/app/llama-server"]
    assert inspected["g"]["Config"]["Labels"][labels.ENGINE] == "llama.cpp"
    # the .gguf file alone is mounted, never the folder it sits in
    assert [(m["Source"], m["Destination"], m["RW"]) for m in inspected["g"]["Mounts"]] == [
        (str(tmp_path / "gguf" / "tiny-Q4_K_M.gguf"), "/models/g/tiny-Q4_K_M.gguf", False)
    ]
    logs = runtime.api.logs(f"aigo-{project}-g").decode()
    assert "stub engine (llama.cpp): serving ['g'] from /models/g/tiny-Q4_K_M.gguf" in logs
    # SGLang starts with --enable-metrics and llama.cpp with --metrics: the router's page has theirs
    page = httpx.get(f"http://127.0.0.1:{router_port}/metrics", timeout=10).text
    for alias, engine in (("v", "vllm"), ("s", "sglang"), ("g", "llama.cpp")):
        assert f'aigo_engine_up{{project="{project}",model="{alias}",engine="{engine}"}} 1' in page, page[-3000:]
    assert re.search(
        rf'^sglang:generation_tokens_total\{{project="{project}",model="s",engine="sglang",.*\}} [1-9]', page, re.M
    )
    assert re.search(
        rf'^llamacpp:tokens_predicted_total\{{project="{project}",model="g",engine="llama.cpp"\}} [1-9]', page, re.M
    )
    again = run_cli("plan", "-f", str(path), "--detailed-exitcode", env=state)
    assert again.returncode == 0, again.stdout


def test_compile_cache_volume_outlives_a_recreate_and_goes_with_destroy(runtime, project, tmp_path, state):
    assert run_cli("apply", "-f", str(config(tmp_path, project)), "-y", env=state).returncode == 0
    volume = cache_volume(project, "aigo-stub-engine:1")  # the volume of the engine's image
    mounts = runtime.api.inspect_container(f"aigo-{project}-chat")["Mounts"]
    assert [(m["Type"], m["Name"], m["Destination"], m["RW"]) for m in mounts if m["Type"] == "volume"] == [
        ("volume", volume, "/root/.cache", True)
    ]
    assert runtime.exec(f"aigo-{project}-chat", ["touch", "/root/.cache/compiled-graph"])[0] == 0
    changed = config(tmp_path, project, chat_env=", LOG_LEVEL: debug")
    result = run_cli("apply", "-f", str(changed), "-y", env=state)
    assert result.returncode == 0 and "1 replaced" in result.stdout, result.stdout + result.stderr
    assert runtime.exec(f"aigo-{project}-chat", ["ls", "/root/.cache/compiled-graph"])[0] == 0  # the new one sees it
    assert run_cli("destroy", "-f", str(changed), "-y", env=state).returncode == 0
    assert volume not in [v["Name"] for v in runtime.api.volumes().get("Volumes") or []]
