"""Before an engine that is being replaced stops: wait until its own count of running and waiting
requests is 0. The router has stopped sending it requests by then (it holds the model's, or routes
them to the new engine) and its previous worker has finished every request it forwarded; this is the
engine's side of the same question, so a request that reached the engine some other way (a canary
or `bench` on its socket, a router worker that a reload started meanwhile) is not cut by the stop.
Bounded by router.timeout (a request cannot run longer through the router); an engine whose
/metrics cannot be read is not waited for (the router's drain stands alone then)."""

from __future__ import annotations

import time
from collections.abc import Callable

from aigo_apply.adapters.engine_metrics import fetch, total
from aigo_apply.config.engine_kinds import ENGINES
from aigo_apply.desired.types import EngineAddress

POLL_S = 0.1
READ_TIMEOUT_S = 2.0
# per engine kind, the gauges of requests it has in hand: running, and admitted but not yet running
IN_HAND = {name: (kind.running_metric, kind.waiting_metric) for name, kind in ENGINES.items()}


def in_hand(text: str, engine: str) -> float | None:
    """The requests the engine says it has (running plus waiting); None when its page does not say."""
    counts = [total(text, name) for name in IN_HAND.get(engine, ())]
    known = [c for c in counts if c is not None]
    return sum(known) if known else None


def wait_idle(
    address: EngineAddress,
    engine: str,
    budget_s: float,
    should_stop: Callable[[], bool] = lambda: False,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[float, float | None]:
    """Poll the engine's /metrics until it has no request in hand, at most `budget_s` seconds: the
    seconds waited, and the requests still in hand when it gave up (0 when idle, None when unknown)."""
    start = clock()
    left: float | None = None
    while True:
        text = fetch(address, READ_TIMEOUT_S)
        left = in_hand(text, engine) if text is not None else None
        if left is None or left <= 0 or should_stop() or clock() - start >= budget_s:
            return clock() - start, (0.0 if left is not None and left <= 0 else left)
        sleep(POLL_S)
