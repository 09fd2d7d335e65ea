"""Waits until an engine really serves: `/health` answers 200 (connection refused is normal while
vLLM loads: it only listens once the engine is ready; llama.cpp answers 503 meanwhile), the alias is
listed by `/v1/models`, and a one-token chat completion succeeds. Polls with a capped backoff,
reports progress with the elapsed time and the engine's latest log line, and fails at once when the
container exits while loading.
Everything goes to the engine's own address on this machine (adapters/engine_http.py): its Unix
socket, or the port it publishes on 127.0.0.1.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from aigo_apply.adapters.engine_http import EngineClient, listening
from aigo_apply.desired.types import EngineAddress
from aigo_apply.errors import NotReady
from aigo_apply.json_types import JsonObject, number

FIRST_DELAY, MAX_DELAY, BACKOFF = 0.02, 0.1, 1.5  # a low cap keeps apply within 0.1 s of the engine
STATE_EVERY = 0.5  # how often to ask Docker whether the container still runs
PROGRESS_EVERY = 5.0
UNREADABLE_MODELS = "health ok, /v1/models unreadable"
UNREADABLE_TRIES = 20  # answers in a row (a second or two of polling): an engine that loads does not answer so
MAX_MODELS_BYTES = 4 * 1024 * 1024


def listed_ids(body: bytes) -> set[str] | None:
    """The ids an engine's GET /v1/models lists; None when the answer is not such a list (not JSON, no
    `data` list, an entry that is not an object with a string id, or larger than MAX_MODELS_BYTES)."""
    if len(body) > MAX_MODELS_BYTES:
        return None
    try:
        data = json.loads(body).get("data")
    except (ValueError, AttributeError, RecursionError):
        return None
    if not isinstance(data, list) or not all(isinstance(m, dict) and isinstance(m.get("id"), str) for m in data):
        return None
    return {m["id"] for m in data}


@dataclass
class Engine:
    """What the wait needs to know about one engine container."""

    alias: str
    address: EngineAddress
    container: str
    state: Callable[[], JsonObject]  # Docker's State object of the container ({} when gone)
    logs: Callable[[int], list[str]]  # last N log lines


@dataclass
class Waiter:
    timeout: float
    should_stop: Callable[[], bool] = lambda: False
    on_progress: Callable[[str, float, str, str], None] | None = None  # alias, elapsed, stage, last log line
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    request_timeout: float = 10.0

    def wait(self, engine: Engine) -> float:
        """Block until `engine` is ready; return the seconds it took. Raises NotReady.

        While the engine refuses connections (vLLM loading) only a connect is tried, which is
        cheap enough to do every 0.1 s; the HTTP client is imported meanwhile, in the background."""
        start = self.clock()
        delay, next_report, next_state, stage = FIRST_DELAY, start + PROGRESS_EVERY, start, "loading"
        unreadable = 0
        client = _ClientLoader(engine.address, self.request_timeout)
        try:
            while True:
                if self.should_stop():
                    raise NotReady(f"interrupted while waiting for model '{engine.alias}'", interrupted=True)
                now = self.clock()
                if now >= next_state:
                    self._check_alive(engine)
                    next_state = now + STATE_EVERY
                if listening(engine.address):
                    stage = self._probe(client, engine.alias) or stage
                    if stage == "ready":
                        self._check_alive(engine)
                        return self.clock() - start
                    unreadable = unreadable + 1 if stage == UNREADABLE_MODELS else 0
                    if unreadable >= UNREADABLE_TRIES:  # not loading: the engine answers, unreadably
                        raise NotReady(
                            f"model '{engine.alias}': the engine answers /health, but its GET /v1/models answer "
                            f"cannot be read ({UNREADABLE_TRIES} times in a row: not an OpenAI model list with an "
                            "id in each entry); it is not an engine aigo-apply can serve through the router",
                            engine.logs(20),
                        )
                now = self.clock()
                elapsed = now - start
                if elapsed > self.timeout:
                    raise NotReady(
                        f"model '{engine.alias}' was not ready after {self.timeout:.0f} s "
                        f"(last stage: {stage}); raise models.{engine.alias}.ready_timeout if it "
                        "needs longer",
                        engine.logs(20),
                    )
                if self.on_progress and now >= next_report:
                    lines = engine.logs(1)
                    self.on_progress(engine.alias, elapsed, stage, lines[-1] if lines else "")
                    next_report = now + PROGRESS_EVERY
                self.sleep(delay)
                delay = min(delay * BACKOFF, MAX_DELAY)
        finally:
            client.close()

    def _check_alive(self, engine: Engine) -> None:
        state = engine.state()
        if not state or state.get("Status") in ("exited", "dead") or state.get("Restarting"):
            code = state.get("ExitCode") if state else None
            gone = "disappeared" if not state else f"exited with code {code}"
            raise NotReady(
                f"the container of model '{engine.alias}' {gone} while loading", engine.logs(20), number(code)
            )

    def _probe(self, client: _ClientLoader, alias: str) -> str | None:
        """One pass over the three checks; returns how far the engine got, or None when unreachable."""
        import httpx

        try:
            http = client.get()
            if http.get("/health").status_code != 200:
                return "starting"
            models = http.get("/v1/models")
            if models.status_code != 200:
                return "health ok, model not listed"
            listed = listed_ids(models.content)
            if listed is None:
                return UNREADABLE_MODELS
            if alias not in listed:
                return "health ok, model not listed"
            reply = http.post(
                "/v1/chat/completions",
                json={"model": alias, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1},
            )
            return "ready" if reply.status_code == 200 else f"test completion answered {reply.status_code}"
        except (httpx.HTTPError, OSError, ValueError, AttributeError):
            return None


class _ClientLoader:
    """An engine client whose (slow) httpx import starts at once in a background thread."""

    def __init__(self, address: EngineAddress, timeout: float):
        self.address, self.timeout = address, timeout
        self.client: EngineClient | None = None
        self._thread = threading.Thread(target=self._import, daemon=True)
        self._thread.start()

    @staticmethod
    def _import() -> None:
        import httpx  # noqa: F401

    def get(self) -> EngineClient:
        if self.client is None:
            self._thread.join()
            self.client = EngineClient(self.address, self.timeout)
        return self.client

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
