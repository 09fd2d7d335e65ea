"""The pure parser of the Docker API's container list, on a response recorded from a real daemon
(tests/fixtures/docker-api-list.json: two of our containers, one stopped, and a foreign one)."""

from __future__ import annotations

import json

from aigo_apply.observe.containers import parse_state

from helpers.paths import FIXTURES

RECORDED = json.loads((FIXTURES / "docker-api-list.json").read_text())


def test_recorded_list_splits_ours_and_others():
    state = parse_state("rec", RECORDED["containers"], RECORDED["images"])
    assert [c.name for c in state.ours] == ["aigo-rec-chat", "aigo-rec-tools"]
    assert [c.name for c in state.others] == ["someone-elses"]
    chat, tools = state.ours
    assert (chat.state, chat.alias, chat.role) == ("running", "chat", "engine")
    assert chat.ports == (("127.0.0.1", 24001, 8000),)
    assert chat.spec["vllm"]["tool_call_parser"] == "hermes"
    assert chat.spec_hash.startswith("sha256:")
    assert (tools.state, tools.exit_code, tools.ports) == ("exited", 0, ())
    assert state.others[0].host_ports == {24003}
    assert state.images["aigo-test-idle:1"].startswith("sha256:")


def test_another_project_is_not_ours():
    state = parse_state("other", RECORDED["containers"], [])
    assert state.ours == () and len(state.others) == 3


def test_fingerprint_follows_state_changes():
    state = parse_state("rec", RECORDED["containers"], RECORDED["images"])
    same = parse_state("rec", list(reversed(RECORDED["containers"])), RECORDED["images"])
    assert state.fingerprint() == same.fingerprint()
    changed = json.loads(json.dumps(RECORDED["containers"]))
    changed[1]["State"] = "running"
    assert parse_state("rec", changed, RECORDED["images"]).fingerprint() != state.fingerprint()
    assert parse_state("rec", RECORDED["containers"], []).fingerprint() != state.fingerprint()


def test_odd_entries_do_not_break_the_parser():
    state = parse_state("rec", [{"Id": "abc", "Labels": None, "Ports": None, "Names": None}], [{"RepoTags": None}])
    assert state.others[0].name == "abc" and state.others[0].state == "unknown"
    bad_label = {
        "Id": "x",
        "Names": ["/aigo-rec-x"],
        "State": "running",
        "Labels": {
            "io.aigo-apply.managed-by": "aigo-apply",
            "io.aigo-apply.project": "rec",
            "io.aigo-apply.spec": "{not json",
        },
    }
    state = parse_state("rec", [bad_label], [])  # labels the tool could not have written: damaged
    assert state.ours == () and "container aigo-rec-x" in state.damaged[0]
