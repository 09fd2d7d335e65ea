"""A bounded load through the router for the replace tests and bench/changes.py: a few client threads,
each sending chat completions one after another, until told to stop or until a total count or a
time limit is reached, whichever comes first. Every request's start, end and outcome is recorded, so
a test can count what was in flight across a change and what failed."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import httpx


@dataclass
class Result:
    started: float
    ended: float
    status: int  # 0: no HTTP answer (refused, reset, timed out)
    detail: str = ""
    retry_after: str | None = None  # the answer's Retry-After header, if any


T = TypeVar("T")


@dataclass
class Across(Generic[T]):
    value: T  # what the change returned
    results: list[Result]
    began: float
    ended: float

    @property
    def during(self) -> list[Result]:
        return Load.during(self.results, self.began, self.ended)

    @property
    def failed(self) -> list[Result]:
        return Load.failed(self.results)


@dataclass
class Load:
    url: str  # the router's base URL
    model: str
    clients: int = 8
    limit: int = 5000  # requests in all, at most
    seconds: float = 120.0  # and no longer than this
    max_tokens: int = 2
    # each client's own patience for one answer: a recreate holds requests for as long as the new
    # engine takes to start, and a client that gives up first counts as failed (status 0, ReadTimeout)
    # without any error from the router; the OpenAI SDKs wait 600 s
    timeout: float = 60.0
    stream: bool = False  # SSE: a request succeeds when its stream ends with data: [DONE]
    results: list[Result] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._deadline = 0.0

    def start(self) -> Load:
        self._deadline = time.monotonic() + self.seconds
        for n in range(self.clients):
            thread = threading.Thread(target=self._client, name=f"load-{n}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> list[Result]:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)
        return list(self.results)

    def _client(self) -> None:
        body = {"model": self.model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": self.max_tokens}
        if self.stream:
            body["stream"] = True
        with httpx.Client(timeout=self.timeout) as http:
            while not self._stop.is_set() and time.monotonic() < self._deadline:
                with self._lock:
                    if len(self.results) >= self.limit:
                        return
                began = time.monotonic()
                try:
                    if self.stream:
                        result = self._streamed(http, body, began)
                    else:
                        reply = http.post(f"{self.url}/v1/chat/completions", json=body)
                        result = Result(
                            began,
                            time.monotonic(),
                            reply.status_code,
                            reply.text[:200],
                            reply.headers.get("retry-after"),
                        )
                except httpx.HTTPError as exc:
                    result = Result(began, time.monotonic(), 0, f"{type(exc).__name__}: {exc}")
                with self._lock:
                    self.results.append(result)

    def _streamed(self, http: httpx.Client, body: dict, began: float) -> Result:
        """One streamed request: 200 only when its events end with [DONE] (a stream cut short fails)."""
        with http.stream("POST", f"{self.url}/v1/chat/completions", json=body) as reply:
            if reply.status_code != 200:
                reply.read()
                return Result(
                    began, time.monotonic(), reply.status_code, reply.text[:200], reply.headers.get("retry-after")
                )
            last = ""
            for line in reply.iter_lines():
                if line.startswith("data: "):
                    last = line
        done = last == "data: [DONE]"
        return Result(
            began, time.monotonic(), 200 if done else 0, "" if done else f"stream ended without [DONE]: {last[:120]}"
        )

    def across(self, change: Callable[[], T], steady: float = 1.0, after: float = 0.5) -> Across[T]:
        """Start the load, let it settle for `steady` seconds, make `change` (an apply), let it run
        `after` seconds more, stop: the change's result, every request's, and when the change ran."""
        self.start()
        try:
            time.sleep(steady)
            began = time.monotonic()
            value = change()
            ended = time.monotonic()
            time.sleep(after)
        finally:
            results = self.stop()
        return Across(value, results, began, ended)

    @staticmethod
    def failed(results: list[Result]) -> list[Result]:
        return [r for r in results if r.status != 200]

    @staticmethod
    def during(results: list[Result], begin: float, end: float) -> list[Result]:
        """The requests in flight at some moment between `begin` and `end` (monotonic seconds)."""
        return [r for r in results if r.started < end and r.ended > begin]
