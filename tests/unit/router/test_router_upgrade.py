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
from aigo_apply.router import render_key as key_module
from aigo_apply.router.haproxy import render_files
from aigo_apply.router.render_key import (
    RENDER_KEY_FILE,
    render_key,
    rendered_elsewhere,
    served_files,
    verified_render_key,
)

from helpers.fakes import FakeRuntime
from helpers.planner_inputs import desired, observed

SETTINGS = RouterSettings("lab", "127.0.0.1", 8000, False)
ROUTE = Route("alpha", 19000, 4096, "vllm")


@pytest.fixture
def another_version(monkeypatch):
    """Render as a version of this tool with other code (the same templates and output) would."""

    def rendered_by_it(render):
        with monkeypatch.context() as m:
            m.setattr(key_module, "code_digest", lambda: "another version's code")
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
    assert rendered_elsewhere(before) and verified_render_key(before) != render_key(SETTINGS, [ROUTE])
    generations = sorted(p.name for p in folder.iterdir())
    router = Router(runtime, folder, SETTINGS, "aigo-lab-router", "img")  # the next apply, this version
    assert router.converge({ROUTE.alias: ROUTE}) is False  # nothing reloaded
    after = read_live(folder)
    assert signals == [] and sorted(p.name for p in folder.iterdir()) == generations  # the same generation
    assert verified_render_key(after) == render_key(SETTINGS, [ROUTE]) and not rendered_elsewhere(after)
    assert served_files(after) == served_files(before)
    assert router.converge({ROUTE.alias: ROUTE}) is False and signals == []


def test_a_key_older_versions_wrote_without_the_code_counts_as_another_versions():
    assert rendered_elsewhere({RENDER_KEY_FILE: '{"inputs": "x", "files": "y"}\n'})
    assert rendered_elsewhere({RENDER_KEY_FILE: "[1]"}) and rendered_elsewhere({RENDER_KEY_FILE: "{"})
    assert rendered_elsewhere({})
    assert not rendered_elsewhere(render_files(SETTINGS, [ROUTE]))


def test_rekey_writes_nothing_when_the_files_differ(tmp_path, another_version):
    folder = tmp_path / "router"
    another_version(lambda: Router(FakeRuntime(), folder, SETTINGS, "r", "img").prepare_first([ROUTE], False))
    cfg = folder / "live" / "haproxy.cfg"
    cfg.write_text(cfg.read_text() + "# changed by hand\n")
    before = read_live(folder)
    assert Router(FakeRuntime(), folder, SETTINGS, "r", "img").rekey() is False
    assert read_live(folder) == before


def test_a_no_op_apply_rekeys_the_router_another_version_rendered(tmp_path, another_version, monkeypatch):
    """apply with nothing to change (the executor never runs): the router's key is written afresh
    in `settled`, so the plans after an upgrade stop rendering the router's files."""
    from aigo_apply.platforms.docker.platform import _rekey_router

    monkeypatch.setenv("AIGO_STATE_DIR", str(tmp_path / "state"))
    d = desired(tmp_path)
    folder = tmp_path / "state" / "lab" / "router"
    rt = FakeRuntime()
    another_version(
        lambda: Router(rt, folder, d.router.settings, "r", "img").prepare_first(list(d.router.routes), False)
    )
    plan = build_plan(d, observed(d, files=read_live(folder)))
    assert not plan.has_changes and plan.actions[-1].kind == "noop"
    _rekey_router(plan, rt, d, folder.parent)
    assert not rendered_elsewhere(read_live(folder))
    assert build_plan(d, observed(d, files=read_live(folder))).actions[-1].kind == "noop"
