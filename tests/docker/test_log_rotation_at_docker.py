"""Bounded logs on the real Docker engine: a chatty stub engine (AIGO_STUB_CHATTY_LINES) and the router
made with a tiny rotation (10k x 2 files), and planned again as they are. Docker holds each container to it on disk (the files in
its LogPath's folder, read as root), and `aigo-apply logs` keeps working across rotations: it shows the
newest lines, reads the rotated file too, `--since` keeps to its window, and a `--follow` started before
the rotations keeps printing after them, line after line, until Ctrl-C."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from helpers.cli import ROOT, run_cli
from helpers.configs import free_port, model_folder, write_config

PER_SECOND = 40  # ~155 bytes a line in Docker's JSON: a 10k file holds ~65 lines, a rotation every ~1.6 s
MAX_SIZE = 10 * 1024
NUMBER = re.compile(r"stub engine: chatty line (\d{8}) ")


def numbers(lines) -> list[int]:
    return [int(m[1]) for m in map(NUMBER.search, lines) if m]


@pytest.fixture
def chatty(tmp_path, project):
    model_folder(tmp_path / "m")
    env = {"AIGO_STATE_DIR": str(tmp_path / "state")}
    path = str(
        write_config(
            tmp_path,
            textwrap.dedent(f"""
            version: 1
            project: {project}
            engines: {{vllm: {{image: aigo-stub-engine, image_tag: "1"}}}}
            router: {{port: {free_port()}, image: aigo-haproxy, image_tag: bookworm, logs: {{max_files: 2}}}}
            defaults: {{ready_timeout: 60, logs: {{max_size: 10k}}}}
            models:
              chat:
                source: {{path: m}}
                context_length: 4096
                gpus: none
                logs: {{max_files: 2}}
                env: {{AIGO_STUB_LOAD_SECONDS: "0.5", AIGO_STUB_CHATTY_LINES: "{PER_SECOND}"}}
            """),
        )
    )
    applied = run_cli("apply", "-f", path, "-y", env=env, timeout=180)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    yield path, env
    run_cli("destroy", "-f", path, "-y", env=env)


def log_files(runtime, name: str) -> dict[str, int]:
    """The container's json-file logs on disk (the current one and the rotated ones), by size."""
    found = runtime.api.inspect_container(name)
    current = Path(found["LogPath"])
    return {p.name: p.stat().st_size for p in current.parent.glob(current.name + "*")}


def test_each_container_is_made_with_the_rotation_the_file_asks_for_and_then_plans_nothing(chatty, runtime, project):
    for name in (f"aigo-{project}-chat", f"aigo-{project}-router"):
        config = runtime.api.inspect_container(name)["HostConfig"]["LogConfig"]
        assert config == {"Type": "json-file", "Config": {"max-file": "2", "max-size": "10k"}}, name
    path, env = chatty
    again = run_cli("plan", "--detailed-exitcode", "-f", path, env=env)
    assert again.returncode == 0 and "No changes." in again.stdout, again.stdout + again.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="reading Docker's own log files (its LogPath) needs root")
def test_logs_stay_bounded_on_disk_and_logs_follow_and_since_read_across_rotations(chatty, runtime, project):
    path, env = chatty
    name = f"aigo-{project}-chat"
    follower = subprocess.Popen(
        [sys.executable, "-m", "aigo_apply", "logs", "chat", "--follow", "--tail", "0", "-f", path],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
        cwd=ROOT,
    )
    seen: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [seen.put(line) for line in follower.stdout], daemon=True).start()
    followed: list[str] = []
    largest, rotations, last_files = 0, 0, None
    try:
        deadline = time.monotonic() + 12  # several rotations while it follows (one every ~1.6 s)
        while time.monotonic() < deadline:
            files = log_files(runtime, name)
            assert len(files) <= 2 and all(size <= MAX_SIZE + 1024 for size in files.values()), files
            largest = max(largest, sum(files.values()))
            if last_files is not None and set(files) == set(last_files) and files != last_files:
                rotations += sum(files[f] < last_files[f] for f in files)  # the current file started again
            last_files = files
            try:
                followed.append(seen.get(timeout=0.2))
            except queue.Empty:
                continue
        before = numbers(followed)[-1]  # the newest line the follower printed so far

        newest = run_cli("logs", "chat", "--tail", "3", "-f", path, env=env)
        assert newest.returncode == 0, newest.stderr
        shown = numbers(newest.stdout.splitlines())
        assert len(shown) == 3 and shown == list(range(shown[0], shown[0] + 3)) and shown[-1] >= before, newest.stdout

        everything = numbers(run_cli("logs", "chat", "-f", path, env=env).stdout.splitlines())
        current = Path(runtime.api.inspect_container(name)["LogPath"]).read_text().count("chatty line")
        assert everything == list(range(everything[0], everything[-1] + 1))  # whole, in order, to the newest
        assert len(everything) > current  # the rotated file is read too
        assert len(everything) * 100 < MAX_SIZE * 2 + 2048 and everything[0] > PER_SECOND * 6  # the oldest are gone

        mark = time.monotonic()
        recent = run_cli("logs", "chat", "--since", "1s", "-f", path, env=env)
        took = time.monotonic() - mark
        assert recent.returncode == 0, recent.stderr
        window = numbers(recent.stdout.splitlines())
        assert window and window == list(range(window[0], window[-1] + 1)), recent.stdout
        assert len(window) <= PER_SECOND * (1 + took) + 5  # a second's lines (and the call's), not the files'
        assert window[0] > everything[0] and window[-1] > everything[-1]  # later than the files' oldest lines
    finally:
        follower.send_signal(signal.SIGINT)
        _, err = follower.communicate(timeout=20)
    assert follower.returncode == 130 and "Traceback" not in err, err
    while not seen.empty():
        followed.append(seen.get())
    got = numbers(followed)
    assert rotations >= 3, rotations  # the current file started over while it followed
    assert len(got) >= PER_SECOND * 8, len(got)  # ~12 s of lines: far more than two 10k files hold
    # in order, none lost; Docker 20.10's follower prints the line it read last before a rotation once more
    # (`docker logs -f` does the same), so a line may come twice in a row, at most once a file
    whole = [n for i, n in enumerate(got) if i == 0 or n != got[i - 1]]
    assert whole == list(range(got[0], got[-1] + 1)), "a line was lost or came out of order across a rotation"
    assert len(got) - len(whole) <= len(got) // 50 + 1, got
    assert got[-1] >= before and largest <= 2 * (MAX_SIZE + 1024)
