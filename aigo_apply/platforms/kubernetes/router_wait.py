"""Waiting until the router routes a model: after the model's Deployment is Available and the router
has rolled out, the router itself is asked, through the API server's service proxy
(`GET /api/v1/namespaces/NS/services/ROUTER:http/proxy/...`: no port-forward, no pod IP), until it
lists the model as healthy. HAProxy's `/v1/models` (templates/models.lua.j2) lists only the routed
models whose health check passes right now, so a model listed there is one the router sends requests
to.

A router with API keys refuses `/v1/models` without `Authorization: Bearer KEY`, and the API server
cannot carry that header: it authenticates the caller with Authorization and removes the header
before proxying (https://github.com/kubernetes/kubernetes/issues/38775), and a router key sent there
would be handed to the API server as a credential. So for such a router the check reads HAProxy's
Prometheus `/metrics` instead: `haproxy_backend_active_servers` of the model's backend, the same
health check's verdict. Unless `router.metrics_without_key`, that page needs a key too: the wait sends
it as `X-Aigo-Router-Key` (a header the service proxy passes on; the API server already holds the key,
in the router's Secret), which the router takes for `GET /metrics` only and never forwards.

One GET per poll whatever the number of models awaited, with a capped backoff; each model has its
own deadline; the clock and sleep are passed in, so tests run in no time."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from aigo_apply.config.kube_names import router_name
from aigo_apply.json_types import JsonMap

FIRST_DELAY, MAX_DELAY, BACKOFF = 0.25, 2.0, 1.5  # HAProxy checks every 500 ms: a routed model shows fast
PROGRESS_EVERY = 5.0
MODELS_PATH = "/v1/models"
METRICS_PATH = "/metrics"
PROBE_HEADER = "X-Aigo-Router-Key"  # the router takes a key in it for GET /metrics only (templates/haproxy.cfg.j2)
ROUTED, TIMED_OUT, INTERRUPTED = "routed", "timed out", "interrupted"
MAP_KEY = "models.map"  # the router ConfigMap's key of the alias -> backend map (router/haproxy.py)
_ACTIVE = re.compile(r'haproxy_backend_active_servers\{[^}]*\bproxy="([^"]+)"[^}]*\}\s+([0-9.eE+-]+)')


class ProxyClient(Protocol):
    namespace: str

    def proxy_get(
        self, service: str, port: str, path: str, headers: dict[str, str] | None = None
    ) -> tuple[int, str]: ...


def routes(config_map_data: JsonMap) -> dict[str, str]:
    """alias -> HAProxy backend, from the router ConfigMap's models.map ({} when it has none)."""
    out: dict[str, str] = {}
    for line in str(config_map_data.get(MAP_KEY) or "").splitlines():
        parts = line.split()
        if len(parts) == 2:
            out[parts[0]] = parts[1]
    return out


def listed_models(text: str) -> set[str]:
    """The ids of an OpenAI model list (/v1/models); an unreadable body lists none."""
    try:
        body = json.loads(text)
    except ValueError:
        return set()
    data = body.get("data") if isinstance(body, dict) else None
    return {str(m["id"]) for m in data or [] if isinstance(m, dict) and "id" in m} if isinstance(data, list) else set()


def healthy_backends(text: str) -> set[str]:
    """The backends with at least one server up, from HAProxy's Prometheus exposition."""
    out = set()
    for line in text.splitlines():
        match = _ACTIVE.fullmatch(line.strip())
        if match:
            try:
                if float(match.group(2)) >= 1:
                    out.add(match.group(1))
            except ValueError:
                continue
    return out


def _answer(code: int, text: str) -> str:
    """An answer that is no model list, in a few words (an API server Status's message when it is one)."""
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    said = str(body.get("message") or "") if isinstance(body, dict) else text.strip()
    return f"the router's Service answered {code}" + (f": {said[:200]}" if said else "")


@dataclass
class RouterWait:
    """Waits until the router of `project` routes each awaited alias; see the module's docstring."""

    client: ProxyClient
    project: str
    routes: dict[str, str]  # alias -> backend, as the router's ConfigMap has them
    api_keys: bool = False  # the router refuses /v1/models without a key: read /metrics instead
    key: str | None = None  # one of the router's keys, for its /metrics (sent as PROBE_HEADER)
    port: str = "http"  # the router Service's port name
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    interrupted: threading.Event = field(default_factory=threading.Event)
    on_progress: Callable[[str, float, str], None] | None = None  # alias, elapsed seconds, what it waits for

    @property
    def service(self) -> str:
        return router_name(self.project)

    @property
    def path(self) -> str:
        return METRICS_PATH if self.api_keys else MODELS_PATH

    def seen(self) -> tuple[set[str], str]:
        """(the aliases the router routes now, what it answered): one GET through the service proxy.
        A refused permission (403) raises the client's error."""
        headers = {PROBE_HEADER: f"Bearer {self.key}"} if self.api_keys and self.key else None
        code, text = self.client.proxy_get(self.service, self.port, self.path, headers)
        if code != 200:
            return set(), _answer(code, text)
        if self.api_keys:
            up = healthy_backends(text)
            found = {alias for alias, backend in self.routes.items() if backend in up}
        else:
            found = listed_models(text) & set(self.routes)
        return found, f"it routes {', '.join(sorted(found)) or 'no model'}"

    def wait(self, deadlines: dict[str, float]) -> dict[str, tuple[str, float, str]]:
        """Block until the router routes each alias, or the alias's deadline (a clock time) passes:
        alias -> (ROUTED | TIMED_OUT | INTERRUPTED, seconds waited, the router's last answer)."""
        start = self.clock()
        pending, done = dict(deadlines), {}
        answer = "no answer yet"
        delay, next_report = FIRST_DELAY, start + PROGRESS_EVERY
        while pending:
            if self.interrupted.is_set():
                done.update({a: (INTERRUPTED, self.clock() - start, answer) for a in pending})
                break
            found, answer = self.seen()
            now = self.clock()
            for alias in sorted(pending):
                if alias in found:
                    done[alias] = (ROUTED, now - start, answer)
                    del pending[alias]
                elif now >= pending[alias]:
                    done[alias] = (TIMED_OUT, now - start, answer)
                    del pending[alias]
            if not pending:
                break
            if self.on_progress and now >= next_report:
                next_report = now + PROGRESS_EVERY
                for alias in sorted(pending):
                    self.on_progress(alias, now - start, f"waiting for the router to route it ({answer})")
            self.sleep(max(min(delay, min(pending.values()) - now), 0.0))
            delay = min(delay * BACKOFF, MAX_DELAY)
        return done

    def failure(self, alias: str, waited: float, answer: str) -> str:
        """Why model `alias` counts as failed though its Deployment is Available."""
        check = "its backend has no server up in /metrics" if self.api_keys else "it is not in /v1/models"
        return (
            f"the router does not route model '{alias}' yet: {check} after {waited:.0f} s ({answer}); HAProxy's "
            f"health checks of the model's /health have not passed (its Service, or the engine's /health, does "
            f"not answer the router); see `kubectl -n {self.client.namespace} logs deploy/{self.service}`"
        )
