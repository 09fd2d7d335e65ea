"""Apply's part of swap groups (config/swap_groups.py): an on-demand model is started and
proven ready like any other (a one-token completion), then put to sleep unless it is one of its
group's first `max_awake` models. Before one of a group's models starts, the group's awake models
are put to sleep (a starting vLLM needs its memory fraction free), and the group is *held*: a file
in the router's state folder that tells the router to run no swap of that group until apply is done
with it. At the end, the group's first models are woken and the hold is released.

Engines are reached at their own address, as the readiness wait does (their Unix socket): POST
/sleep?level=1&mode=wait (running requests finish first), POST /wake_up, GET /is_sleeping (vLLM with
VLLM_SERVER_DEV_MODE=1)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from aigo_apply.adapters import engine_http
from aigo_apply.config.defaults import DEFAULT_READY_TIMEOUT
from aigo_apply.config.swap_groups import SwapGroup, membership
from aigo_apply.desired.spec import ModelSpec
from aigo_apply.desired.types import EngineAddress
from aigo_apply.errors import AigoError
from aigo_apply.plan.types import Plan
from aigo_apply.platforms.docker.hold_lease import LEASES
from aigo_apply.platforms.outcome import StepLog
from aigo_apply.router.haproxy_swap import HOLDS

CALL_TIMEOUT = 300.0  # one /sleep or /wake_up (level 1 moves the weights between GPU and host memory)
HOLD_MARGIN = 600.0  # seconds a hold outlives the longest start it covers
STARTING = ("start", "create", "recreate")


def engine_call(address: EngineAddress, method: str, path: str, timeout: float = CALL_TIMEOUT) -> tuple[int, str]:
    """One call to an engine's control endpoint; (0, reason) when there is no answer."""
    return engine_http.call(address, method, path, timeout)


class SwapSteps:
    """What apply does for the swap groups of one plan. `call` reaches an engine (tests pass a fake)."""

    def __init__(
        self,
        plan: Plan,
        groups: tuple[SwapGroup, ...],
        log: StepLog,
        router_folder: Path | None,
        routed: dict[str, EngineAddress] | None = None,
        call: Callable[[EngineAddress, str, str], tuple[int, str]] = engine_call,
    ):
        self.groups = membership(groups)
        self.log, self.call = log, call
        self.holds = router_folder / HOLDS if router_folder is not None else None
        self.addresses: dict[str, EngineAddress] = dict(routed or {})
        self.addresses.update(
            {
                a.model: EngineAddress.of(a.spec)
                for a in plan.actions
                if a.model and a.spec and "context_length" in a.spec
            }
        )
        self.touched: dict[str, SwapGroup] = {}
        self._lock = threading.Lock()
        # a hold expires on its own (an apply killed with -9 cannot release it): the longest start of
        # this plan, and some margin
        starts = [a.ready_timeout or DEFAULT_READY_TIMEOUT for a in plan.actions if a.model and a.kind in STARTING]
        self.hold_seconds = max(starts, default=DEFAULT_READY_TIMEOUT) + HOLD_MARGIN
        self._clear_stale_holds()

    def group(self, alias: str, spec: ModelSpec | None) -> SwapGroup | None:
        return self.groups.get(alias) if spec and spec.get("on_demand") else None

    # -- before a model of a group starts --------------------------------------------------------
    def before_start(self, alias: str, spec: ModelSpec | None) -> None:
        """Hold the group and put its awake models (other than `alias`) to sleep, so the starting
        engine finds its memory free. A model that cannot be put to sleep is reported, not fatal:
        the start then shows whether the memory sufficed."""
        group = self.group(alias, spec)
        if group is None:
            return
        with self._lock:
            self.touched[group.name] = group
        self._hold(group)
        for member in group.members:
            address = self.addresses.get(member)
            if member == alias or address is None or not self._awake(address):
                continue
            status, text = self.call(address, "POST", "/sleep?level=1&mode=wait")
            where = f"model.{member}"
            if status == 200:
                self.log.step(where, "sleep", "ok", f"{member} put to sleep: model {alias} of its swap group starts")
            else:
                self.log.step(where, "sleep", "failed", f"{member} could not be put to sleep ({status} {text})")

    # -- once it is ready ------------------------------------------------------------------------
    def after_ready(self, alias: str, spec: ModelSpec | None, address: EngineAddress) -> None:
        """Proven ready: now it sleeps, unless it is one of the group's first max_awake models."""
        group = self.group(alias, spec)
        if group is None or alias in group.first:
            return
        status, text = self.call(address, "POST", "/sleep?level=1&mode=wait")
        if status != 200:
            raise AigoError(
                f"model {alias} is ready but could not be put to sleep: the engine answered {status} {text}"
            )
        self.log.step(f"model.{alias}", "sleep", "ok", f"{alias} is ready and now sleeps until a request names it")

    # -- at the end ------------------------------------------------------------------------------
    def finish(self) -> None:
        """Wake the first max_awake models of each group apply touched, then release its hold."""
        for group in self.touched.values():
            try:
                for member in group.first:
                    address = self.addresses.get(member)
                    if address is None or self._awake(address) is not False:
                        continue
                    status, text = self.call(address, "POST", "/wake_up")
                    outcome = "ok" if status == 200 else "failed"
                    detail = "awake" if status == 200 else f"could not be woken ({status} {text})"
                    self.log.step(
                        f"model.{member}", "wake", outcome, f"{member} {detail}: first of swap group {group.name}"
                    )
            finally:
                self._release(group)

    def _awake(self, address: EngineAddress) -> bool | None:
        """True/False from GET /is_sleeping; None when the engine does not answer it."""
        status, text = self.call(address, "GET", "/is_sleeping")
        if status != 200:
            return None
        compact = text.replace(" ", "")
        return '"is_sleeping":false' in compact if '"is_sleeping":' in compact else None

    def _hold(self, group: SwapGroup) -> None:
        if self.holds is None:
            return
        try:
            LEASES.hold(self.holds / group.name, self.hold_seconds)  # renewed while apply runs
        except OSError as exc:
            self.log.step("router", "hold", "failed", f"could not hold swap group {group.name}: {exc.strerror or exc}")

    def _clear_stale_holds(self) -> None:
        """Holds an earlier apply left (killed before it released them): only one apply of a project
        runs at a time (its lock), so none of them is anyone's any more."""
        if self.holds is None or not self.holds.is_dir():
            return
        for path in self.holds.iterdir():
            if path.is_file() and not path.is_symlink():
                path.unlink(missing_ok=True)

    def _release(self, group: SwapGroup) -> None:
        if self.holds is not None:
            try:
                LEASES.release(self.holds / group.name)
            except OSError:
                pass
