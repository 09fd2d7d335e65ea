"""Foreign state on the real Docker daemon: a container aigo-apply did not make that holds one of the
names it uses (the kept copy of a replace), a container that copies a model's labels under another
name, and a user's volume of the cache volume's name. Plan says why each is left alone (a blocker
for a name the tool needs, a warning for the impostor); apply and destroy leave every one of them
exactly as it was; the cache volume the tool makes itself carries its labels and goes with destroy."""

from __future__ import annotations

import pytest

from aigo_apply.desired import labels
from aigo_apply.desired.engines.common import cache_volume, legacy_cache_volume

from helpers.cli import run_cli
from helpers.stub_project import config

IDLE = "aigo-test-idle:1"


@pytest.fixture
def state(tmp_path):
    return {"AIGO_STATE_DIR": str(tmp_path / "state")}


@pytest.fixture
def made(runtime):
    """Run idle containers with the given name and labels (as `docker run --label` would); removed afterwards."""
    ids = []

    def run(name: str, with_labels: dict[str, str] | None = None) -> str:
        cid = runtime.api.create_container(IDLE, name=name, labels=with_labels or {})["Id"]
        ids.append(cid)
        runtime.api.start(cid)
        return cid

    yield run
    for cid in ids:
        try:
            runtime.api.remove_container(cid, force=True)
        except Exception:  # already gone with the project's containers
            pass


def look(runtime, cid: str) -> tuple[str, str, bool, str]:
    """What must not change: name, labels, running, and when it last started."""
    info = runtime.api.inspect_container(cid)
    return (
        info["Name"],
        repr(sorted(info["Config"]["Labels"].items())),
        info["State"]["Running"],
        info["State"]["StartedAt"],
    )


def test_foreign_containers_in_our_names_or_with_our_labels_are_never_touched(runtime, project, tmp_path, state, made):
    path = config(tmp_path, project)
    first = run_cli("apply", "-f", str(path), "-y", env=state)
    assert first.returncode == 0, first.stdout + first.stderr
    chat = runtime.api.inspect_container(f"aigo-{project}-chat")
    kept_name = f"aigo-{project}-chat-aigo-previous"
    kept = made(kept_name)  # someone's own container at the name a replace keeps the old chat under
    impostor_name = f"test_foreign_state-{project}-evil"
    impostor = made(impostor_name, chat["Config"]["Labels"])  # chat's labels, copied onto another name
    foreign = {cid: look(runtime, cid) for cid in (kept, impostor, chat["Id"])}

    plan = run_cli("plan", "-f", str(path), "--replace", "chat", env=state)
    out = plan.stdout + plan.stderr
    assert plan.returncode == 1 and "Traceback" not in out, out
    assert f"a container named {kept_name} exists but is not managed by aigo-apply" in out, out
    assert f"docker rm -f {kept_name}" in out and f"docker rename {kept_name}" in out, out
    assert f"container {impostor_name} carries project '{project}' labels" in out, out
    assert f"not aigo-{project}-chat" in out, out

    applied = run_cli("apply", "-f", str(path), "--replace", "chat", "-y", env=state)
    assert applied.returncode == 1 and "the plan is blocked" in applied.stderr, applied.stdout + applied.stderr
    assert {cid: look(runtime, cid) for cid in foreign} == foreign  # chat was not stopped around it either

    destroyed = run_cli("destroy", "-f", str(path), "-y", env=state)
    out = destroyed.stdout + destroyed.stderr
    assert destroyed.returncode == 0 and "Destroy complete: 2 removed, router removed." in out, out
    assert f"{kept_name} is named like project '{project}' containers" in out, out
    assert f"container {impostor_name} carries project '{project}' labels" in out, out
    for cid in (kept, impostor):
        assert look(runtime, cid) == foreign[cid]
    names = {c["Names"][0].lstrip("/") for c in runtime.list_containers()}
    assert f"aigo-{project}-chat" not in names and f"aigo-{project}-router" not in names


def test_the_cache_volume_is_labelled_ours_and_a_users_volume_of_its_name_is_kept(runtime, project, tmp_path, state):
    ours = cache_volume(project, "aigo-stub-engine:1")  # the compile cache of the engine's image
    path = config(tmp_path, project)
    assert run_cli("apply", "-f", str(path), "-y", env=state).returncode == 0
    assert runtime.volume_labels(ours) == labels.for_volume(project, "aigo-stub-engine:1") | {
        labels.CREATED_BY: runtime.volume_labels(ours)[labels.CREATED_BY]
    }
    gone = run_cli("destroy", "-f", str(path), "-y", env=state)
    assert gone.returncode == 0 and f"removed the cache volume {ours}" in gone.stdout, gone.stdout + gone.stderr
    assert runtime.volume_labels(ours) is None

    volume = legacy_cache_volume(project)  # the one name per project an earlier aigo-apply used
    runtime.api.create_volume(name=volume, labels={"owner": "me"})  # the user's own, of that name
    runtime.api.create_volume(name=f"{volume}-x")  # and one beside it
    try:
        assert run_cli("apply", "-f", str(path), "-y", env=state).returncode == 0
        assert runtime.volume_labels(volume) == {"owner": "me"}  # apply never relabels it
        kept = run_cli("destroy", "-f", str(path), "-y", env=state)
        assert kept.returncode == 0, kept.stdout + kept.stderr
        assert f"kept the volume {volume}" in kept.stderr and f"docker volume rm {volume}" in kept.stderr
        assert runtime.volume_labels(volume) == {"owner": "me"}
        assert runtime.volume_labels(f"{volume}-x") == {}
    finally:
        runtime.remove_volume(f"{volume}-x")
