"""A saved plan (`apply PLANFILE`), read as something nobody reviewed: bounded, strict JSON, its
shape checked; then the plan made now must be the one it approved (same fingerprint, same actions),
and any readiness waiver it carries is repeated by the person applying it. Nothing else from the
file is used to act. `plan --out` writes one (save_plan)."""

from __future__ import annotations

import json
from pathlib import Path

from aigo_apply import safe_read, safe_write
from aigo_apply.errors import PlanFileError, Unreadable
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


MAX_PLAN_BYTES = safe_read.PLAN.limit  # a plan file is a few KiB


def read_plan(path: Path) -> Plan:
    """A saved plan, read as something nobody reviewed, by the one bounded reader (safe_read.PLAN):
    at most MAX_PLAN_BYTES of a regular file (a link to one is followed: the file is named on the
    command line), strict UTF-8 JSON (no BOM, no duplicate key, no NaN or Infinity, no integer of
    more than safe_read.MAX_INT_DIGITS digits), at most plan_file.MAX_DEPTH levels deep, then its shape
    checked (Plan.from_dict). Every way it can be wrong is a PlanFileError naming the file, never a traceback."""
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
        data = safe_read.json_value(text, plan_file.MAX_DEPTH, unique=True)
    except safe_read.BadData as exc:
        where = f":{exc.line}:{exc.column}" if exc.line is not None else ""
        what = str(exc).replace("is not JSON", "not a JSON plan file", 1)
        raise PlanFileError(f"{name}{where}: {what}; {REMAKE}") from None
    try:
        return Plan.from_dict(data)
    except PlanFileError as exc:
        raise PlanFileError(f"{name}: {exc}") from None


def _read(path: Path, name: str) -> bytes:
    """The file's bytes by safe_read.PLAN's rules, each refusal worded for a plan file."""
    try:
        data = safe_read.read(path, safe_read.PLAN, name)
    except Unreadable as exc:
        if exc.why == "size":
            raise PlanFileError(
                f"{name} is larger than {MAX_PLAN_BYTES >> 20} MiB; a plan file is a few KiB: {REMAKE}"
            ) from None
        if exc.why == "kind":
            raise PlanFileError(
                f"{name} is not a regular file; pass the file `aigo-apply plan --out` wrote (nothing was changed)"
            ) from None
        raise PlanFileError(
            f"{name}: cannot read the plan file: {exc.reason.removeprefix('cannot be read: ')}"
        ) from None
    assert data is not None
    return data


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
        now = {a.address: a.approval() for a in fresh.actions}
        then = {a.address: a.approval() for a in saved.actions}
        differ = sorted(str(k) for k in now.keys() | then.keys() if now.get(k) != then.get(k))
        raise PlanFileError(
            f"the saved plan's actions are not the ones {shown(fresh.config_file)} and this machine give now "
            f"({len(differ)} differ: {', '.join(differ[:5])}{', ...' if len(differ) > 5 else ''}): the plan "
            "was edited, or the file changed since; run `aigo-apply plan --out` again (nothing was changed)"
        )
    return fresh
