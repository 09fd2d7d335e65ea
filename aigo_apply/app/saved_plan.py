"""A saved plan (`apply PLANFILE`), read as something nobody reviewed: bounded, strict JSON, its
shape checked; then the plan made now must be the one it approved (same fingerprint, same actions),
and any readiness waiver it carries is repeated by the person applying it. Nothing else from the
file is used to act. `plan --out` writes one (save_plan)."""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any

from aigo_apply import safe_write
from aigo_apply.errors import PlanFileError
from aigo_apply.plan import plan_file
from aigo_apply.plan.plan_file import REMAKE
from aigo_apply.plan.text import shown
from aigo_apply.plan.types import Plan


def save_plan(plan: Plan, path: Path) -> None:
    """`plan --out`: the plan's JSON contract, written the one safe way (aigo_apply/safe_write.py)."""
    text = json.dumps(plan.to_dict(), indent=2) + "\n"
    safe_write.write(path, text, expect=safe_write.ANY, new_mode=0o644, error=PlanFileError, what="plan file")


def config_of(saved: Plan) -> str:
    """The config file a saved plan names, when it looks like one (a .yaml/.yml regular file): it
    is only read to make the plan again, which must then equal the saved one."""
    path = Path(saved.config_file)
    try:
        usable = path.suffix.lower() in (".yaml", ".yml") and path.is_file()
    except (OSError, ValueError):  # a name too long for this system
        usable = False
    if not usable:
        raise PlanFileError(
            f"the plan names {shown(saved.config_file)} as its config file, which is not a .yaml file here; "
            "pass the config file with -f (nothing was changed)"
        )
    return saved.config_file


MAX_PLAN_BYTES = 16 * 1024 * 1024  # a plan file is a few KiB


def read_plan(path: Path) -> Plan:
    """A saved plan, read as something nobody reviewed: at most MAX_PLAN_BYTES of a regular file,
    strict UTF-8 JSON (no BOM, no duplicate key, no NaN or Infinity), then its shape checked
    (Plan.from_dict). Every way it can be wrong is a PlanFileError naming the file, never a traceback."""
    name = shown(path)
    raw = _read(path, name)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise PlanFileError(f"{name}:{line}: the plan file is not UTF-8 text (byte {exc.start}); {REMAKE}") from None
    if text.startswith("\ufeff"):
        raise PlanFileError(f"{name}:1: the plan file starts with a byte order mark; {REMAKE}")
    try:
        data = json.loads(text, object_pairs_hook=_unique, parse_constant=_refuse_constant, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise PlanFileError(f"{name}:{exc.lineno}:{exc.colno}: not a JSON plan file ({exc.msg}); {REMAKE}") from None
    except RecursionError:
        raise PlanFileError(f"{name}: the plan nests deeper than {plan_file.MAX_DEPTH} levels; {REMAKE}") from None
    except (ValueError, PlanFileError) as exc:
        raise PlanFileError(f"{name}: {exc}; {REMAKE}") from None
    try:
        return Plan.from_dict(data)
    except PlanFileError as exc:
        raise PlanFileError(f"{name}: {exc}") from None


def _read(path: Path, name: str) -> bytes:
    """At most MAX_PLAN_BYTES of a regular file: a FIFO, device or folder is refused before any read
    (O_NONBLOCK: opening a FIFO without a writer does not wait)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as exc:
        raise PlanFileError(f"{name}: cannot read the plan file: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PlanFileError(
                f"{name} is not a regular file; pass the file `aigo-apply plan --out` wrote (nothing was changed)"
            )
        if os.fstat(fd).st_size > MAX_PLAN_BYTES:
            raise PlanFileError(f"{name} is larger than {MAX_PLAN_BYTES >> 20} MiB; a plan file is a few KiB: {REMAKE}")
        chunks, size = [], 0
        while size <= MAX_PLAN_BYTES and (chunk := os.read(fd, MAX_PLAN_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_PLAN_BYTES:
            raise PlanFileError(f"{name} is larger than {MAX_PLAN_BYTES >> 20} MiB; a plan file is a few KiB: {REMAKE}")
        return b"".join(chunks)
    except OSError as exc:
        raise PlanFileError(f"{name}: cannot read the plan file: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise PlanFileError(f"the key {key[:64]!r} appears twice in one object")
        out[key] = value
    return out


def _refuse_constant(word: str) -> Any:
    raise PlanFileError(f"{word} is not a number a plan holds")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise PlanFileError(f"{text[:40]} is not a finite number")
    return value


def confirm_waivers(saved: Plan, given: tuple[str, ...]) -> None:
    """Readiness checks a saved plan waives are never taken from the file alone: a waiver changes no
    action, so the actions digest cannot show one added by hand. The person applying repeats them."""
    waived, confirmed = sorted(saved.request.ignore), sorted(set(given))
    if waived != confirmed:
        repeat = " ".join(f"--ignore-readiness {shown(i)}" for i in waived)
        raise PlanFileError(
            f"the saved plan waives the readiness checks {', '.join(map(shown, waived)) or '(none)'}, but this apply "
            f"names {', '.join(map(shown, confirmed)) or 'none'}: a waiver is confirmed where the plan is applied; "
            + (f"run `aigo-apply apply {repeat} PLANFILE`" if waived else "drop --ignore-readiness")
            + " (nothing was changed)"
        )


def approved(saved: Plan, fresh: Plan) -> Plan:
    """The plan made now, when it is the one the saved plan approved; else a refusal that says why."""
    if fresh.fingerprint != saved.fingerprint:
        raise PlanFileError(
            f"the machine changed since this plan was made (fingerprint {saved.fingerprint[:19]}... "
            f"is now {fresh.fingerprint[:19]}...); run `aigo-apply plan --out` again (nothing was changed)"
        )
    if fresh.actions_digest() != saved.actions_digest():
        now = {a.address: a.to_dict() for a in fresh.actions}
        then = {a.address: a.to_dict() for a in saved.actions}
        differ = sorted(str(k) for k in now.keys() | then.keys() if now.get(k) != then.get(k))
        raise PlanFileError(
            f"the saved plan's actions are not the ones {shown(fresh.config_file)} and this machine give now "
            f"({len(differ)} differ: {', '.join(differ[:5])}{', ...' if len(differ) > 5 else ''}): the plan "
            "was edited, or the file changed since; run `aigo-apply plan --out` again (nothing was changed)"
        )
    return fresh
