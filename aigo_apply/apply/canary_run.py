"""The canary gate, run: the same seeded completions against the old and the new engine of a parallel
replace, once the new one is ready and before the route moves (plan/canary.py decides).

Each engine is reached on its own socket or port (adapters/engine_http.py), never through the router:
the router still sends every client to the old engine meanwhile. The rounds alternate, `concurrency`
requests at a time, old first in one round and new first in the next, so both share whatever else
loads the machine (the clients' own requests to the old engine included) and neither always goes
first; between two turns a short, untimed pause lets the engine that just worked go quiet. Each request streams, so the time to its first text is measured; the end-of-sequence token is
ignored (vLLM's ignore_eos), so both engines generate as many tokens. Bounded: `requests` per engine,
each at most REQUEST_TIMEOUT, and a Ctrl-C stops it between rounds."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from aigo_apply.adapters.engine_http import EngineClient
from aigo_apply.desired.canary import CanarySettings
from aigo_apply.desired.types import EngineAddress
from aigo_apply.errors import AigoError, NotReady
from aigo_apply.observe.tokenizer_vocab import vocabulary
from aigo_apply.plan.canary import CanaryResult, Measurement, Sample, decide, differences, prompts

REQUEST_TIMEOUT = 300.0  # one measured request, at most
# The pause before each engine's turn, not timed. An engine keeps its CPU threads busy for a moment
# after its requests end (vLLM's CPU build: about a second at 100% of a core); measured right after
# the other engine's turn (or its warm-up), the next one shares the CPU with it. Two identical vLLM
# CPU engines on two cores, 4 runs each: no pause, 0.07x to 13x of each other; 0.5 s, 0.2x; 1 s,
# within 11%; 1.5 s, within 6%. The figures a gate compares are worth the seconds.
SETTLE_S = 2.0
COMPARED_PROMPTS = 3  # greedy outputs compared with compare_output
# Text the engine's own /tokenize turns into the vocabulary when the model folder has no tokenizer.json
FALLBACK_TEXT = (
    "The quick brown fox jumps over the lazy dog while seven wizards quietly judge boxing matches; "
    "meanwhile engineers measure throughput, latency and memory on every machine they deploy to."
)


def run_gate(
    alias: str,
    settings: CanarySettings,
    old: EngineAddress,
    new: EngineAddress,
    model_dir: str | None,
    should_stop: Callable[[], bool] = lambda: False,
) -> CanaryResult:
    """Measure both engines and decide; the result says whether the route may move."""
    with EngineClient(old, REQUEST_TIMEOUT) as old_client, EngineClient(new, REQUEST_TIMEOUT) as new_client:
        clients = {"old": old_client, "new": new_client}
        requests = prompts(
            _vocabulary(alias, model_dir, old_client), settings.requests, settings.prompt_tokens, settings.seed
        )
        measured = measure(alias, settings, clients, requests, should_stop)
        result = CanaryResult(
            alias,
            settings,
            measured["old"],
            measured["new"],
            decide(measured["old"], measured["new"], settings.max_slowdown),
        )
        if settings.compare_output:
            shown = requests[:COMPARED_PROMPTS]
            outputs = {
                name: [_completion(client, alias, p, settings.max_tokens, stream=False).text for p in shown]
                for name, client in clients.items()
            }
            result.compared = len(shown)
            result.output_differences = differences(outputs["old"], outputs["new"])
        result.measured_at = datetime.now(UTC).isoformat(timespec="seconds")
        return result


def bench_engine(
    alias: str,
    settings: CanarySettings,
    address: EngineAddress,
    model_dir: str | None,
    should_stop: Callable[[], bool] = lambda: False,
) -> Measurement:
    """`aigo-apply bench`: the gate's measurement of one running engine, as it serves now."""
    with EngineClient(address, REQUEST_TIMEOUT) as client:
        requests = prompts(
            _vocabulary(alias, model_dir, client), settings.requests, settings.prompt_tokens, settings.seed
        )
        return measure(alias, settings, {"now": client}, requests, should_stop)["now"]


def measure(
    alias: str,
    settings: CanarySettings,
    clients: dict[str, EngineClient],
    requests: list[list[int]],
    should_stop: Callable[[], bool],
) -> dict[str, Measurement]:
    """Each engine's figures for the same requests: `concurrency` at a time, in rounds that take the
    engines in turn (the order turning round each time), after one unmeasured request each (a first
    request's set-up is not the engine's speed)."""
    for client in clients.values():
        _completion(client, alias, requests[0], min(settings.max_tokens, 8))
    measured = {name: Measurement(name) for name in clients}
    rounds = [requests[i : i + settings.concurrency] for i in range(0, len(requests), settings.concurrency)]
    names = list(clients)
    with ThreadPoolExecutor(max_workers=settings.concurrency, thread_name_prefix=f"aigo-canary-{alias}") as pool:
        for number, chunk in enumerate(rounds):
            for name in names if number % 2 == 0 else names[::-1]:
                if should_stop():
                    raise NotReady("interrupted while measuring", interrupted=True)
                if len(names) > 1:
                    time.sleep(SETTLE_S)  # the engine that worked last (a warm-up too) goes quiet first
                began = time.monotonic()
                samples = list(
                    pool.map(lambda p, c=clients[name]: _completion(c, alias, p, settings.max_tokens), chunk)
                )
                measured[name].wall_seconds += time.monotonic() - began
                measured[name].samples += samples
    return measured


def _vocabulary(alias: str, model_dir: str | None, client: EngineClient) -> list[int]:
    """The model's own ordinary tokens: its tokenizer.json on this host, else what the serving
    engine's /tokenize makes of a fixed text."""
    why = "the model folder is not on this host"
    if model_dir:
        ids, why = vocabulary(model_dir)
        if ids:
            return ids
    import httpx

    try:
        reply = client.post("/tokenize", json={"model": alias, "prompt": FALLBACK_TEXT, "add_special_tokens": False})
        tokens = reply.json().get("tokens") if reply.status_code == 200 else None
        if reply.status_code != 200:
            why = f"{why}; its /tokenize answered {_error_of(reply.status_code, reply.text)}"
    except (httpx.HTTPError, OSError, ValueError, AttributeError) as exc:
        tokens, why = None, f"{why}; /tokenize: {type(exc).__name__}: {exc}"
    if isinstance(tokens, list) and tokens and all(isinstance(t, int) for t in tokens):
        return list(tokens)
    raise AigoError(f"the canary gate cannot make its requests: no vocabulary of model '{alias}' ({why})")


def _completion(client: EngineClient, alias: str, prompt: list[int], max_tokens: int, stream: bool = True) -> Sample:
    body: dict[str, Any] = {
        "model": alias,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    import httpx

    began = time.monotonic()
    try:
        if not stream:
            reply = client.post("/v1/completions", json=body)
            if reply.status_code != 200:
                return Sample(False, time.monotonic() - began, error=_error_of(reply.status_code, reply.text))
            data = reply.json()
            text = "".join(c.get("text", "") for c in data.get("choices", []))
            tokens = int((data.get("usage") or {}).get("completion_tokens") or 0)
            return Sample(True, time.monotonic() - began, tokens=tokens, text=text)
        return _streamed(client, body, began)
    except (httpx.HTTPError, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        # a reset, a timeout, a body that is not JSON: a failed request, never a crash
        return Sample(False, time.monotonic() - began, error=f"{type(exc).__name__}: {exc}"[:300])


def _streamed(client: EngineClient, body: dict[str, Any], began: float) -> Sample:
    first: float | None = None
    tokens, pieces, chunks = 0, [], 0
    with client.http.stream("POST", "/v1/completions", json=body) as reply:
        if reply.status_code != 200:
            return Sample(False, time.monotonic() - began, error=_error_of(reply.status_code, reply.read().decode()))
        for event in _events(reply.iter_lines()):
            for choice in event.get("choices") or []:
                text = choice.get("text") or ""
                if text:
                    chunks += 1
                    pieces.append(text)
                    if first is None:
                        first = time.monotonic() - began
            usage = event.get("usage")
            if isinstance(usage, dict) and usage.get("completion_tokens"):
                tokens = int(usage["completion_tokens"])
    return Sample(True, time.monotonic() - began, ttft=first, tokens=tokens or chunks, text="".join(pieces))


def _events(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        event = json.loads(data)
        if isinstance(event, dict):
            yield event


def _error_of(status: int, text: str) -> str:
    try:
        message = json.loads(text).get("error", {}).get("message")
    except (ValueError, AttributeError):
        message = None
    return f"HTTP {status}: {message or text[:200]}"
