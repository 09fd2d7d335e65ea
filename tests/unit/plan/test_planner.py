"""The pure planner, with in-memory observed states built from the desired containers themselves."""

from __future__ import annotations

import json

import pytest

from aigo_apply.errors import AigoError, UsageProblem
from aigo_apply.observe.containers import parse_state
from aigo_apply.observe.hub_answer import HubAnswer
from aigo_apply.plan.facts import PlanFacts, PlanRequest
from aigo_apply.plan.lockfile import LockRestore
from aigo_apply.plan.planner import build_plan
from aigo_apply.plan.types import Action, DownloadSpec
from aigo_apply.router.haproxy import render_files

from helpers.planner_inputs import CONFIG, desired, observed, running


def kinds(plan):
    return {a.address: a.kind for a in plan.actions}


def test_empty_machine_creates_every_model_and_pulls_missing_image(tmp_path):
    d = desired(tmp_path)
    plan = build_plan(d, parse_state("lab", [], []))
    assert kinds(plan) == {
        "image.haproxy:3.2": "pull",
        "image.local/engine:1": "pull",
        "model.alpha": "create",
        "model.beta": "create",
        "router": "create",
        "download.org/beta@v1": "download",
    }
    assert [a.kind for a in plan.actions[:3]] == ["pull", "pull", "download"]  # before anything else
    create = next(a for a in plan.actions if a.address == "model.alpha")
    assert create.reasons == ("no container aigo-lab-alpha exists",)
    assert {c.path: c.after for c in create.changes}["context_length"] == 4096
    assert plan.has_changes and plan.summary["create"] == 3


def test_unchanged_file_plans_only_noops_every_time(tmp_path):
    d = desired(tmp_path)
    seen = observed(d)
    for _ in range(3):
        again = desired(tmp_path)
        plan = build_plan(again, seen)
        assert set(kinds(plan).values()) == {"noop"} and not plan.has_changes
        assert all(a.reasons for a in plan.actions)


def test_changed_parser_recreates_and_names_the_field(tmp_path):
    before = observed(desired(tmp_path))
    changed = desired(tmp_path, CONFIG.replace("tool_call_parser: hermes", "tool_call_parser: qwen3_coder"))
    plan = build_plan(changed, before, None, PlanRequest(target=frozenset(["alpha", "beta"])))
    assert kinds(plan) == {"model.alpha": "noop", "model.beta": "recreate"}
    beta = plan.actions[1]
    assert beta.reasons == ("vllm.tool_call_parser changed",)
    assert [c.to_dict() for c in beta.changes] == [
        {"path": "vllm.tool_call_parser", "before": "hermes", "after": "qwen3_coder", "effect": "recreate"}
    ]


def test_list_change_counts_as_one_value_and_added_setting(tmp_path):
    text = CONFIG.replace("gpus: none\n  beta", "gpus: [0, 1]\n  beta")
    before = observed(desired(tmp_path, text))
    text2 = text.replace("gpus: [0, 1]", "gpus: [1]").replace("max_num_seqs: 8", "max_num_seqs: 8, enforce_eager: true")
    plan = build_plan(desired(tmp_path, text2), before)
    changes = {c.path: (c.before, c.after) for a in plan.actions for c in a.changes}
    assert changes == {"gpus": ([0, 1], [1]), "vllm.enforce_eager": (None, True)}


def test_a_tag_that_now_names_another_image_recreates_its_containers(tmp_path):
    d = desired(tmp_path)
    moved = [{"Id": "sha256:new", "RepoTags": ["local/engine:1"]}, {"Id": "sha256:img", "RepoTags": ["haproxy:3.2"]}]
    plan = build_plan(d, observed(d, images=moved))
    assert kinds(plan) == {"model.alpha": "recreate", "model.beta": "recreate", "router": "noop"}
    alpha = plan.actions[0]
    assert alpha.reasons == (
        "image local/engine:1 on this machine is now sha256:new; the container runs sha256:img "
        "(the tag was pulled or rebuilt since the container was made)",
    )
    assert [c.to_dict() for c in alpha.changes] == [
        {"path": "image_id", "before": "sha256:img", "after": "sha256:new", "effect": "recreate"}
    ]
    # an image that is no longer on this machine at all says nothing about the container: no recreate
    gone = [{"Id": "sha256:img", "RepoTags": ["haproxy:3.2"]}]
    assert set(kinds(build_plan(d, observed(d, images=gone))).values()) == {"noop"}
    # nor does a container whose image id Docker did not report
    blank = running(d, alpha={"ImageID": ""}, beta={"ImageID": ""})
    assert set(kinds(build_plan(d, observed(d, blank, images=moved))).values()) == {"noop"}


def test_locked_images_are_restored_first_and_the_containers_planned_against_them(tmp_path):
    d = desired(tmp_path)
    old, new = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    entries = running(d, alpha={"ImageID": old}, beta={"ImageID": new})
    images = [
        {"Id": new, "RepoTags": ["local/engine:1"]},
        {"Id": "sha256:img", "RepoTags": ["haproxy:3.2"]},
        {"Id": old, "RepoTags": []},
    ]
    seen = observed(d, entries, images=images)
    plan = build_plan(d, seen, PlanFacts(locked_images={"local/engine:1": LockRestore(old, "retag")}))
    assert plan.actions[0].address == "image.local/engine:1" and plan.actions[0].kind == "pull"
    assert plan.actions[0].reasons == (
        f"aigo.lock records {old[:19]}; the tag names {new[:19]} now; it is still on this machine: re-tag it",
    )
    # alpha already runs the recorded image; beta runs the newer one and goes back
    assert {a.address: a.kind for a in plan.actions[1:]} == {
        "model.alpha": "noop",
        "model.beta": "recreate",
        "router": "noop",
    }
    never = build_plan(
        d,
        seen,
        PlanFacts(locked_images={"local/engine:1": LockRestore(old, "retag")}),
        PlanRequest(pull="never"),
    )
    # a re-tag needs no registry
    assert [a.address for a in never.actions if a.kind == "pull"] == ["image.local/engine:1"]
    digest = LockRestore(old, "pull", "local/engine@sha256:" + "c" * 64)
    fetch = build_plan(d, seen, PlanFacts(locked_images={"local/engine:1": digest}))
    assert [a.address for a in fetch.actions if a.kind == "pull"] == ["image.local/engine:1"]
    with pytest.raises(AigoError, match="must be pulled by its digest"):
        build_plan(d, seen, PlanFacts(locked_images={"local/engine:1": digest}), PlanRequest(pull="never"))


def test_stopped_container_starts_and_says_why(tmp_path):
    d = desired(tmp_path)
    plan = build_plan(d, observed(d, running(d, alpha={"State": "exited", "Status": "Exited (137) 2 minutes ago"})))
    assert kinds(plan)["model.alpha"] == "start"
    assert plan.actions[0].reasons == ("container is exited (exit code 137)",)
    assert kinds(plan)["router"] == "reload_router"
    assert plan.actions[-1].reasons == ("stale route: model alpha has no running container (exited)",)


def test_model_removed_from_file_is_removed(tmp_path):
    before = observed(desired(tmp_path))
    only_alpha = CONFIG[: CONFIG.index("  beta:")]
    plan = build_plan(desired(tmp_path, only_alpha), before)
    assert kinds(plan) == {"model.alpha": "noop", "model.beta": "remove", "router": "reload_router"}
    assert "no longer in" in plan.actions[1].reasons[0]
    assert plan.actions[2].reasons == ("route for model beta to be removed",)
    assert "-beta " in plan.actions[2].diff and "+++ desired/models.map" in plan.actions[2].diff


def test_replace_and_target(tmp_path):
    d = desired(tmp_path)
    seen = observed(d)
    plan = build_plan(d, seen, None, PlanRequest(replace=frozenset(["alpha"])))
    assert kinds(plan)["model.alpha"] == "recreate"
    assert plan.actions[0].reasons == ("replacement requested with --replace",)
    plan = build_plan(d, observed(d, running(d, router=True)[:1]), None, PlanRequest(target=frozenset(["beta"])))
    assert kinds(plan) == {"model.beta": "create"}
    with pytest.raises(UsageProblem, match="--replace gamma: no model 'gamma'"):
        build_plan(d, seen, None, PlanRequest(replace=frozenset(["gamma"])))
    with pytest.raises(UsageProblem, match="--target gamma"):
        build_plan(d, seen, None, PlanRequest(target=frozenset(["gamma"])))


def test_definition_change_without_setting_change_recreates(tmp_path):
    d = desired(tmp_path)
    entries = running(d)
    entries[1]["Labels"]["io.aigo-apply.spec-hash"] = "sha256:older"
    plan = build_plan(d, observed(d, entries))
    assert kinds(plan)["model.alpha"] == "recreate"
    assert "defines the container differently" in plan.actions[0].reasons[0]


def test_leftover_and_unlabelled_spec(tmp_path):
    d = desired(tmp_path)
    entries = running(d)
    backup = dict(entries[1], Id="id-backup", Names=["/aigo-lab-alpha-aigo-previous"])
    entries[2]["Labels"].pop("io.aigo-apply.spec")
    plan = build_plan(d, observed(d, entries + [backup]))
    assert [(a.kind, a.container) for a in plan.actions] == [
        ("remove", "aigo-lab-alpha-aigo-previous"),
        ("noop", "aigo-lab-alpha"),
        ("recreate", "aigo-lab-beta"),
        ("noop", "aigo-lab-router"),
    ]
    assert "no readable spec label" in plan.actions[2].reasons[0]


def test_foreign_name_and_port_conflicts_are_blockers(tmp_path):
    d = desired(tmp_path, CONFIG.replace("    context_length: 8K\n", "    context_length: 8K\n    port: 8101\n"))
    port = d.models["beta"].container.host_port
    assert port == 8101
    others = [
        {"Id": "f1", "Names": ["/aigo-lab-alpha"], "State": "running", "Labels": {}},
        {
            "Id": "f2",
            "Names": ["/web"],
            "State": "running",
            "Labels": {},
            "Ports": [{"IP": "0.0.0.0", "PrivatePort": 80, "PublicPort": port}],
        },
        {
            "Id": "f3",
            "Names": ["/proxy"],
            "State": "running",
            "Labels": {},
            "Ports": [{"IP": "127.0.0.1", "PrivatePort": 80, "PublicPort": 8000}],
        },
    ]
    plan = build_plan(d, observed(d, others))
    assert [(b.id, b.address) for b in plan.blockers] == [
        ("conflict.name", "model.alpha"),
        ("conflict.port", "model.beta"),
        ("conflict.port", "router"),
    ]
    assert "docker rm -f aigo-lab-alpha" in plan.blockers[0].remediation
    assert "set models.beta.port" in plan.blockers[1].remediation


def _router_of(d, project, state="running", network="host"):
    """The list entry of project `project`'s router made from `d` (its labels say that project)."""
    (entry,) = [e for e in running(d) if e["Id"] == "id-router"]
    labels = {**entry["Labels"], "io.aigo-apply.project": project}
    name = f"/aigo-{project}-router"
    return {**entry, "Id": f"id-{project}", "Names": [name], "State": state, "Labels": labels,
            "HostConfig": {"NetworkMode": network}}  # fmt: skip


def test_another_projects_router_on_the_same_port_blocks_the_plan(tmp_path):
    """A router is on the host network: Docker publishes nothing for it, and HAProxy binds its port
    with SO_REUSEPORT, so a second project's router on the same port would share the connections
    with the first one. Its port (from its spec label) counts as taken, like a published one."""
    d = desired(tmp_path)
    other = _router_of(d, "lab2")
    plan = build_plan(d, observed(d, running(d, router=False) + [other]))
    assert [(b.id, b.address) for b in plan.blockers] == [("conflict.port", "router")]
    port = d.router.port
    assert plan.blockers[0].message == (
        f"the router's port {port} is held by the router of aigo-apply project 'lab2' (container aigo-lab2-router)"
    )
    # a model that publishes the port another project's router holds meets the same check
    on_port = desired(tmp_path, CONFIG.replace("    context_length: 8K\n", "    context_length: 8K\n    port: 8101\n"))
    (tmp_path / "b").mkdir()
    router_8101 = desired(tmp_path / "b", CONFIG.replace("models:", "router: {port: 8101}\nmodels:"))
    plan = build_plan(on_port, observed(on_port, running(on_port) + [_router_of(router_8101, "lab2")]))
    assert [(b.id, b.address) for b in plan.blockers] == [("conflict.port", "model.beta")]
    assert "held by the router of aigo-apply project 'lab2'" in plan.blockers[0].message


@pytest.mark.parametrize(
    "change",
    [{"State": "exited"}, {"HostConfig": {"NetworkMode": "bridge"}}, {"Labels": {"io.aigo-apply.role": "router"}}],
    ids=["stopped", "not-on-the-host-network", "not-made-by-aigo-apply"],
)
def test_a_router_that_does_not_hold_the_port_is_no_conflict(tmp_path, change):
    d = desired(tmp_path)
    other = _router_of(d, "lab2") | change
    plan = build_plan(d, observed(d, running(d) + [other]))
    assert not plan.blockers, plan.blockers


def test_restarting_container_is_reported_not_recreated(tmp_path):
    d = desired(tmp_path)
    plan = build_plan(d, observed(d, running(d, state="restarting")))
    assert kinds(plan)["model.alpha"] == "noop" and kinds(plan)["model.beta"] == "noop"
    assert "restarting after a crash" in plan.actions[0].reasons[0]


def test_planner_pulls_in_no_adapter_library():
    import subprocess
    import sys

    code = (
        "import sys, aigo_apply.plan.planner, aigo_apply.desired.build, aigo_apply.plan.text; "
        "print(sorted(m for m in ('docker', 'requests', 'httpx', 'pynvml', 'huggingface_hub') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_router_create_recreate_start_and_noop(tmp_path):
    d = desired(tmp_path)
    assert kinds(build_plan(d, observed(d, running(d, router=False))))["router"] == "create"
    moved = desired(tmp_path, CONFIG + "router: {port: 9100, bind: 0.0.0.0}\n")
    plan = build_plan(moved, observed(d))
    router = [a for a in plan.actions if a.address == "router"][0]
    assert router.kind == "recreate" and router.reasons == ("bind changed", "port changed")
    assert [c.effect for c in router.changes] == ["router", "router"]
    stopped = running(d)
    stopped[0]["State"] = "exited"
    assert kinds(build_plan(d, observed(d, stopped)))["router"] == "start"
    assert kinds(build_plan(d, observed(d)))["router"] == "noop"


def test_a_router_an_earlier_version_defined_otherwise_is_recreated_with_that_reason(tmp_path):
    """Same settings, another definition (the CPU weight this version adds): the plan says so, and a
    dead router says it is dead, rather than that it is defined differently."""
    from dataclasses import replace

    from aigo_apply.desired import labels

    d = desired(tmp_path)
    containers = running(d)
    earlier = replace(d.router.container, cpu_shares=None).definition_hash()
    containers[0]["Labels"] = dict(containers[0]["Labels"], **{labels.SPEC_HASH: earlier})
    router = build_plan(d, observed(d, containers)).actions[-1]
    assert router.kind == "recreate" and router.changes == ()
    assert router.reasons == ("same settings, but this aigo-apply version defines the router container differently",)
    dead = running(d)
    dead[0]["State"] = "dead"
    router = build_plan(d, observed(d, dead)).actions[-1]
    assert router.kind == "recreate" and router.reasons == ("router container is dead",)


def test_router_files_that_differ_plan_a_reload(tmp_path):
    d = desired(tmp_path)
    files = dict(render_files(d.router.settings, list(d.router.routes)), **{"haproxy.cfg": "# an older template\n"})
    plan = build_plan(d, observed(d, files=files))
    router = plan.actions[-1]
    assert router.kind == "reload_router"
    assert router.reasons == ("the router configuration differs from what this file and aigo-apply version render",)
    assert router.diff.startswith("--- deployed/haproxy.cfg\n+++ desired/haproxy.cfg\n")


def test_untouched_deployed_files_are_trusted_by_their_render_key_without_rendering(tmp_path, monkeypatch):
    deployed = render_files(
        desired(tmp_path).router.settings, list(desired(tmp_path).router.routes)
    )  # what an earlier apply wrote, render.key included
    d = desired(tmp_path)
    monkeypatch.setattr("aigo_apply.router.haproxy.render_files", lambda *a, **k: pytest.fail("rendered"))
    assert kinds(build_plan(d, observed(d, files=deployed)))["router"] == "noop"
    assert "files" not in d.router.__dict__  # the lazy render never ran


def test_a_file_edited_behind_our_back_is_caught_despite_its_render_key(tmp_path):
    d = desired(tmp_path)
    files = dict(render_files(d.router.settings, list(d.router.routes)))
    files["models.map"] += "smuggled m_smuggled_000000\n"
    router = build_plan(d, observed(d, files=files)).actions[-1]
    assert router.kind == "reload_router" and "+smuggled" not in router.diff and "-smuggled" in router.diff


def test_api_key_reference_in_router_spec_never_a_value(tmp_path, monkeypatch):
    monkeypatch.setenv("KEYS", "sk-very-secret")
    d = desired(tmp_path, CONFIG + "router: {api_keys: {from_env: KEYS}}\n")
    assert d.router.spec["api_keys"] == {"from_env": "KEYS"}
    assert "sk-very-secret" not in repr(d.router) + repr(build_plan(d, observed(d)).to_dict())


def test_missing_model_files_are_downloaded_first_with_size_and_commit(tmp_path):
    d = desired(tmp_path)
    remote = {
        ("org/beta", "v1", None): HubAnswer(
            commit="a" * 40, bytes=16_400_000_000, files=("config.json", "m.safetensors")
        )
    }
    plan = build_plan(d, observed(d, downloaded=False, entries=[]), PlanFacts(remote=remote))
    download = next(a for a in plan.actions if a.kind == "download")
    assert download.reasons == ("org/beta@v1 is not on this machine: 2 files, 16.4 GB, commit aaaaaaaaaaaa",)
    assert download.download.dest.endswith("/org--beta/v1") and download.download.models == ("beta",)
    # a model that keeps running needs no download even when its folder is gone
    assert "download" not in kinds(build_plan(d, observed(d, downloaded=False), PlanFacts(remote=remote))).values()


def test_gated_repo_blocks_the_plan_and_an_unreachable_hub_warns(tmp_path):
    d = desired(tmp_path)
    gated = {
        ("org/beta", "v1", None): HubAnswer(error="org/beta@v1: the repo is gated", fix="request access", access=True)
    }
    plan = build_plan(d, observed(d, downloaded=False, entries=[]), PlanFacts(remote=gated))
    assert [(b.id, b.message, b.remediation, b.address) for b in plan.blockers] == [
        ("hub.access", "org/beta@v1: the repo is gated", "request access", "model.beta")
    ]
    offline = {("org/beta", "v1", None): HubAnswer(error="cannot reach the Hub", access=False)}
    plan = build_plan(d, observed(d, downloaded=False, entries=[]), PlanFacts(remote=offline))
    assert not plan.blockers and "org/beta@v1: the Hub could not tell its size (cannot reach the Hub)" in plan.warnings


def test_pre_quantized_checkpoints_get_a_note_and_a_contradicting_setting_blocks(tmp_path):
    d = desired(tmp_path)
    plan = build_plan(d, observed(d, entries=[]), PlanFacts(checkpoints={"alpha": {"quant_method": "awq"}}))
    alpha = next(a for a in plan.actions if a.address == "model.alpha")
    assert (
        alpha.notes[-1] == "pre-quantized checkpoint (awq, from config.json); the engine reads its quantization from it"
    )
    assert not plan.blockers
    text = CONFIG.replace("  alpha:\n", "  alpha:\n    vllm: {quantization: gptq_marlin}\n", 1)
    d = desired(tmp_path, text)
    plan = build_plan(d, observed(d, entries=[]), PlanFacts(checkpoints={"alpha": {"quant_method": "awq"}}))
    assert [(b.id, b.address) for b in plan.blockers] == [("model.quantization", "model.alpha")]
    assert plan.blockers[0].message.startswith(
        "models.alpha.vllm.quantization is 'gptq_marlin', but the checkpoint is quantized with 'awq'"
    )
    d = desired(tmp_path, CONFIG.replace("  alpha:\n", "  alpha:\n    vllm: {quantization: awq_marlin}\n", 1))
    assert not build_plan(
        d, observed(d, entries=[]), PlanFacts(checkpoints={"alpha": {"quant_method": "awq"}})
    ).blockers


@pytest.mark.parametrize(
    "edit",
    [
        {"repo": "org/x; rm -rf ~"},
        {"revision": "--upload-pack=evil"},
        {"revision": "main/../.."},
        {"file": "../../etc/passwd.gguf"},
        {"file": "x.bin"},
        {"dest": "/home/me/.ssh"},
        {"dest": "relative/org--beta/v1"},
        {"pin": "not-a-commit"},
    ],
)
def test_a_saved_plans_download_is_checked_again_before_it_runs(tmp_path, edit):
    from aigo_apply.errors import PlanFileError
    from aigo_apply.platforms.docker.fetch_steps import check_download

    d = desired(tmp_path)
    download = next(a for a in build_plan(d, observed(d, downloaded=False, entries=[])).actions if a.kind == "download")
    assert check_download(download) == download.download.to_spec()  # as planned: fine
    spec = DownloadSpec.from_spec({**download.download.to_spec(), **edit})
    edited = Action(download.address, "download", download.reasons, payload=spec)
    with pytest.raises(PlanFileError, match="the plan's download is not one aigo-apply makes"):
        check_download(edited)


def test_action_payloads_are_typed_and_round_trip_through_the_plan_file(tmp_path):
    from aigo_apply.errors import PlanFileError
    from aigo_apply.plan.types import Plan

    d = desired(tmp_path)
    old = "sha256:" + "a" * 64
    seen = observed(d, downloaded=False, entries=[], images=[{"Id": old, "RepoTags": []}])
    facts = PlanFacts(locked_images={"local/engine:1": LockRestore(old, "retag")})
    plan = build_plan(d, seen, facts)
    kinds_with_payload = {a.kind: a for a in plan.actions if a.kind in ("download", "create")}
    kinds_with_payload["pull"] = plan.actions[0]  # the restore comes first
    assert kinds_with_payload["pull"].restore == LockRestore(old, "retag") and kinds_with_payload["pull"].spec is None
    assert isinstance(kinds_with_payload["download"].download, DownloadSpec)
    assert kinds_with_payload["create"].spec and kinds_with_payload["create"].download is None
    data = plan.to_dict()
    assert Plan.from_dict(data) == plan
    # the JSON contract keeps one `spec` per action
    assert data["actions"][0]["spec"] == {"locked_id": old, "how": "retag"}
    for kind, damage in (
        ("download", "a string"),
        ("download", {"repo": 1}),
        ("pull", {"locked_id": "x", "how": "retag"}),
    ):
        broken = json.loads(json.dumps(data))
        next(a for a in broken["actions"] if a["kind"] == kind and "spec" in a)["spec"] = damage
        with pytest.raises(PlanFileError):
            Plan.from_dict(broken)


def test_each_action_kind_has_one_payload_type():
    from aigo_apply.errors import PlanFileError
    from aigo_apply.plan.payloads import PAYLOADS, SavedSpec
    from aigo_apply.plan.plan_file import KINDS as KINDS_OF_PLAN
    from aigo_apply.plan.types import Plan

    assert set(PAYLOADS) == set(KINDS_OF_PLAN)
    spec = SavedSpec({"engine": "vllm"})
    assert Action("model.a", "create", ("r",), payload=spec).spec == {"engine": "vllm"}
    for kind, payload in (
        ("remove", spec),
        ("pull", spec),
        ("create", LockRestore("sha256:" + "a" * 64, "retag")),
        ("download", None),
    ):
        with pytest.raises(TypeError, match="payload"):
            Action("model.a", kind, ("r",), payload=payload)
    saved = Plan("lab", "aigo.yaml", "sha256:" + "0" * 64, (Action("container.x", "remove", ("r",)),)).to_dict()
    saved["actions"][0]["spec"] = {"engine": "vllm"}  # a remove has no payload: an edited plan
    with pytest.raises(PlanFileError, match="edited by hand"):
        Plan.from_dict(saved)
