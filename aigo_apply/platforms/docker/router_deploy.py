"""The router's deployment: deploys the rendered HAProxy files and reloads the router container without
dropping a request.

Layout of the router's state folder (mounted read-only at /usr/local/etc/haproxy/aigo):
  gen-N/      one generation of files: haproxy.cfg, models.map, models.lua (the /v1/models service),
              models.json (the routed models, for plan and status), errors/, api-keys (0600),
              routes.json (the route table it was rendered from) and check.cfg (the same config
              naming gen-N's own files, so `haproxy -c` checks exactly the new files)
  live        a symlink to the generation in service; the config names its files under live/

A reload: write gen-N+1, check it with `haproxy -c` inside the router image, swap `live` atomically,
send SIGUSR2 to the HAProxy master from inside the container (the old worker finishes its requests;
never `docker kill --signal`, which Docker counts as a manual stop: see reload_signal), then check
that the router now routes exactly the new models (the x-aigo-routes header of its /v1/models). On any failure the previous generation is put back.
Routes change through add() (after a model is ready), remove() (before it stops) and converge() (the
last step of an apply, and watch); stage() only prepares and checks the next generation early.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from aigo_apply.adapters.runtime import Runtime
from aigo_apply.desired.engines.router import ROUTER_MOUNT
from aigo_apply.desired.types import SOCKETS_FOLDER, Route, RouterSettings
from aigo_apply.errors import AigoError, RouterError
from aigo_apply.platforms.docker.hold_lease import LEASES, clear_lapsed
from aigo_apply.platforms.docker.live_router import live_routes, read_live
from aigo_apply.router.haproxy import KEYS_FILE, MODEL_HOLDS, ROUTES_HEADER, keys_file, render_files
from aigo_apply.router.haproxy_swap import HOLDS
from aigo_apply.router.render_key import RENDER_KEY_FILE, render_key, served_files, verified_render_key

if TYPE_CHECKING:
    import httpx

# the reload signal, sent from inside the router container to its PID 1, HAProxy's master (every
# HAProxy image has a POSIX shell: the official Debian and Alpine ones, and the tests' Debian one)
RELOAD_COMMAND = ("sh", "-c", "kill -USR2 1")
VERIFY_TIMEOUT = 10.0
DRAIN_POLL = 0.1  # how often a drain looks at the router's processes
DRAIN_MARGIN = 5.0  # beyond router.timeout: the longest an old worker may still be finishing a request


class Router:
    def __init__(
        self,
        runtime: Runtime,
        folder: Path,
        settings: RouterSettings,
        container: str,
        image: str,
        keys: list[str] | None = None,
        user: str | None = None,
    ):
        self.runtime, self.folder, self.settings = runtime, folder, settings
        self.sockets_dir = str(folder.parent / SOCKETS_FOLDER)  # the state folder holds both
        self.container, self.image, self.keys, self.user = container, image, keys, user
        self.routes: dict[str, Route] = {r.alias: r for r in live_routes(folder)}
        self.held: frozenset[str] = frozenset()  # models whose requests wait while their engine is replaced
        clear_lapsed(folder / HOLDS / MODEL_HOLDS)  # a killed apply's: its next reload renders them unheld
        self._lock = threading.Lock()
        self._pending: dict[str, Route] = {}
        self._pending_lock = threading.Lock()
        self._staged: dict[str, tuple[str, dict[str, Route], dict[str, Route]]] = {}  # alias -> gen, base, wanted

    def refresh(self) -> None:
        """Re-read the live route table (another process may have changed it)."""
        with self._lock:
            self.routes = {r.alias: r for r in live_routes(self.folder)}

    # -- the Routes protocol the executor uses --------------------------------------------------
    def stage(self, route: Route) -> None:
        """While an engine loads: write and check (`haproxy -c`) the generation that adds its route to
        the routes in service, so that add() after readiness only swaps, signals and verifies. Purely
        an optimisation: if anything changed meanwhile, or the check fails, add() does the full reload."""
        with self._lock:
            wanted = {**self.routes, route.alias: route}
            if wanted == self.routes:
                return
            gen = self._write_generation(list(wanted.values()))
            try:
                self._check(gen, running=True)
            except AigoError:
                shutil.rmtree(self.folder / gen, ignore_errors=True)
                return
            self._staged[route.alias] = (gen, dict(self.routes), wanted)

    def add(self, route: Route) -> None:
        """Add a route. Adds that arrive while a reload runs are served by the next single reload."""
        with self._pending_lock:
            self._pending[route.alias] = route
        with self._lock:
            with self._pending_lock:
                batch, self._pending = self._pending, {}
            wanted = {**self.routes, **batch}
            staged = self._staged.pop(route.alias, None)
            if staged and staged[1] == self.routes and staged[2] == wanted:
                self._commit(staged[0], wanted)
                return
            if staged:
                shutil.rmtree(self.folder / staged[0], ignore_errors=True)
            if batch and wanted != self.routes:
                self._deploy(wanted)

    def remove(self, alias: str) -> None:
        with self._lock:
            if alias in self.routes:
                self._deploy({a: r for a, r in self.routes.items() if a != alias})

    def converge(self, routes: dict[str, Route]) -> bool:
        """Serve exactly `routes`, reloading only when they or the rendered files differ (the same
        files rendered by another version of this tool are rekeyed, not reloaded)."""
        with self._lock:
            if routes == self.routes:
                live = read_live(self.folder)
                key = render_key(self.settings, list(routes.values()), None, self.held)
                if verified_render_key(live) == key or self._rekey(live):
                    return False
            self._deploy(dict(routes))
            return True

    def rekey(self) -> bool:
        """When the files in service are what this version renders for the routes in service but
        another version rendered them: this version's render key, written over the old one in place.
        HAProxy reads the very same files, so nothing is reloaded, and the next plan trusts the key
        again instead of rendering the files. False (nothing written) when the files differ."""
        with self._lock:
            return self._rekey(read_live(self.folder))

    def _rekey(self, live: dict[str, str]) -> bool:
        rendered = render_files(self.settings, list(self.routes.values()), held=self.held)
        gen = os.readlink(self.folder / "live") if (self.folder / "live").is_symlink() else ""
        if served_files(rendered) != served_files(live) or not re.fullmatch(r"gen-[0-9]+", gen):
            return False
        staged = self.folder / f"{RENDER_KEY_FILE}.next"  # beside the generations: never read as one of their files
        staged.write_text(rendered[RENDER_KEY_FILE], encoding="utf-8")
        os.replace(staged, self.folder / gen / RENDER_KEY_FILE)
        return True

    def prepare_first(self, routes: list[Route], check: bool = True) -> None:
        """Write a generation for a router container that is about to be created (no signal)."""
        with self._lock:
            self._deploy({r.alias: r for r in routes}, running=False, check=check)

    # -- one reload ---------------------------------------------------------------------------
    def _deploy(self, routes: dict[str, Route], running: bool = True, check: bool = True) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        previous = os.readlink(self.folder / "live") if (self.folder / "live").is_symlink() else None
        gen = self._write_generation(list(routes.values()))
        try:
            if check:
                self._check(gen, running)
        except RouterError:
            shutil.rmtree(self.folder / gen, ignore_errors=True)
            raise
        if running:
            self._commit(gen, routes)
        else:
            self._point_live_at(gen)
            self.routes = routes
            self._prune(keep={gen, previous})

    def _commit(self, gen: str, routes: dict[str, Route]) -> None:
        """Swap `live` to a checked generation, signal the master, verify; put the previous back on failure."""
        previous = os.readlink(self.folder / "live") if (self.folder / "live").is_symlink() else None
        self._point_live_at(gen)
        try:
            self._signal_reload()
            self._verify(sorted(routes))
        except AigoError as exc:
            if previous:
                self._point_live_at(previous)
                try:
                    self._signal_reload()
                except AigoError:
                    pass
            raise RouterError(
                f"the router did not take the new routes ({exc}); the previous configuration was put back"
            ) from None
        self.routes = routes
        self._prune(keep={gen, previous})

    def _signal_reload(self) -> None:
        """SIGUSR2 to HAProxy's master, which is PID 1 of the router container, sent by a process inside
        it (RELOAD_COMMAND). Not `docker kill --signal`: Docker marks a container it signalled as
        manually stopped (https://github.com/moby/moby/issues/41302), and `unless-stopped` then
        restarts it neither after a crash nor after a reboot."""
        code, output = self.runtime.exec(self.container, list(RELOAD_COMMAND))
        if code != 0:
            shown = " ".join(output.split())[:200] or "no output"
            raise RouterError(f"could not signal the router's HAProxy to reload (exit code {code}: {shown})")

    def _write_generation(self, routes: list[Route]) -> str:
        numbers = [int(p.name[4:]) for p in self.folder.glob("gen-*") if p.name[4:].isdigit()]
        gen = f"gen-{max(numbers, default=0) + 1}"
        target = self.folder / gen
        files = render_files(self.settings, routes, held=self.held)
        files["check.cfg"] = render_files(self.settings, routes, conf=f"{ROUTER_MOUNT}/{gen}", held=self.held)[
            "haproxy.cfg"
        ]
        files["routes.json"] = json.dumps([r.to_dict() for r in sorted(routes)], indent=1) + "\n"
        keys = keys_file(self.keys or []) if self.settings.api_keys else None  # checked before any file is written
        try:
            for name, text in files.items():
                path = target / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
            if self.settings.api_keys:
                fd = os.open(target / KEYS_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "w", encoding="ascii") as f:
                    f.write(keys or "")
        except OSError as exc:
            shutil.rmtree(target, ignore_errors=True)
            raise RouterError(f"cannot write the router's files in {target}: {exc.strerror or exc}") from None
        return gen

    def _check(self, gen: str, running: bool) -> None:
        command = ["-c", "-f", f"{ROUTER_MOUNT}/{gen}/check.cfg"]  # not -q: it would hide the ALERT lines
        if running:
            code, output = self.runtime.exec(self.container, ["haproxy"] + command)
        else:
            code, output = self.runtime.run_once(
                self.image, command, ["haproxy"], {str(self.folder): ROUTER_MOUNT}, user=self.user
            )
        if code != 0:
            lines = check_output(output)
            raise RouterError(
                "the new router configuration failed `haproxy -c`; the router keeps serving the "
                "previous one:\n    " + "\n    ".join(lines)
            )

    def _point_live_at(self, gen: str) -> None:
        tmp = self.folder / "live.next"
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        os.symlink(gen, tmp)
        os.replace(tmp, self.folder / "live")

    def _models_reply(self) -> httpx.Response:
        """One GET /v1/models of the serving router, with the API key when it has one."""
        import httpx

        host = local_host(self.settings.bind)
        headers = {"Authorization": f"Bearer {self.keys[0]}"} if self.settings.api_keys and self.keys else {}
        return httpx.get(f"http://{host}:{self.settings.port}/v1/models", headers=headers, timeout=2)

    def wait_listed(self, aliases: set[str], timeout: float) -> set[str]:
        """Wait until GET /v1/models lists every one of `aliases` (their engines pass the router's
        health check); the ones it still does not list after `timeout`."""
        import httpx

        deadline, missing = time.monotonic() + timeout, set(aliases)
        while missing:
            try:
                reply = self._models_reply()
                cards = reply.json().get("data", []) if reply.status_code == 200 else []
                missing = set(aliases) - {c.get("id") for c in cards if isinstance(c, dict)}
            except (httpx.HTTPError, ValueError, AttributeError):
                pass
            if not missing or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        return missing

    def answer(self) -> str:
        """One GET /v1/models (with the key): "" when this project's router answers it (ROUTES_HEADER,
        which only the files aigo-apply renders send), else what answered (most programs answer
        /health with 200, so that is never taken for the router)."""
        import httpx

        try:
            reply = self._models_reply()
        except httpx.HTTPError as exc:
            return str(exc) or type(exc).__name__
        ours = reply.status_code == 200 and ROUTES_HEADER in reply.headers
        return "" if ours else f"HTTP {reply.status_code} without the {ROUTES_HEADER} header of this project's router"

    def _verify(self, expected: list[str]) -> None:
        """Wait until the router serves exactly the new aliases: its /v1/models names every routed
        alias in a header (the body lists only those whose engine is healthy right now)."""
        import httpx

        deadline, last = time.monotonic() + VERIFY_TIMEOUT, "no answer"
        while time.monotonic() < deadline:
            try:
                reply = self._models_reply()
                routed = reply.headers.get(ROUTES_HEADER)
                listed = sorted(routed.split()) if routed is not None else None
                if reply.status_code == 200 and listed == expected:
                    return
                last = f"HTTP {reply.status_code}, routes {listed if listed is not None else '(not named)'}"
            except httpx.HTTPError as exc:
                last = str(exc) or type(exc).__name__
            time.sleep(0.01)
        raise AigoError(f"after {VERIFY_TIMEOUT:.0f} s it still answers {last}, expected models {expected}")

    def _prune(self, keep: set[str | None]) -> None:
        keep = keep | {staged[0] for staged in self._staged.values()}
        for path in self.folder.glob("gen-*"):
            if path.name not in keep:
                shutil.rmtree(path, ignore_errors=True)

    def hold(self, alias: str, seconds: float, route: Route | None = None, to: Route | None = None) -> None:
        """From now until release(alias), the model's new requests wait in the router (at most
        router.hold_seconds each) instead of reaching its engine, which apply is about to stop.
        `route`: where its engine serves until then, routed if the router does not route it yet (a
        router this apply made anew routes only the models it leaves as they are): a held model
        without a route would answer 404 "does not exist" for as long as the replace takes. `to`:
        where the held requests go once free, when that is another engine (a replace that starts the
        new one on the model's other socket): the holding worker sends them where its configuration
        says, so the model is routed there from now on."""
        folder = self.folder / HOLDS / MODEL_HOLDS
        try:
            LEASES.hold(folder / alias, seconds)  # renewed while this apply runs (platforms/docker/hold_lease.py)
        except OSError as exc:
            raise RouterError(f"cannot hold model {alias}'s requests in {folder}: {exc.strerror or exc}") from None
        with self._lock:
            self.held = self.held | {alias}
            routes = dict(self.routes)
            if route is not None:
                routes.setdefault(alias, route)
            if to is not None:
                routes[alias] = to
            self._deploy(routes)

    def release(self, alias: str) -> None:
        """The held requests go on (to the new engine, once the router sees it up), and the model's
        requests are no longer held."""
        try:
            LEASES.release(self.folder / HOLDS / MODEL_HOLDS / alias)
        except OSError:
            pass  # the lease lapses by itself
        with self._lock:
            if alias in self.held:
                self.held = self.held - {alias}
                self._deploy(dict(self.routes))

    def drain(self) -> float:
        """Wait until no HAProxy worker older than the last reload is left: every request that one
        took has then been answered, so an engine the new routes no longer name may stop. Bounded
        by router.timeout (HAProxy's hard-stop-after ends a worker then); returns the seconds waited."""
        start = time.monotonic()
        deadline = start + self.settings.timeout_s + DRAIN_MARGIN
        while time.monotonic() < deadline:
            try:
                if self.runtime.process_count(self.container) <= 2:  # the master and its current worker
                    break
            except AigoError:
                break  # no router to ask: nothing can still be on its way through it
            time.sleep(DRAIN_POLL)
        return time.monotonic() - start

    def remove_files(self) -> None:
        """destroy: the router is gone, so are its routes (and, its engines gone too, their sockets)."""
        shutil.rmtree(self.folder, ignore_errors=True)
        shutil.rmtree(self.sockets_dir, ignore_errors=True)


def local_host(bind: str) -> str:
    """Where this machine reaches a router bound to `bind`, as a URL's host (IPv6 in brackets)."""
    if bind in ("0.0.0.0", "127.0.0.1"):
        return "127.0.0.1"
    if bind == "::":
        return "[::1]"
    return f"[{bind}]" if ":" in bind else bind


def check_output(output: str, most: int = 8) -> list[str]:
    """The lines of `haproxy -c` that say what is wrong (ALERTs first, else the last lines)."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    alerts = [ln for ln in lines if "ALERT" in ln or "rror" in ln]
    return (alerts or lines)[:most] or ["(haproxy printed nothing)"]
