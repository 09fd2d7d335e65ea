"""An engine's (or the router's) Prometheus page, read and looked into: the one place `status`
(effective settings, stalls) and `top` fetch a /metrics page, bounded in time and size, and pick
samples out of it by name and labels. What cannot be read is None, never a guess."""

from __future__ import annotations

import math
import re

from aigo_apply.adapters.engine_http import EngineClient
from aigo_apply.desired.types import EngineAddress

MAX_BYTES = 4 * 1024 * 1024  # the most of a page read (vLLM's is some 100 KiB per model)
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def fetch(address: EngineAddress | None, timeout: float) -> str | None:
    """The engine's /metrics page, at most MAX_BYTES of it; None when it does not answer 200."""
    if address is None:
        return None
    import httpx

    try:
        with EngineClient(address, timeout) as http:
            reply = http.get("/metrics")
            return reply.text[:MAX_BYTES] if reply.status_code == 200 else None
    except (httpx.HTTPError, OSError):
        return None


def fetch_url(url: str, timeout: float, key: str | None = None) -> str | None:
    """A page over TCP on this machine (the router's /metrics), with the API key when given."""
    import httpx

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        reply = httpx.get(url, headers=headers, timeout=timeout)
        return reply.text[:MAX_BYTES] if reply.status_code == 200 else None
    except (httpx.HTTPError, OSError):
        return None


def samples(text: str, name: str) -> list[tuple[dict[str, str], str]]:
    """(labels, value as written) of every sample named `name`."""
    found = []
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        after = line[len(name) : len(name) + 1]
        if after == "{":
            head, _, rest = line.partition("}")
            value = rest.split()[0] if rest.split() else ""
            found.append((dict(LABEL.findall(head)), value))
        elif after == " ":
            parts = line.split()
            found.append(({}, parts[1] if len(parts) > 1 else ""))
    return found


def total(text: str, name: str) -> float | None:
    """The sum of every sample named `name` (any labels) that is a finite number; None when there is
    none. An engine's page may say NaN or +Inf (Prometheus' text format allows both), and a count of
    NaN would end `top` in a traceback where it is turned into a whole number."""
    values = []
    for _, value in samples(text, name):
        try:
            number = float(value)
        except ValueError:
            continue
        if math.isfinite(number):
            values.append(number)
    found = sum(values) if values else None
    return found if found is None or math.isfinite(found) else None
