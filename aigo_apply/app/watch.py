"""`aigo-apply watch`: keeps the router honest between applies. It follows Docker's events for the
project's engine containers; when one dies its route is removed at once (HAProxy's health check
already answers 503 within a second), and when one starts again (Docker's restart policy, or a
manual `docker start`) its route comes back once the engine is ready. Runs in the foreground and
exits cleanly on SIGINT or SIGTERM.

Each change takes the project lock briefly, so it never races an apply; while an apply holds the
lock, the apply's own last step puts the routes right."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aigo_apply.adapters.docker_engine import DockerRuntime
from aigo_apply.adapters.runtime import Runtime
from aigo_apply.desired.spec import ModelSpec
from aigo_apply.desired.types import EngineAddress, Route
from aigo_apply.errors import EXIT_OK, AigoError, LockHeld, NotReady
from aigo_apply.observe.containers import parse_state, running_engines
from aigo_apply.platforms.docker.planning import load_desired, observe
from aigo_apply.platforms.docker.platform import router_of
from aigo_apply.platforms.docker.router_deploy import Router
from aigo_apply.platforms.docker.serving_wait import Engine, Waiter
from aigo_apply.platforms.host_context import current_host
from aigo_apply.platforms.project_lock import ProjectLock
from aigo_apply.platforms.state_dir import state_dir
from aigo_apply.platforms.views import DocumentView


@dataclass(frozen=True, kw_only=True)
class WatchRequest:
    """What `watch` asks for: the file whose models it keeps routed."""

    file: str | None = None


LOCK_WAIT = 5.0


class Watcher:
    def __init__(
        self,
        runtime: Runtime,
        router: Router,
        project: str,
        specs: dict[str, ModelSpec],
        say: Callable[[str], None],
        ready_timeout: float = 1800.0,
        state_root: Path | None = None,
    ):
        self.runtime, self.router, self.project, self.specs = runtime, router, project, specs
        self.say, self.ready_timeout, self.state_root = say, ready_timeout, state_root
        self.stop = threading.Event()

    def _slot(self, container: str) -> str:
        """Which of its model's sockets a running engine serves on (its slot label, checked)."""
        for c in parse_state(self.project, self.runtime.list_containers(), []).engines:
            if container in (c.id, c.name):
                return c.slot
        return "a"

    def _change(self, what: str, alias: str, route: Route | None = None) -> None:
        try:
            with ProjectLock(state_dir(self.project, self.state_root), self.project, "watch", LOCK_WAIT):
                self.router.refresh()
                if what == "remove":
                    if alias in self.router.routes:
                        self.router.remove(alias)
                        self.say(f"model.{alias}: container died; route removed")
                elif route is not None and self.router.routes.get(alias) != route:
                    self.router.add(route)
                    self.say(f"model.{alias}: ready again; route added")
        except LockHeld:
            self.say(f"model.{alias}: an apply is running; it will set the routes")
        except AigoError as exc:
            self.say(f"model.{alias}: could not update the router: {exc}")

    def _await_ready(self, alias: str, container: str) -> None:
        spec = self.specs.get(alias)
        if spec is None:
            return
        slot = self._slot(container)
        engine = Engine(
            alias,
            EngineAddress.of(spec, slot),
            container,
            lambda: self.runtime.state(container),
            lambda n: self.runtime.logs_tail(container, n),
        )
        try:
            Waiter(self.ready_timeout, should_stop=self.stop.is_set).wait(engine)
        except NotReady as exc:
            if not exc.interrupted:
                self.say(f"model.{alias}: started but not ready ({exc}); no route")
            return
        self._change("add", alias, Route.of(alias, spec, slot))

    def reconcile(self) -> None:
        """On start: drop routes to engines that are not running; add ready ones that are missing."""
        running = running_engines(self.project, self.runtime.list_containers())
        self.router.refresh()
        for alias in sorted(set(self.router.routes) - set(running)):
            self._change("remove", alias)
        for alias, cid in running.items():
            if alias in self.specs and alias not in self.router.routes:
                threading.Thread(target=self._await_ready, args=(alias, cid), daemon=True).start()

    def run(self) -> None:
        events = self.runtime.engine_events(self.project)

        def close_when_stopped() -> None:
            self.stop.wait()
            events.close()

        closer = threading.Thread(target=close_when_stopped, daemon=True)
        closer.start()
        self.reconcile()
        self.say(f"watching project '{self.project}' (Ctrl-C to stop)")
        try:
            for event in events:
                alias, container = event["alias"], event["container"]
                if event["action"] == "die":
                    self._change("remove", alias)
                elif event["action"] == "start":
                    threading.Thread(target=self._await_ready, args=(alias, container), daemon=True).start()
        except Exception:
            if not self.stop.is_set():
                raise

    def install_signals(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self.stop.set())


def run_watch(request: WatchRequest, view: DocumentView) -> int:
    """Until SIGINT or SIGTERM: the routes follow the engines of the file's project, through the
    router the file defines (there must be one running: the first apply makes it)."""
    host = current_host()
    desired, root = load_desired(request.file, host=host), host.state_root  # one state root for the run
    runtime = DockerRuntime(timeout=None)
    if observe(desired.project, runtime, state_root=root).router is None:
        raise AigoError(f"project '{desired.project}' has no router yet; run `aigo-apply apply` first")
    router = router_of(desired.project, desired.router.spec, runtime, desired, root)
    specs = {alias: m.spec for alias, m in desired.models.items()}
    watcher = Watcher(runtime, router, desired.project, specs, view.document, state_root=root)
    watcher.install_signals()
    watcher.run()
    view.document("watch stopped")
    return EXIT_OK
