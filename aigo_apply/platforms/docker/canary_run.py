"""The canary gate, run: the same seeded completions against the old and the new engine of a parallel
replace, once the new one is ready and before the route moves (plan/canary_verdict.py decides).

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
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, NotRequired, TypedDict

from aigo_apply.adapters.engine_http import EngineClient
from aigo_apply.desired.canary import CanarySettings
from aigo_apply.desired.types import EngineAddress
from aigo_apply.errors import AigoError, CanaryRefused, NotReady
from aigo_apply.json_types import JsonObject, json_object
from aigo_apply.observe.tokenizer_vocab import vocabulary
from aigo_apply.plan.canary_verdict import CanaryResult, Measurement, Sample, decide, differences, prompts
from aigo_apply.plan.types import Action
from aigo_apply.platforms.outcome import StepLog

if TYPE_CHECKING:
    import httpx

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


class CompletionRequest(TypedDict):
    """The body of one measured completion (POST /v1/completions)."""

    model: str
    prompt: list[int]
    max_tokens: int
    temperature: int
    ignore_eos: bool
    stream: bool
    stream_options: NotRequired[dict[str, bool]]


def replace_gate(
    action: Action, old_spec: Mapping[str, object], log: StepLog, should_stop: Callable[[], bool]
) -> Callable[[EngineAddress], JsonObject | None] | None:
    """A parallel replace's canary gate as the plan decided it: run (between the new engine's readiness
    and the route's move; refusing raises CanaryRefused), said to be skipped, or none. `old_spec`:
    the replaced engine's spec (where it serves, and its model folder)."""
    gate = action.canary
    if gate is None:
        return None
    if not gate.runs:
        log.step(action.address, "recreate", "", f"canary not run: {gate.why}")
        return None
    old = EngineAddress.of(old_spec, "a" if action.slot == "b" else "b")

    def run(new: EngineAddress) -> JsonObject | None:
        log.step(
            action.address, "recreate", "", f"canary: measuring the old and the new engine ({gate.settings.describe()})"
        )
        old_dir = old_spec.get("model_dir")
        new_dir = action.model_spec.get("model_dir") if action.model_spec else None
        dirs = (old_dir if isinstance(old_dir, str) else None, new_dir)
        try:
            result = run_gate(action.model or "", gate.settings, old, new, dirs, should_stop)
        except AigoError:
            raise
        except Exception as exc:  # anything else a hostile or broken engine causes: the gate fails, apply goes on
            raise AigoError(f"the canary gate could not measure: {type(exc).__name__}: {exc}"[:400]) from None
        log.reporter.event("canary", address=action.address, result=result.to_dict())
        if not result.verdict.passed:
            raise CanaryRefused(result.verdict.reason, result.to_dict())
        return json_object(result.to_dict())

    return run


def run_gate(
    alias: str,
    settings: CanarySettings,
    old: EngineAddress,
    new: EngineAddress,
    model_dirs: tuple[str | None, str | None],
    should_stop: Callable[[], bool] = lambda: False,
) -> CanaryResult:
    """Measure both engines and decide; the result says whether the route may move. `model_dirs`:
    the old and the new model's folders on this host (the prompts use the tokens both know)."""
    connections = max(settings.concurrency, 1)
    with (
        EngineClient(old, REQUEST_TIMEOUT, connections) as old_client,
        EngineClient(new, REQUEST_TIMEOUT, connections) as new_client,
    ):
        clients = {"old": old_client, "new": new_client}
        ids = _shared_vocabulary(alias, model_dirs, old_client)
        requests = prompts(ids, settings.requests, settings.prompt_tokens, settings.seed)
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
                name: [_completion(client, alias, p, settings.max_tokens, False, should_stop) for p in shown]
                for name, client in clients.items()
            }
            pairs = [(a, b) for a, b in zip(outputs["old"], outputs["new"], strict=True) if a.ok and b.ok]
            result.compared = len(pairs)
            result.compare_failed = len(shown) - len(pairs)
            result.output_differences = differences([a.text for a, _ in pairs], [b.text for _, b in pairs])
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
    with EngineClient(address, REQUEST_TIMEOUT, max(settings.concurrency, 1)) as client:
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
                    pool.map(
                        lambda p, c=clients[name]: _completion(c, alias, p, settings.max_tokens, True, should_stop),
                        chunk,
                    )
                )
                measured[name].wall_seconds += time.monotonic() - began
                measured[name].samples += samples
    return measured


def _shared_vocabulary(alias: str, model_dirs: tuple[str | None, str | None], client: EngineClient) -> list[int]:
    """The tokens both the old and the new model know (a replace may change the model's source):
    the old one's, less those the new one's tokenizer.json does not hold when it can be read."""
    ids = _vocabulary(alias, model_dirs[0], client)
    if model_dirs[1] and model_dirs[1] != model_dirs[0]:
        other, _ = vocabulary(model_dirs[1])
        if other:
            both = sorted(set(ids) & set(other))
            if not both:
                raise AigoError(
                    f"the canary gate cannot make its requests: the old and the new model '{alias}' share no token"
                )
            return both
    return ids


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


def _completion(
    client: EngineClient,
    alias: str,
    prompt: list[int],
    max_tokens: int,
    stream: bool = True,
    should_stop: Callable[[], bool] = lambda: False,
) -> Sample:
    """One completion, bounded: at most REQUEST_TIMEOUT in all (not only per read), at most
    MAX_EVENTS events and MAX_BYTES of text; an engine's token count is believed up to max_tokens.
    Whatever goes wrong is a failed sample, never an exception."""
    body: CompletionRequest = {
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
            with client.http.stream("POST", "/v1/completions", json=body) as reply:
                raw = _bounded(reply, began)
                if reply.status_code != 200:
                    return Sample(False, time.monotonic() - began, error=_error_of(reply.status_code, raw))
            data = json.loads(raw)
            text = "".join(str(c.get("text", "")) for c in data.get("choices", []) if isinstance(c, dict))
            tokens = _tokens((data.get("usage") or {}).get("completion_tokens"), max_tokens)
            return Sample(True, time.monotonic() - began, tokens=tokens, text=text[:MAX_BYTES])
        return _streamed(client, body, began, max_tokens, should_stop)
    except (httpx.HTTPError, OSError, ValueError, KeyError, TypeError, AttributeError, ArithmeticError) as exc:
        # a reset, a timeout, a body that is not JSON: a failed request, never a crash
        return Sample(False, time.monotonic() - began, error=f"{type(exc).__name__}: {exc}"[:300])


MAX_EVENTS_OVER = 16  # events beyond max_tokens a stream may send (role, usage, empty ones)
MAX_BYTES = 64 * 1024  # the most of one answer's text (or error body) kept


def _streamed(
    client: EngineClient, body: CompletionRequest, began: float, max_tokens: int, should_stop: Callable[[], bool]
) -> Sample:
    first: float | None = None
    tokens, chunks, size, events, done = 0, 0, 0, 0, False
    pieces: list[str] = []
    with client.http.stream("POST", "/v1/completions", json=body) as reply:
        if reply.status_code != 200:
            return Sample(False, time.monotonic() - began, error=_error_of(reply.status_code, _bounded(reply, began)))
        for line in reply.iter_lines():
            if should_stop() or time.monotonic() - began > REQUEST_TIMEOUT:
                return Sample(False, time.monotonic() - began, error="stopped: interrupted or past the time limit")
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                break
            events += 1
            if events > max_tokens + MAX_EVENTS_OVER:
                return Sample(False, time.monotonic() - began, error=f"more than {max_tokens} tokens streamed")
            event = json.loads(data)
            if not isinstance(event, dict):
                continue
            for choice in event.get("choices") or []:
                text = str(choice.get("text") or "") if isinstance(choice, dict) else ""
                if text:
                    chunks += 1
                    size += len(text)
                    if size <= MAX_BYTES:
                        pieces.append(text)
                    if first is None:
                        first = time.monotonic() - began
            usage = event.get("usage")
            if isinstance(usage, dict) and usage.get("completion_tokens"):
                tokens = _tokens(usage["completion_tokens"], max_tokens)
    if not done:
        return Sample(False, time.monotonic() - began, error="the stream ended before [DONE]")
    return Sample(
        True, time.monotonic() - began, ttft=first, tokens=tokens or min(chunks, max_tokens), text="".join(pieces)
    )


def _tokens(value: object, most: int) -> int:
    """An engine's count of its generated tokens, believed up to what was asked for."""
    if not value:
        return 0
    if not isinstance(value, str | int | float):  # JSON that is no count (an array, an object): int() refuses it
        raise TypeError(
            f"int() argument must be a string, a bytes-like object or a real number, not '{type(value).__name__}'"
        )
    return max(0, min(int(value), most))


def _bounded(reply: httpx.Response, began: float) -> str:
    """At most MAX_BYTES of an answer's body, within the request's time limit."""
    out = bytearray()
    for chunk in reply.iter_bytes():
        out += chunk
        if len(out) > MAX_BYTES or time.monotonic() - began > REQUEST_TIMEOUT:
            break
    return out[:MAX_BYTES].decode("utf-8", errors="replace")


def _error_of(status: int, text: str) -> str:
    try:
        message = json.loads(text).get("error", {}).get("message")
    except (ValueError, AttributeError):
        message = None
    return f"HTTP {status}: {str(message or text)[:200]}"
