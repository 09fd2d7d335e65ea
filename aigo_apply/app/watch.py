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

from aigo_apply.adapters.runtime import Runtime
from aigo_apply.apply.project_lock import ProjectLock
from aigo_apply.apply.serving_wait import Engine, Waiter
from aigo_apply.apply.state_dir import state_dir
from aigo_apply.desired.types import EngineAddress, Route
from aigo_apply.errors import AigoError, LockHeld, NotReady
from aigo_apply.observe.containers import running_engines
from aigo_apply.router.deploy import Router

LOCK_WAIT = 5.0


class Watcher:
    def __init__(
        self,
        runtime: Runtime,
        router: Router,
        project: str,
        routes: dict[str, Route],
        say: Callable[[str], None],
        addresses: dict[str, EngineAddress],
        ready_timeout: float = 1800.0,
    ):
        self.runtime, self.router, self.project, self.desired = runtime, router, project, routes
        self.say, self.addresses, self.ready_timeout = say, addresses, ready_timeout
        self.stop = threading.Event()

    def _change(self, what: str, alias: str) -> None:
        try:
            with ProjectLock(state_dir(self.project), self.project, "watch", LOCK_WAIT):
                self.router.refresh()
                if what == "remove":
                    if alias in self.router.routes:
                        self.router.remove(alias)
                        self.say(f"model.{alias}: container died; route removed")
                elif alias in self.desired and self.router.routes.get(alias) != self.desired[alias]:
                    self.router.add(self.desired[alias])
                    self.say(f"model.{alias}: ready again; route added")
        except LockHeld:
            self.say(f"model.{alias}: an apply is running; it will set the routes")
        except AigoError as exc:
            self.say(f"model.{alias}: could not update the router: {exc}")

    def _await_ready(self, alias: str, container: str) -> None:
        address = self.addresses.get(alias)
        if alias not in self.desired or address is None:
            return
        engine = Engine(
            alias,
            address,
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
        self._change("add", alias)

    def reconcile(self) -> None:
        """On start: drop routes to engines that are not running; add ready ones that are missing."""
        running = running_engines(self.project, self.runtime.list_containers())
        self.router.refresh()
        for alias in sorted(set(self.router.routes) - set(running)):
            self._change("remove", alias)
        for alias, cid in running.items():
            if alias in self.desired and alias not in self.router.routes:
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
