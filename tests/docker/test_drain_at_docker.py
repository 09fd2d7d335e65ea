"""A replaced engine stops only once it has no request in hand: the router stops sending it requests and
its previous worker finishes the ones it forwarded, then the engine's own count of running requests
(its /metrics) must reach 0, so a request that reached the engine another way (here: straight on its
socket, as a canary or `bench` does) is answered, not cut by the stop. Both ways of replacing."""

from __future__ import annotations

import threading
import time

import pytest

from helpers.cli import run_cli
from helpers.stub_project import chat, config, engine_addresses

pytestmark = pytest.mark.docker


@pytest.mark.parametrize("update", ["recreate", "parallel"])
def test_a_request_running_on_the_old_engine_finishes_before_it_stops(runtime, project, tmp_path, update):
    state = {"AIGO_STATE_DIR": str(tmp_path / "state")}
    slow = ', AIGO_STUB_REPLY_SECONDS: "4"'
    extra_update = f"    update: {update}\n"
    path = config(tmp_path, project, chat_env=slow)
    text = path.read_text().replace("  chat:\n", "  chat:\n" + extra_update, 1)
    path.write_text(text)
    assert run_cli("apply", "-f", str(path), "-y", env=state).returncode == 0
    socket = engine_addresses(runtime, project)["chat"]
    answers: list[object] = []

    def direct() -> None:
        try:
            answers.append(chat(socket, "chat")["model"])
        except Exception as exc:
            answers.append(exc)

    request = threading.Thread(target=direct)
    request.start()
    time.sleep(0.5)  # it runs on the engine now, for 4 s
    changed = path.read_text().replace('AIGO_STUB_REPLY_SECONDS: "4"', 'AIGO_STUB_REPLY_SECONDS: "3"')
    path.write_text(changed)
    applied = run_cli("apply", "-f", str(path), "-y", env=state)
    request.join(timeout=30)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert answers == ["chat"], answers  # answered by the old engine, not cut
    assert "the engine's own in" in applied.stdout, applied.stdout
