"""Another version of aigo-apply that renders the very same router files is no change to the router:
the render key names the code that rendered a generation (so a plan trusts untouched files without
rendering them), and a key of another version only means the files are rendered and compared. The
plan then leaves the router as it is, and apply writes the key afresh without a reload; a file that
really differs is still a reload."""

from __future__ import annotations

import pytest

from aigo_apply.desired.types import Route, RouterSettings
from aigo_apply.plan.planner import build_plan
from aigo_apply.platforms.docker.live_router import read_live
from aigo_apply.platforms.docker.router_deploy import Router
from aigo_apply.router import haproxy
from aigo_apply.router.haproxy import RENDER_KEY_FILE, render_files, render_key, verified_render_key

from helpers.fakes import FakeRuntime
from helpers.planner_inputs import desired, observed

SETTINGS = RouterSettings("lab", "127.0.0.1", 8000, False)
ROUTE = Route("alpha", 19000, 4096, "vllm")


@pytest.fixture
def another_version(monkeypatch):
    """Render as a version of this tool with other code (the same templates and output) would."""

    def rendered_by_it(render):
        with monkeypatch.context() as m:
            m.setattr(haproxy, "_code_digest", lambda: "another version's code")
            return render()

    return rendered_by_it


def test_the_same_files_from_another_version_are_no_reload_in_the_plan(tmp_path, another_version):
    d = desired(tmp_path)
    theirs = another_version(lambda: render_files(d.router.settings, list(d.router.routes)))
    ours = render_files(d.router.settings, list(d.router.routes))
    assert theirs[RENDER_KEY_FILE] != ours[RENDER_KEY_FILE]  # only the key differs
    assert {k: v for k, v in theirs.items() if k != RENDER_KEY_FILE} == {
        k: v for k, v in ours.items() if k != RENDER_KEY_FILE
    }
    router = build_plan(d, observed(d, files=theirs)).actions[-1]
    assert (router.kind, router.reasons, router.diff) == ("noop", ("routes match the running models",), None)


def test_a_file_that_differs_is_still_a_reload_whatever_version_rendered_it(tmp_path, another_version):
    d = desired(tmp_path)
    theirs = another_version(lambda: render_files(d.router.settings, list(d.router.routes)))
    theirs["haproxy.cfg"] = theirs["haproxy.cfg"].replace("timeout", "timeout ", 1)
    router = build_plan(d, observed(d, files=theirs)).actions[-1]
    assert router.kind == "reload_router" and router.diff and RENDER_KEY_FILE not in router.diff


def test_apply_writes_this_versions_key_over_the_same_files_without_a_reload(tmp_path, another_version):
    runtime = FakeRuntime()
    signals = []
    runtime.exec = lambda container, command: (signals.append(command), (0, ""))[1]
    folder = tmp_path / "router"
    another_version(lambda: Router(runtime, folder, SETTINGS, "aigo-lab-router", "img").prepare_first([ROUTE], False))
    before = read_live(folder)
    assert verified_render_key(before) != render_key(SETTINGS, [ROUTE])
    router = Router(runtime, folder, SETTINGS, "aigo-lab-router", "img")  # the next apply, this version
    assert router.converge({ROUTE.alias: ROUTE}) is False  # nothing reloaded
    after = read_live(folder)
    assert signals == []
    assert verified_render_key(after) == render_key(SETTINGS, [ROUTE])  # the next plan trusts the key again
    assert {k: v for k, v in after.items() if k != RENDER_KEY_FILE} == {
        k: v for k, v in before.items() if k != RENDER_KEY_FILE
    }
    assert router.converge({ROUTE.alias: ROUTE}) is False and signals == []
